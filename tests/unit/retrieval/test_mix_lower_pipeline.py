"""The pipeline lowers a scope's bar where its traffic is clearly more answerable (ADR 030).

The artifact certifies 0.70 on a sample that was half unanswerable, and 0.50
where at most a quarter is. Every query here scores 0.60, where only the
sample's answerable queries did, and nowhere near its near misses: the scope
reads as almost all answerable. Its queries are then answered at the bar
certified at that share, and their confidence and bar are reported at it;
``RAGSIFT_CONFIDENCE_MIX_LOWER=off`` keeps the certified bar and the
calibrated confidence, as does a scope whose traffic shows near misses: the
near-miss table certifies nothing under 0.70 where they are many (ADR 032).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.mix import MIX_SHARES, at_share
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import (
    EVIDENCE_ADVICE_CODE,
    LOWERED_ADVICE_CODE,
    MIX_ADVICE_CODE,
    NEAR_MISS_ADVICE_CODE,
    OWN_BAR_ADVICE_CODE,
)
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.retrieval.results import evidence_for
from ragsift.schemas.evidence import EvidenceType
from ragsift.settings import CacheSettings, ConfidenceSettings, GuardrailSettings, Settings
from ragsift.wiring import build_pipeline
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER, index
from tests.unit.retrieval.test_mix_pipeline import (
    CALIBRATED,
    _ask,
    _histogram,
    _near_table,
    _with_tables,
)

__all__ = ["index"]

CERTIFIED = 0.70
LOWERED = 0.50


def _answerable_looking(near_miss_bins: set[int], share: float = 0.5) -> CalibrationArtifact:
    # Every query's confidence is 0.599, where only the sample's answerable ones scored.
    table = {
        "unanswerable_share": share,
        "thresholds": tuple(LOWERED if s <= 0.25 else CERTIFIED for s in MIX_SHARES),
        "answerable": _histogram({11, 19}),
        "unanswerable": _histogram({1, 2}),
    }
    # Certified at 0.50 where near misses and off-topic queries are few (ADR 032).
    near = _near_table(
        lambda n, o: LOWERED if n <= 0.06 and o <= 0.25 else CERTIFIED,
        {11, 19},
        near_miss_bins,
        500,
    )
    return _with_tables(table, near, CERTIFIED)


def _pipeline(
    tmp_path: Path,
    index: EdgeIndex,
    lower: Literal["auto", "off"],
    near_miss_bins: set[int] = frozenset({5, 6}),  # type: ignore[assignment]
    metrics: Metrics | None = None,
    guardrails: GuardrailSettings | None = None,
    share: float = 0.5,
) -> RetrievalPipeline:
    artifact = _answerable_looking(set(near_miss_bins), share)
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(artifact, tmp_path / "cal.json"),
            mix_lower=lower,
        ),
        cache=CacheSettings(enabled=False),
        guardrails=guardrails or GuardrailSettings(),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=metrics or Metrics())


def _bar(metrics: Metrics) -> float | None:
    labels = {"tenant": "alpha", "collection": "default"}
    return metrics.registry.get_sample_value("ragsift_answer_threshold", labels)


async def test_a_mostly_answerable_scope_is_answered_at_the_bar_of_its_mix(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    results = await _ask(_pipeline(tmp_path, index, "auto", metrics=metrics), "alpha", 260)
    first, last = results[0], results[-1]
    assert not first.answerable  # too few queries yet: the certified bar
    assert first.confidence == pytest.approx(CALIBRATED, abs=1e-4)
    assert last.answerable
    # Reported at the share's upper bound: a confidence of 0.60 among half
    # unanswerable queries means more where nearly none are.
    assert last.confidence > CALIBRATED + 0.2
    assert 0.0 < _share_behind(last.confidence) <= 0.25  # where the table certifies 0.50
    assert _bar(metrics) == LOWERED  # exported in the calibration's terms
    codes = {a.code for r in results for a in r.recommendations}
    assert not codes & {MIX_ADVICE_CODE, NEAR_MISS_ADVICE_CODE}
    # Each answer the certified bar alone would have refused says so (the audit trail).
    for result in results:
        lowered = [a for a in result.recommendations if a.code == LOWERED_ADVICE_CODE]
        assert bool(lowered) == result.answerable
    (advice,) = [a for a in last.recommendations if a.code == LOWERED_ADVICE_CODE]
    assert f"({CALIBRATED:.2f} at the calibration's mix, under its certified bar)" in advice.message
    assert "estimated from recent queries" in advice.message


async def test_a_lowered_bar_stops_where_a_querys_evidence_is_even(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """ADR 046: with a sample 35% unanswerable, a confidence of 0.65 is even evidence;
    the mix would lower the bar to 0.50, and stops at 0.65: the queries at 0.60 have
    evidence of their own against an answer, so the mix alone does not answer them."""
    metrics = Metrics()
    pipe = _pipeline(tmp_path, index, "auto", metrics=metrics, share=0.35)
    results = await _ask(pipe, "alpha", 260)
    last = results[-1]
    assert _bar(metrics) == pytest.approx(0.65)  # in the calibration's terms
    assert not any(r.answerable for r in results)
    assert last.confidence > CALIBRATED + 0.1  # still reported at the scope's mix
    (advice,) = [a for a in last.recommendations if a.code == EVIDENCE_ADVICE_CODE]
    assert f"Refused at confidence {last.confidence:.2f} ({CALIBRATED:.2f}" in advice.message
    assert "own evidence is against an answer" in advice.message
    codes = {a.code for r in results for a in r.recommendations}
    assert not codes & {LOWERED_ADVICE_CODE, MIX_ADVICE_CODE, NEAR_MISS_ADVICE_CODE}
    # Before the scope is read, the certified bar refused them: no such advice.
    assert not any(a.code == EVIDENCE_ADVICE_CODE for a in results[0].recommendations)
    # Refused for too few documents, the floor did not refuse them: no such advice.
    few = GuardrailSettings(min_documents=20)
    (tmp_path / "few").mkdir()
    pipe = _pipeline(tmp_path / "few", index, "auto", guardrails=few, share=0.35)
    refused = await _ask(pipe, "alpha", 260)
    assert {r.answerability_reason for r in refused[-10:]} == {"too_few_documents"}
    assert not any(a.code == EVIDENCE_ADVICE_CODE for r in refused for a in r.recommendations)


async def test_an_answer_at_a_bar_stopped_at_even_evidence_says_where_it_stopped(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """With a sample 45% unanswerable, even evidence is 0.55: the bar stops there,
    over the mix's 0.50, and the queries at 0.60 are answered, saying so."""
    metrics = Metrics()
    pipe = _pipeline(tmp_path, index, "auto", metrics=metrics, share=0.45)
    last = (await _ask(pipe, "alpha", 260))[-1]
    assert _bar(metrics) == pytest.approx(0.55)
    assert last.answerable
    (advice,) = [a for a in last.recommendations if a.code == LOWERED_ADVICE_CODE]
    assert advice.message.endswith("but it stops where a query's own evidence is even.")


def _share_behind(reported: float) -> float:
    """The share ``CALIBRATED`` was reported at, from what it became."""
    shares = [s / 1000 for s in range(1, 1000)]
    return min(shares, key=lambda s: abs(at_share(CALIBRATED, 0.5, s) - reported))


async def test_off_keeps_the_certified_bar_and_the_calibrated_confidence(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    results = await _ask(_pipeline(tmp_path, index, "off", metrics=metrics), "alpha", 260)
    assert not any(r.answerable for r in results)
    assert _bar(metrics) == CERTIFIED
    assert results[-1].confidence == pytest.approx(CALIBRATED, abs=1e-4)


async def test_traffic_that_looks_like_near_misses_keeps_the_certified_bar(
    tmp_path: Path, index: EdgeIndex
) -> None:
    # The sample's near misses scored where this traffic does: the two-kind reading
    # sees answerable queries, the three-kind one near misses, and the bar stays.
    results = await _ask(_pipeline(tmp_path, index, "auto", {11}), "alpha", 260)
    assert not any(r.answerable for r in results)
    assert results[-1].confidence == pytest.approx(CALIBRATED, abs=1e-4)


async def test_a_tenants_own_answer_threshold_is_not_lowered(
    tmp_path: Path, index: EdgeIndex
) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  alpha: {answer_threshold: 0.65}\n")  # above 0.60
    guard = GuardrailSettings(tenant_thresholds_path=path)
    results = await _ask(_pipeline(tmp_path, index, "auto", guardrails=guard), "alpha", 260)
    assert not any(r.answerable for r in results)
    # Still reported at the scope's mix, its bar with it: the tenant's 0.65 is in
    # the calibration's terms, as the confidence it is compared with.
    assert results[-1].confidence > CALIBRATED + 0.2


async def test_a_collections_floor_refusal_is_not_told_as_the_mixs(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """Certified 0.55, lowered by the mix to 0.50: the queries at 0.60 are answered
    by both, but a collection's threshold of 0.62 refuses them. That floor holds in
    the calibration's terms while the confidence is reported at the mix (near 0.99):
    the refusal said the mix certified only 0.99 or more, and now names the floor."""
    table = {
        "unanswerable_share": 0.5,
        "thresholds": tuple(LOWERED if s <= 0.25 else 0.55 for s in MIX_SHARES),
        "answerable": _histogram({11, 19}),
        "unanswerable": _histogram({1, 2}),
    }
    near = _near_table(
        lambda n, o: LOWERED if n <= 0.06 and o <= 0.25 else 0.55, {11, 19}, {5, 6}, 500
    )
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_with_tables(table, near, 0.55), tmp_path / "c.json")
        ),
        cache=CacheSettings(enabled=False),
        guardrails=GuardrailSettings(collection_thresholds={"default": 0.62}),
    )
    pipe = build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())
    results = await _ask(pipe, "alpha", 260)
    assert not any(r.answerable for r in results)
    last = results[-1]
    assert last.confidence > 0.62  # reported at the scope's mix
    codes = {a.code for r in results for a in r.recommendations}
    assert not codes & {MIX_ADVICE_CODE, NEAR_MISS_ADVICE_CODE, LOWERED_ADVICE_CODE}
    (advice,) = [a for a in last.recommendations if a.code == OWN_BAR_ADVICE_CODE]
    assert f"({CALIBRATED:.2f} at the calibration's mix)" in advice.message
    assert "own bar of 0.62" in advice.message
    # Refused at a shown ~0.99: LOW and advisory only, not HIGH "safe to automate"
    # (ADR 049), and the audit trail records it.
    assert (last.status, last.level, last.advisory_flag) == (
        "low_confidence",
        "LOW",
        "LOW_CONFIDENCE",
    )
    assert last.advisory_only
    assert last.should_flag_for_review
    (event,) = [
        e
        for e in evidence_for(last, advisory_threshold=0.7, source="test")
        if e.type == EvidenceType.ADVISORY_LOW_CONFIDENCE
    ]
    assert event.data.details["refused"] == "low_confidence"
    assert "the query was refused" in event.data.summary
