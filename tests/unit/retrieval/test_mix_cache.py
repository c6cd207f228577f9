"""A scope's moved bar, and the paths that could see a query twice or start cold.

* A corrective retry is the same user query: the scope's mix counts it once.
* A cached result keeps the bar it was scored at: a duplicate delivery gets the
  result the first copy got.
* A restarted process takes up its scopes' saved histograms.
* A result served again (a cache hit, a query sharing another's search) is
  counted in its scope's mix, at the confidence it was scored at.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ragsift.confidence import CalibrationArtifact, load_default_calibration, save_calibration
from ragsift.confidence.mix_state import FileMixState
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.results import searched_dense_only
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import CacheSettings, ConfidenceSettings, CorrectiveSettings, Settings
from ragsift.wiring import MIX_STATE_FILE, build_pipeline, restore_mix, save_mix
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER
from tests.unit.retrieval.test_mix_pipeline import _artifact, index

__all__ = ["index"]


def _pipeline(
    tmp_path: Path, index: EdgeIndex, *, cache: bool, corrective: bool = False
) -> RetrievalPipeline:
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_artifact(0.4), tmp_path / "cal.json"),
            unanswerable_share="auto",
        ),
        cache=CacheSettings(enabled=cache),
        # Every query's confidence is 0.60, under 0.99: every query is retried once.
        corrective=CorrectiveSettings(enabled=corrective, trigger_confidence=0.99),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())


async def _ask(pipe: RetrievalPipeline, texts: list[str], tag: str) -> list[RetrievalResult]:
    events = [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id="alpha", query=text)
        for i, text in enumerate(texts)
    ]
    outs = await pipe.process(events)
    assert all(isinstance(o, PipelineOutput) for o in outs), outs
    return [o.result for o in outs]  # type: ignore[union-attr]


def _distinct(n: int, tag: str) -> list[str]:
    return [f"How are refunds paid {tag} {i}" for i in range(n)]


async def test_a_corrective_retry_is_counted_once_in_its_scopes_mix(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe = _pipeline(tmp_path, index, cache=False, corrective=True)
    assert pipe.mix is not None
    version = pipe.engines.calibration_version
    results = await _ask(pipe, _distinct(20, "a"), "a")
    assert all(r.corrective is not None for r in results)  # each was retried
    # 20 queries, under the 30 a reading needs; counted twice they would be 40.
    assert pipe.mix.reading("alpha", "default", version) is None
    await _ask(pipe, _distinct(15, "b"), "b")
    assert pipe.mix.reading("alpha", "default", version) is not None


async def test_a_cached_result_keeps_the_bar_it_was_scored_at(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """Deliberately: a duplicate delivery (at-least-once) must get the result the first
    copy got, whatever the scope's bar has done since; the entry's TTL bounds how
    long a bar outlives a move (keying entries by the moved share broke that)."""
    pipe = _pipeline(tmp_path, index, cache=True)
    question = "How are refunds paid?"
    (before,) = await _ask(pipe, [question], "q1")
    assert before.answerable  # a young scope: the certified bar
    flood = await _ask(pipe, _distinct(260, "flood"), "f")
    assert not flood[-1].answerable  # the scope's bar has moved
    (again,) = await _ask(pipe, [question], "q1")  # the same event, delivered again
    assert again.cache.hit
    assert again.answerable
    assert (again.result_id, again.confidence) == (before.result_id, before.confidence)


async def test_a_restarted_pipeline_takes_up_its_scopes_mix_where_it_was(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """What `ragsift ask` (a process each) and a restarted worker go through: the
    scope's first query is decided at the bar its traffic had moved to."""
    store = FileMixState(tmp_path / "calibrations" / MIX_STATE_FILE)
    first = _pipeline(tmp_path, index, cache=False)
    assert restore_mix(first, store) == 0  # nothing saved yet
    flood = await _ask(first, _distinct(260, "flood"), "f")
    assert not flood[-1].answerable
    assert save_mix(first, store) == 1
    cold = _pipeline(tmp_path, index, cache=False)
    (fresh,) = await _ask(cold, ["How are refunds paid?"], "c")
    assert fresh.answerable  # without the saved state: the certified bar
    restarted = _pipeline(tmp_path, index, cache=False)
    assert restore_mix(restarted, store) == 1
    (again,) = await _ask(restarted, ["How are refunds paid?"], "r")
    assert not again.answerable
    assert any(a.code == MIX_ADVICE_CODE for a in again.recommendations)


async def test_cache_hits_are_counted_in_their_scopes_mix(tmp_path: Path, index: EdgeIndex) -> None:
    """A confident result is cached for a day and one without context not at all:
    counting cache misses only, a scope whose answerable questions recur read as
    mostly unanswerable, and its bar rose for nothing."""
    pipe = _pipeline(tmp_path, index, cache=True)
    assert pipe.mix is not None
    version = pipe.engines.calibration_version
    question = "How are refunds paid?"
    served = [(await _ask(pipe, [question], f"q{i}"))[0] for i in range(35)]
    assert [r.cache.hit for r in served] == [False] + [True] * 34
    # 35 deliveries, over the 30 a reading needs; one if hits were not counted.
    assert pipe.mix.reading("alpha", "default", version) is not None


async def test_queries_sharing_a_search_are_each_counted(tmp_path: Path, index: EdgeIndex) -> None:
    """Single flight (keyed by the cache key): one search, its result shared."""
    pipe = _pipeline(tmp_path, index, cache=True)
    assert pipe.mix is not None
    version = pipe.engines.calibration_version
    results = await _ask(pipe, ["How are refunds paid?"] * 35, "same")  # one search
    assert sum(r.cache.hit for r in results) == 34  # shared results are marked as hits
    assert pipe.mix.reading("alpha", "default", version) is not None


async def test_a_reported_result_scores_again_to_the_confidence_it_was_given(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """What a cache hit is counted at: its signals through the calibration it names
    give back its confidence (the shipped model, several features; no mix mapping)."""
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(unanswerable_share="off"),
        cache=CacheSettings(enabled=False),
    )
    pipe = build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())
    calibration = pipe.engines.calibration
    assert calibration is not None
    assert len(calibration.features) > 1
    scorer = CalibratedScorer(calibration)
    texts = ["How are refunds paid?", "Who signs the lease?", "zebra quantum marmalade"]
    results = await _ask(pipe, texts, "s")
    assert {r.breakdown.calibration_version for r in results} == {calibration.version}
    again = scorer.score_reported(
        [r.breakdown.signals for r in results], [len(r.hits) for r in results]
    )
    for r, confidence in zip(results, again.tolist(), strict=True):
        assert confidence == pytest.approx(r.confidence, abs=5e-7)  # results carry 6 decimals
    assert len({r.confidence for r in results}) > 1  # not one constant


async def test_a_dense_only_result_scores_again_to_the_confidence_it_was_given(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """ADR 028: a ``mode: dense`` query's agreement is imputed as its calibration fit it;
    scored again from its result (a feedback re-fit does), it is imputed so again when
    told it was dense-only."""
    shipped = build_pipeline(
        Settings(data_dir=tmp_path / "shipped"), index=index, embedder=EMBEDDER, metrics=Metrics()
    ).engines.calibration
    assert shipped is not None
    assert "agreement" in shipped.features
    fit = {"intercept": 0.1, "slope": 0.3, "n_examples": 1, "risk_upper_bound": 0.1, "coverage": 0}
    fitted = CalibrationArtifact.model_validate(
        {**shipped.model_dump(mode="json"), "version": "", "dense_only": fit}
    )
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(fitted, tmp_path / "cal.json"),
            unanswerable_share="off",
        ),
        cache=CacheSettings(enabled=False),
    )
    pipe = build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())
    texts = ["How are refunds paid?", "Who signs the lease?"]
    events = [
        QueryEvent(query_id=f"d-{i}", tenant_id="alpha", query=t, mode=mode)
        for i, t in enumerate(texts)
        for mode in ("dense", "hybrid")
    ]
    outs = await pipe.process(events)
    results = [o.result for o in outs]  # type: ignore[union-attr]
    scorer = CalibratedScorer(fitted)
    dense = [searched_dense_only(r) for r in results]
    assert dense == [True, False, True, False]
    signals, kept = [r.breakdown.signals for r in results], [len(r.hits) for r in results]
    again = scorer.score_reported(signals, kept, dense)
    for r, confidence in zip(results, again.tolist(), strict=True):
        assert confidence == pytest.approx(r.confidence, abs=5e-7)
    plain = scorer.score_reported(signals, kept)  # as if no query were dense-only
    assert kept[0] > 0
    assert plain[0] > again[0]
    assert (plain[1], plain[3]) == (again[1], again[3])


def test_hostile_reported_signals_score_as_missing_or_clipped() -> None:
    """Signals come back from a cache or a topic: overflowing, infinite, negative or
    unknown values give a confidence in [0, 1], never NaN, and nothing raises."""
    scorer = CalibratedScorer(load_default_calibration())
    reports = [
        {"top_score": math.inf, "support": -1e308, "consensus": math.nan},
        {"top_score": math.nan},
        {"top_score": 1e308, "agreement": math.inf, "unknown": 5.0},
        {},
        {"top_score": -3.0},
    ]
    got = scorer.score_reported(reports, [1, 1, 1, 0, 1])
    assert np.isfinite(got).all()
    assert ((got >= 0.0) & (got <= 1.0)).all()
    assert got[3] == 0.0  # no kept hits
    # Non-finite is missing (a missing top score reads as 0, as the pipeline reports
    # none); finite values out of range are clipped.
    plain = scorer.score_reported(
        [{"top_score": 0.0, "support": 0.0}, {"top_score": 0.0}, {"top_score": 1.0}], [1, 1, 1]
    )
    assert (got[0], got[1], got[2], got[4]) == (plain[0], plain[1], plain[2], plain[1])


async def test_a_tampered_cache_entry_is_served_and_counted_without_harm(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """An entry whose signals overflow JSON's floats (1e999 reads as infinity) is still
    a hit; the mix counts it at a clipped confidence and the batch goes on."""
    pipe = _pipeline(tmp_path, index, cache=True)
    assert pipe.mix is not None
    cache = pipe.cached.cache
    assert cache is not None
    await _ask(pipe, ["How are refunds paid?"], "first")
    (key,) = list(cache._data)  # type: ignore[attr-defined]  # the in-memory cache's store
    raw = await cache.get(key)
    assert raw is not None
    doc = json.loads(raw)
    doc["breakdown"]["signals"] = {"top_score": "__BIG__", "support": "__SMALL__"}
    tampered = json.dumps(doc).replace('"__BIG__"', "1e999").replace('"__SMALL__"', "-1e999")
    await cache.set(key, tampered.encode(), 300)
    for i in range(34):
        (served,) = await _ask(pipe, ["How are refunds paid?"], f"again{i}")
        assert served.cache.hit
    version = pipe.engines.calibration_version
    reading = pipe.mix.reading("alpha", "default", version)
    assert reading is not None
    assert 0.0 <= reading.share <= 1.0
