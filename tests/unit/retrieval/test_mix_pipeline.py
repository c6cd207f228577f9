"""The pipeline raises a scope's answer threshold when its traffic is mostly unanswerable.

The artifact certifies 0.30 on a sample that was one part unanswerable in ten.
A tenant whose queries all look unanswerable (their confidences sit where the
sample's unanswerable ones did) gets the bar certified at that mix: its
answerable-looking queries are refused with an ``unanswerable_mix`` advice,
their confidence is reported at that mix (ADR 016), the scope's estimated share
is exported, and another tenant is untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.artifact import ConformalSpec, DataSummary
from ragsift.confidence.mix import HISTOGRAM_BINS, MIX_SHARES, MixTable, at_share
from ragsift.confidence.near_miss import NEAR_MISS_SHARES, OUT_OF_SCOPE_SHARES, NearMissTable
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import CacheSettings, ConfidenceSettings, Settings
from ragsift.wiring import build_pipeline
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER, index

__all__ = ["index"]  # the two tenants' shard, shared with the scoped-calibration tests

CERTIFIED = 0.30
CALIBRATED = 1.0 / (1.0 + math.exp(-0.4))  # every query's confidence at the sample's mix


def _histogram(bins: set[int]) -> tuple[float, ...]:
    return tuple(1.0 / len(bins) if b in bins else 0.0 for b in range(HISTOGRAM_BINS))


def _artifact(intercept: float) -> CalibrationArtifact:
    """Certified 0.30 at a 10% unanswerable mix; nothing is certified past 20%."""
    table = MixTable(
        unanswerable_share=0.1,
        shares=MIX_SHARES,
        thresholds=tuple(CERTIFIED if s <= 0.2 else 1.0 for s in MIX_SHARES),
        # Answerable queries scored 0.95-1.0; unanswerable ones 0.55-0.65 (bins 11, 12).
        answerable=_histogram({19}),
        unanswerable=_histogram({11, 12}),
        n_answerable=900,
        n_unanswerable=100,
    )
    return CalibrationArtifact(
        embedder_id=EMBEDDER.embedder_id,
        metric="cosine",
        features=("top_score",),
        coefficients=(0.0,),
        intercept=intercept,  # every query's confidence is sigmoid(intercept)
        similarity_threshold=0.01,
        conformal=ConformalSpec(
            alpha=0.1,
            delta=0.1,
            threshold=CERTIFIED,
            feasible=True,
            method="test",
            n_calibration=1_000,
            mix=table,
        ),
        data=DataSummary(source="test", n_examples=1_000),
    )


def _near_table(
    bar: Callable[[float, float], float],
    answerable: set[int],
    near_miss: set[int],
    n_answerable: int,
) -> NearMissTable:
    """A near-miss table of a 1,000-query sample: 50 near misses (5%) scoring in the
    ``near_miss`` bins, ``n_answerable`` answerable ones, the rest off-topic (bins 1,
    2); certified ``bar(near-miss share, off-topic share)`` at each tabulated pair."""
    n_out = 1_000 - 50 - n_answerable
    return NearMissTable(
        near_miss_share=0.05,
        out_of_scope_share=n_out / 1_000,
        near_miss_shares=NEAR_MISS_SHARES,
        out_of_scope_shares=OUT_OF_SCOPE_SHARES,
        thresholds=tuple(tuple(bar(n, o) for o in OUT_OF_SCOPE_SHARES) for n in NEAR_MISS_SHARES),
        answerable=_histogram(answerable),
        near_miss=_histogram(near_miss),
        out_of_scope=_histogram({1, 2}),
        n_answerable=n_answerable,
        n_near_miss=50,
        n_out_of_scope=n_out,
    )


def _with_tables(
    mix: Mapping[str, object], near: NearMissTable, threshold: float = CERTIFIED
) -> CalibrationArtifact:
    """``_artifact(0.4)`` (every query's confidence sigmoid(0.4) = 0.599) certified at
    ``threshold``, with these fields of its mix table replaced and this near-miss table."""
    base = _artifact(0.4)
    assert base.conformal.mix is not None
    table = MixTable.model_validate({**base.conformal.mix.model_dump(), **mix})
    conformal = base.conformal.model_copy(
        update={"threshold": threshold, "mix": table, "near_miss": near}
    )
    data = base.model_dump()
    data.update(version="", conformal=conformal.model_dump())
    return CalibrationArtifact.model_validate(data)


def _pipeline(
    tmp_path: Path, index: EdgeIndex, share: float | str, metrics: Metrics
) -> RetrievalPipeline:
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_artifact(0.4), tmp_path / "cal.json"),
            unanswerable_share=share,
        ),
        cache=CacheSettings(enabled=False),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=metrics)


async def _ask(pipe: RetrievalPipeline, tenant: str, n: int) -> list[RetrievalResult]:
    events = [
        QueryEvent(query_id=f"{tenant}-{i}", tenant_id=tenant, query=f"How are refunds paid {i}")
        for i in range(n)
    ]
    outs = await pipe.process(events)
    assert all(isinstance(o, PipelineOutput) for o in outs), outs
    return [o.result for o in outs]  # type: ignore[union-attr]


async def test_a_mostly_unanswerable_scope_gets_the_bar_of_its_mix(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    pipe = _pipeline(tmp_path, index, "auto", metrics)
    # sigmoid(0.4) = 0.599: where the sample's unanswerable queries were, above 0.30.
    results = await _ask(pipe, "alpha", 260)
    first, last = results[0], results[-1]
    assert first.answerable  # too few queries yet: the certified bar
    assert not any(a.code == MIX_ADVICE_CODE for a in first.recommendations)
    assert not last.answerable
    (advice,) = [a for a in last.recommendations if a.code == MIX_ADVICE_CODE]
    assert "estimated from recent queries" in advice.message
    assert "no confidence is certified" in advice.message
    # Reported at the scope's mix, not only held to its bar: what 0.60 meant at one
    # unanswerable query in ten means far less when nearly all are.
    assert first.confidence == pytest.approx(CALIBRATED, abs=1e-4)
    assert last.confidence == pytest.approx(at_share(CALIBRATED, 0.1, MIX_SHARES[-1]), abs=1e-4)
    assert last.confidence < 0.01
    assert (first.level, last.level) == ("LOW", "VERY_LOW")
    assert f"({CALIBRATED:.2f} at the calibration's mix)" in advice.message
    share = metrics.registry.get_sample_value(
        "ragsift_unanswerable_share", {"tenant": "alpha", "collection": "default"}
    )
    assert share is not None
    assert share > 0.9
    # These queries score over 0.05, where the raise reads them too (ADR 045)
    raise_share = metrics.registry.get_sample_value(
        "ragsift_unanswerable_share_raise", {"tenant": "alpha", "collection": "default"}
    )
    assert raise_share is not None
    assert raise_share > 0.9
    # Another tenant's scope has its own estimate: still too few queries.
    (other,) = await _ask(pipe, "beta", 1)
    assert other.answerable


async def test_off_keeps_the_certified_bar_and_a_declared_share_applies_at_once(
    tmp_path: Path, index: EdgeIndex
) -> None:
    off = await _ask(_pipeline(tmp_path, index, "off", Metrics()), "alpha", 260)
    assert all(r.answerable for r in off)
    assert {round(r.confidence, 4) for r in off} == {round(CALIBRATED, 4)}
    declared = await _ask(_pipeline(tmp_path, index, 0.5, Metrics()), "alpha", 1)
    assert not declared[0].answerable
    assert declared[0].confidence == pytest.approx(at_share(CALIBRATED, 0.1, 0.5), abs=1e-4)
    (advice,) = [a for a in declared[0].recommendations if a.code == MIX_ADVICE_CODE]
    assert "(declared)" in advice.message
