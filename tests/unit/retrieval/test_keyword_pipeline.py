"""Keyword-only queries through the pipeline (ADR 029): scored by the artifact's keyword
model at its own certified bar, read at their scope's mix with its own tables but never
counted in it, never counted again from the cache, and their labels never re-fit the
hybrid model."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.keyword import KeywordFit
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.results import searched_dense_only, searched_keyword
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import CacheSettings, ConfidenceSettings, CorrectiveSettings, Settings
from ragsift.wiring import build_pipeline
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER
from tests.unit.retrieval.test_mix_pipeline import _artifact, index

__all__ = ["index"]

#: sigmoid(2.0): every keyword query's confidence under the test's keyword model.
KEYWORD_CONFIDENCE = 0.8808
KEYWORD_BAR = 0.7


def _with_keyword(base: CalibrationArtifact) -> CalibrationArtifact:
    """``base`` (every hybrid query 0.599, certified 0.30 up to a 20% mix) with a keyword
    model giving every keyword query 0.881, certified 0.70 up to the same mix."""
    table = base.conformal.mix
    assert table is not None
    mix = table.model_copy(
        update={"thresholds": tuple(KEYWORD_BAR if t < 1.0 else 1.0 for t in table.thresholds)}
    )
    part = KeywordFit(
        features=("top_score",),
        coefficients=(0.0,),
        intercept=2.0,
        similarity_threshold=0.01,
        conformal=base.conformal.model_copy(update={"threshold": KEYWORD_BAR, "mix": mix}),
    )
    return CalibrationArtifact.model_validate(
        {**base.model_dump(mode="json"), "version": "", "keyword": part.model_dump()}
    )


def _pipeline(
    tmp_path: Path, index: EdgeIndex, *, cache: bool = False, retry: bool = False
) -> RetrievalPipeline:
    artifact = _with_keyword(_artifact(0.4))
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(artifact, tmp_path / "cal.json"),
            unanswerable_share="auto",
        ),
        cache=CacheSettings(enabled=cache),
        # Every hybrid query (0.599) is retried keyword-only, and its retry (0.881)
        # would win on confidence alone.
        corrective=CorrectiveSettings(
            enabled=retry, strategy="keyword", trigger_confidence=0.99, win_confidence=0.0
        ),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=Metrics())


async def _ask(
    pipe: RetrievalPipeline, n: int, mode: str, tag: str, text: str = "refunds paid"
) -> list[RetrievalResult]:
    events = [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id="alpha", query=f"{text} {i}", mode=mode)
        for i in range(n)
    ]
    outs = await pipe.process(events)
    assert all(isinstance(o, PipelineOutput) for o in outs), outs
    return [o.result for o in outs]  # type: ignore[union-attr]


async def test_a_keyword_query_is_scored_by_the_keyword_model_and_not_counted_in_the_mix(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe = _pipeline(tmp_path, index)
    artifact = pipe.engines.calibration
    assert artifact is not None
    keyword = await _ask(pipe, 260, "keyword", "k")
    for r in (keyword[0], keyword[-1]):
        assert r.breakdown.scorer == "calibrated"
        assert r.breakdown.calibration_version == artifact.version
        assert r.confidence == pytest.approx(KEYWORD_CONFIDENCE, abs=1e-4)
        assert r.answerable  # 0.881 clears the keyword model's own 0.70
        assert searched_keyword(r)
        assert not searched_dense_only(r)
    # 260 keyword queries and no scope histogram: they are on another scale.
    assert pipe.mix is not None
    assert pipe.mix.export() == []
    view = artifact.keyword_model()
    assert view is not None
    again = CalibratedScorer(view).score_reported(
        [keyword[0].breakdown.signals], [len(keyword[0].hits)]
    )
    assert again[0] == pytest.approx(keyword[0].confidence, abs=5e-7)


async def test_a_keyword_query_is_held_to_its_scopes_mix_read_on_its_own_tables(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """The scope's hybrid queries (0.599, where the fit's unanswerable ones were) make
    its estimated mix nearly all unanswerable: the keyword table certifies nothing
    there, so a keyword query is refused and told why."""
    pipe = _pipeline(tmp_path, index)
    (before,) = await _ask(pipe, 1, "keyword", "k0")
    assert before.answerable
    await _ask(pipe, 260, "hybrid", "h")
    assert pipe.mix is not None
    (scope,) = pipe.mix.export()
    counted = sum(scope.counts)
    (after,) = await _ask(pipe, 1, "keyword", "k1")
    assert not after.answerable
    assert any(a.code == MIX_ADVICE_CODE for a in after.recommendations)
    (scope,) = pipe.mix.export()
    assert sum(scope.counts) == pytest.approx(counted)  # read, not counted


async def test_a_cached_keyword_result_is_not_counted_in_the_mix_again(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """A result served again is counted in its scope's mix from its signals (ADR 016's
    reuse rule): a keyword one would be read through the hybrid model. It is left out."""
    pipe = _pipeline(tmp_path, index, cache=True)
    first = await _ask(pipe, 3, "keyword", "first")
    served = await _ask(pipe, 3, "keyword", "again")
    assert [r.cache.hit for r in first + served] == [False] * 3 + [True] * 3
    assert all(r.answerable and r.breakdown.scorer == "calibrated" for r in served)
    assert pipe.mix is not None
    assert pipe.mix.export() == []


async def test_a_keyword_retry_never_wins_against_the_hybrid_model(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """Two models' probabilities: keeping the higher is a selection neither certificate
    covers, and eval cannot replay it (ragsift/retrieval/corrective.py)."""
    pipe = _pipeline(tmp_path, index, retry=True)
    results = await _ask(pipe, 4, "hybrid", "h")
    for r in results:
        assert r.corrective is not None
        assert (r.corrective.won, r.corrective.reason) == ("first", "not_comparable")
        assert r.corrective.retry_confidence == pytest.approx(KEYWORD_CONFIDENCE, abs=1e-4)
        assert r.confidence < KEYWORD_CONFIDENCE
        assert not searched_keyword(r)
