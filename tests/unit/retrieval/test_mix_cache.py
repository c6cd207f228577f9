"""A scope's moved bar, and the paths that could see a query twice, stale or cold.

* A corrective retry is the same user query: the scope's mix counts it once.
* A cached result was scored at the bar of its time: once the scope's mix moves
  the bar, the old entry is not served (the key names the moved share), and the
  result scored at the new bar is what the user gets.
* A restarted process takes up its scopes' saved histograms.
"""

from __future__ import annotations

from pathlib import Path

from ragsift.confidence import save_calibration
from ragsift.confidence.mix_state import FileMixState
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import CacheSettings, ConfidenceSettings, CorrectiveSettings, Settings
from ragsift.wiring import MIX_STATE_FILE, build_pipeline, restore_mix, save_mix
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER
from tests.unit.retrieval.test_mix_pipeline import _artifact, index

__all__ = ["index"]


def _pipeline(
    tmp_path: Path, index: EdgeIndex, *, cache: bool, corrective: bool = False
) -> RetrievalPipeline:
    # Refusals are cached too here (0 s by default): a stale one would be stored.
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_artifact(0.4), tmp_path / "cal.json"),
            unanswerable_share="auto",
        ),
        cache=CacheSettings(enabled=cache, ttl_none_s=300),
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


async def test_an_entry_cached_before_the_mix_moved_the_bar_is_not_served(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe = _pipeline(tmp_path, index, cache=True)
    question = "How are refunds paid?"
    (before,) = await _ask(pipe, [question], "q1")
    assert before.answerable  # a young scope: the certified bar
    (again,) = await _ask(pipe, [question], "q2")
    assert again.cache.hit  # cached, as before
    assert again.answerable
    # The scope's traffic turns out mostly unanswerable-looking: its bar moves.
    flood = await _ask(pipe, _distinct(260, "flood"), "f")
    assert not flood[-1].answerable
    (after,) = await _ask(pipe, [question], "q3")
    assert not after.cache.hit
    assert not after.answerable
    assert any(a.code == MIX_ADVICE_CODE for a in after.recommendations)
    assert after.confidence < before.confidence  # reported at the scope's mix (ADR 016)


async def test_results_scored_after_the_bar_moved_mid_batch_are_not_stored_under_its_keys(
    tmp_path: Path, index: EdgeIndex
) -> None:
    """A batch's keys are made before it is scored; the 30th query's reading moves the
    bar for the rest, whose results would otherwise sit under keys of the old bar."""
    pipe = _pipeline(tmp_path, index, cache=True)
    results = await _ask(pipe, _distinct(64, "m"), "m")
    refused = [r for r in results if not r.answerable]
    assert results[0].answerable
    assert refused  # the bar moved within the batch
    assert isinstance(pipe.cache, InMemoryCache)
    stored = [RetrievalResult.model_validate_json(raw) for _, raw in pipe.cache._data.values()]
    assert len(stored) == len(results) - len(refused)
    assert all(r.answerable for r in stored)


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
