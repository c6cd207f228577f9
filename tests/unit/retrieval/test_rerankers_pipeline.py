"""The reranker in the pipeline: scores reach the ``rerank`` channel and ``reranker_impact``;
a failing reranker never fails a query; settings build the configured backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ragsift.confidence import normalize_scores
from ragsift.errors import ConfigurationError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import EngineSet
from ragsift.retrieval.index import RRF_K
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.rerank import (
    HttpReranker,
    OnnxCrossEncoder,
    RerankerResponseError,
    RerankerUnavailableError,
)
from ragsift.schemas import QueryEvent
from ragsift.settings import ConfidenceSettings, RerankerSettings, Settings
from ragsift.wiring import build_pipeline, build_reranker

EMBEDDER = HashingEmbedder()
QUESTION = "How are refunds paid?"
# The retriever ranks these by word overlap; the reranker below prefers the one that
# answers (it mentions "bank transfer"), whatever rank the retriever gave it.
DOCS = {
    "refunds.md": "Refunds are paid. Refunds are paid. How refunds are paid is a question.",
    "answer.md": "Refunds are paid within fourteen days by bank transfer.",
    "policy.md": "Our refund policy covers how refunds are paid for damaged goods.",
    "shipping.md": "Shipping takes three days; refunds are paid after the return arrives.",
}
ANSWER = DOCS["answer.md"]


class KeywordReranker:
    """A real in-process reranker: the logit is high when the passage says 'bank transfer'."""

    reranker_id = "test:keyword"

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, int]]] = []

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        return [4.0 if "bank transfer" in t else -2.0 - 0.1 * i for i, t in enumerate(texts)]

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        self.calls.append([(q, len(t)) for q, t in queries])
        return [await self.rerank(q, t) for q, t in queries]

    async def close(self) -> None:
        return None


class BrokenReranker(KeywordReranker):
    """Fails every query whose text says 'broken', the way a backend would; the rest score."""

    reranker_id = "test:broken"

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        return [self.error if "broken" in q else await self.rerank(q, t) for q, t in queries]


class RaisingReranker(KeywordReranker):
    """A backend whose whole batch call raises something unexpected."""

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        raise ZeroDivisionError("bug in a backend")


def make_settings(tmp_path: Path, **confidence: Any) -> Settings:
    # Low bars: the hashing embedder's cosines are small; the plumbing is what is checked.
    fields: dict[str, Any] = {
        "scorer": "weighted",
        "similarity_threshold": 0.01,
        "high_threshold": 0.30,
        "medium_threshold": 0.20,
        "low_threshold": 0.10,
    }
    fields.update(confidence)
    return Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(**fields),
        reranker=RerankerSettings(candidates=4, threshold=0.5),
    )


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    built = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    await indexer.ingest(
        "alpha", "default", [SourceDocument(name, text) for name, text in DOCS.items()]
    )
    yield built
    await built.close()


def build(
    tmp_path: Path, index: EdgeIndex, reranker: Any, **confidence: Any
) -> tuple[RetrievalPipeline, Metrics, InMemoryCache]:
    metrics, cache = Metrics(), InMemoryCache()
    pipe = build_pipeline(
        make_settings(tmp_path, **confidence),
        index=index,
        embedder=EMBEDDER,
        metrics=metrics,
        cache=cache,
        reranker=reranker,
    )
    return pipe, metrics, cache


def q(query_id: str = "q1", text: str = QUESTION, **extra: Any) -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id="alpha", query=text, **extra)


def ok(output: PipelineOutput | Exception) -> PipelineOutput:
    assert isinstance(output, PipelineOutput), output
    return output


def failures(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("ragsift_reranker_failures_total", {"reason": reason})
    return value or 0.0


async def test_reranker_scores_reach_the_channel_and_reranker_impact(
    tmp_path: Path, index: EdgeIndex
) -> None:
    plain, _, _ = build(tmp_path, index, None)
    before = ok((await plain.process([q(k=1)]))[0]).result
    assert before.hits[0].text != ANSWER  # the retriever alone ranks the answer lower
    assert "reranker_impact" not in before.breakdown.signals

    reranker = KeywordReranker()
    pipe, metrics, _ = build(tmp_path, index, reranker)
    result = ok((await pipe.process([q(k=1)]))[0]).result
    assert result.outcome == "ok"
    # k=1, but the search filled the 4-candidate window and the reranker picked the answer.
    assert reranker.calls == [[(QUESTION, 4)]]
    assert [h.text for h in result.hits] == [ANSWER]
    assert result.hits[0].raw_scores["rerank"] == 4.0
    assert result.total_found == 1
    assert "rerank" in result.timings_ms
    assert "rerank" not in before.timings_ms
    # A rank correlation needs two hits: with k=1 there is no reranker_impact.
    assert "reranker_impact" not in result.breakdown.signals
    two = ok((await pipe.process([q("q2", k=2)]))[0]).result
    assert two.hits[0].text == ANSWER
    assert two.total_found == 2
    assert "reranker_impact" in two.breakdown.signals
    assert result.breakdown.scorer == "weighted"
    assert not result.recommendations or all(
        r.code != "reranker_unavailable" for r in result.recommendations
    )
    assert failures(metrics, "unavailable") == 0
    timing = metrics.registry.get_sample_value(
        "ragsift_stage_duration_seconds_count", {"stage": "rerank"}
    )
    assert timing == 2


async def test_reranker_impact_measures_disagreement_with_the_fusion(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe, _, _ = build(tmp_path, index, KeywordReranker())
    result = ok((await pipe.process([q(k=4)]))[0]).result
    assert len(result.hits) + len(result.dropped) == 4
    impact = result.breakdown.signals["reranker_impact"]
    assert 0.0 < impact <= 2.0  # the reranker reorders what RRF ranked: rho < 1


async def test_one_rerank_call_for_the_whole_batch(tmp_path: Path, index: EdgeIndex) -> None:
    reranker = KeywordReranker()
    pipe, _, _ = build(tmp_path, index, reranker)
    outputs = await pipe.process([q("q1", k=1), q("q2", "Which refund policy applies?", k=2)])
    assert all(ok(o).result.outcome == "ok" for o in outputs)
    assert len(reranker.calls) == 1
    assert [n for _, n in reranker.calls[0]] == [4, 4]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RerankerUnavailableError("reranker down", attempts=3), "unavailable"),
        (RerankerResponseError("malformed rerank answer"), "response"),
    ],
)
async def test_failing_reranker_never_fails_the_query(
    tmp_path: Path, index: EdgeIndex, error: Exception, reason: str
) -> None:
    pipe, metrics, cache = build(tmp_path, index, BrokenReranker(error))
    broken, fine = await pipe.process([q("q1", "broken: how are refunds paid?", k=2), q("q2", k=2)])
    failed = ok(broken).result
    assert failed.outcome == "ok"
    assert failed.hits  # the retriever's own best hit
    assert "rerank" not in failed.hits[0].raw_scores
    assert "reranker_impact" not in failed.breakdown.signals
    assert "reranker_unavailable" in [r.code for r in failed.recommendations]
    assert failures(metrics, reason) == 1
    # The other query of the batch kept its reranker scores.
    assert ok(fine).result.hits[0].text == ANSWER
    assert "reranker_impact" in ok(fine).result.breakdown.signals
    # The degraded result is not cached: the next ask tries the reranker again.
    again = ok((await pipe.process([q("q3", "broken: how are refunds paid?", k=2)]))[0])
    assert not again.result.cache.hit
    assert failures(metrics, reason) == 2
    assert ok((await pipe.process([q("q4", k=2)]))[0]).result.cache.hit
    assert len(cache._data) == 1


async def test_a_backend_raising_fails_no_query(tmp_path: Path, index: EdgeIndex) -> None:
    pipe, metrics, _ = build(tmp_path, index, RaisingReranker())
    result = ok((await pipe.process([q(k=2)]))[0]).result
    assert result.outcome == "ok"
    assert len(result.hits) >= 1
    assert failures(metrics, "error") == 1


def _comparable(result: Any) -> dict[str, Any]:
    """A result without what a reranker may change (hit order) or each run changes."""
    data = result.model_dump(mode="json", exclude={"timings_ms", "timestamp"})
    data["hits"] = sorted(
        ({k: v for k, v in h.items() if k not in ("rank", "raw_scores")} for h in data["hits"]),
        key=lambda h: h["chunk_id"],
    )
    return data


@pytest.mark.parametrize("k", [2, 4])
async def test_a_calibrated_query_is_scored_as_without_the_reranker_which_orders_its_kept_hits(
    tmp_path: Path, index: EdgeIndex, k: int
) -> None:
    # ADR 048. Before it, a reranked query fell back to the weighted scorer: turning the
    # reranker on cost every query its calibrated confidence.
    plain, _, _ = build(tmp_path, index, None, scorer="calibrated")
    before = ok((await plain.process([q(k=k)]))[0]).result
    assert before.breakdown.scorer == "calibrated"
    reranker = KeywordReranker()
    pipe, metrics, _ = build(tmp_path, index, reranker, scorer="calibrated")
    result = ok((await pipe.process([q(k=k)]))[0]).result
    # Confidence, level, signals, kept set, dropped hits: all as without the reranker.
    assert _comparable(result) == _comparable(before)
    # The reranker saw the kept hits only (not a 4-candidate window) and ordered them.
    assert reranker.calls == [[(QUESTION, len(before.hits))]]
    scores = [h.raw_scores["rerank"] for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    expected = [h.text for h in sorted(before.hits, key=lambda h: "bank transfer" not in h.text)]
    assert [h.text for h in result.hits] == expected
    if k == 4:  # the answer was kept, third by the retriever: first now
        assert result.hits[0].text == ANSWER
        assert before.hits[0].text != ANSWER
    else:  # a reranker that orders the kept hits cannot bring in one the score left out
        assert ANSWER not in [h.text for h in result.hits]
    assert failures(metrics, "error") == 0


async def test_a_reranker_failure_leaves_a_calibrated_query_in_the_retrievers_order(
    tmp_path: Path, index: EdgeIndex
) -> None:
    text = "broken: how are refunds paid?"
    plain, _, _ = build(tmp_path, index, None, scorer="calibrated")
    before = ok((await plain.process([q(text=text, k=4)]))[0]).result
    error = RerankerUnavailableError("reranker down", attempts=3)
    pipe, metrics, cache = build(tmp_path, index, BrokenReranker(error), scorer="calibrated")
    result = ok((await pipe.process([q(text=text, k=4)]))[0]).result
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in before.hits]
    assert all("rerank" not in h.raw_scores for h in result.hits)
    assert result.confidence == before.confidence
    assert "reranker_unavailable" in [r.code for r in result.recommendations]
    assert failures(metrics, "unavailable") == 1
    assert len(cache._data) == 0  # degraded: asked again, the reranker is tried again


@pytest.mark.parametrize(
    "answer", [[1.0], [float("nan"), 0.0, 1.0, 2.0], "not a list of scores per query"]
)
async def test_a_reranker_answering_wrong_counts_leaves_the_query_unordered(
    tmp_path: Path, index: EdgeIndex, answer: Any
) -> None:
    class Wrong(KeywordReranker):
        async def rerank_many(
            self, queries: Sequence[tuple[str, Sequence[str]]]
        ) -> list[list[float] | Exception]:
            return [answer] if isinstance(answer, list) else []  # type: ignore[list-item]

    pipe, metrics, _ = build(tmp_path, index, Wrong(), scorer="calibrated")
    result = ok((await pipe.process([q(k=4)]))[0]).result
    assert result.outcome == "ok"
    assert "reranker_unavailable" in [r.code for r in result.recommendations]
    assert failures(metrics, "response") == 1


async def test_the_weighted_scorer_reranks_the_window_with_the_rerankers_bar(
    tmp_path: Path, index: EdgeIndex
) -> None:
    reranker = KeywordReranker()
    pipe, _, _ = build(tmp_path, index, reranker, scorer="weighted")
    result = ok((await pipe.process([q(k=2)]))[0]).result
    assert result.breakdown.scorer == "weighted"
    assert reranker.calls == [[(QUESTION, 4)]]  # the 4-candidate window
    assert result.hits[0].text == ANSWER  # brought in from the retriever's third place
    # The reranker's own bar on sigmoid(logit), not the one fit for cosines.
    assert (
        pipe.engines.engine("threshold", "hybrid", reranked=True).config.similarity_threshold == 0.5
    )


async def test_cache_keys_change_with_the_reranker(tmp_path: Path, index: EdgeIndex) -> None:
    plain, _, _ = build(tmp_path, index, None)
    reranked, _, _ = build(tmp_path, index, KeywordReranker())
    ordered, _, _ = build(tmp_path, index, KeywordReranker(), scorer="calibrated")
    keys = {pipe.cached.key(pipe._admit(0, q()), 1) for pipe in (plain, reranked, ordered)}
    assert len(keys) == 3
    assert ordered._admit(0, q()).orders_kept
    assert not reranked._admit(0, q()).orders_kept


async def test_hostile_query_text_goes_to_the_reranker_unharmed(
    tmp_path: Path, index: EdgeIndex
) -> None:
    reranker = KeywordReranker()
    pipe, _, _ = build(tmp_path, index, reranker)
    text = "refunds \u202e\u0000 حساب 退款 " + "x" * 1500
    result = ok((await pipe.process([q(text=text, k=1)]))[0]).result
    assert result.outcome == "ok"
    assert reranker.calls[0][0][0] == text


# -- settings and wiring -------------------------------------------------------------------


def test_reranker_is_off_by_default() -> None:
    settings = Settings()
    assert settings.reranker.kind == "none"
    assert not settings.reranker.enabled
    assert build_reranker(settings.reranker) is None


def test_reranker_settings_from_env_mask_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_RERANKER_KIND", "cohere")
    monkeypatch.setenv("RAGSIFT_RERANKER_URL", "https://rerank.example")
    monkeypatch.setenv("RAGSIFT_RERANKER_API_KEY", "sk-secret-123")
    monkeypatch.setenv("RAGSIFT_RERANKER_MODEL", "rerank-v3.5")
    monkeypatch.setenv("RAGSIFT_RERANKER_CANDIDATES", "30")
    settings = Settings.from_env()
    assert settings.reranker.kind == "cohere"
    assert settings.reranker.candidates == 30
    assert "sk-secret-123" not in str(settings.masked())
    reranker = build_reranker(settings.reranker)
    assert isinstance(reranker, HttpReranker)
    assert reranker.url == "https://rerank.example/v1/rerank"
    assert reranker.reranker_id == "cohere:rerank-v3.5"
    assert "sk-secret" not in repr(reranker)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RAGSIFT_RERANKER_KIND": "rerankme"}, "kind"),
        ({"RAGSIFT_RERANKER_KIND": "tei", "RAGSIFT_RERANKER_CANDIDATES": "0"}, "candidates"),
        ({"RAGSIFT_RERANKER_KIND": "tei", "RAGSIFT_RERANKER_CANDIDATES": "10**9"}, "candidates"),
        ({"RAGSIFT_RERANKER_KIND": "tei", "RAGSIFT_RERANKER_DEADLINE_S": "60"}, "DEADLINE_S"),
    ],
)
def test_bad_reranker_settings_are_clear_errors(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (RerankerSettings(kind="tei"), "RAGSIFT_RERANKER_URL"),
        (RerankerSettings(kind="jina", url="http://127.0.0.1:1"), "RAGSIFT_RERANKER_MODEL"),
        (RerankerSettings(kind="tei", url="ftp://host"), "http"),
        (RerankerSettings(kind="onnx", model_dir=Path("/nonexistent/model")), "does not exist"),
    ],
)
def test_incomplete_reranker_settings_fail_at_build(
    settings: RerankerSettings, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_reranker(settings)


def test_tei_settings_build_a_tei_client() -> None:
    reranker = build_reranker(
        RerankerSettings(kind="tei", url="http://127.0.0.1:8080/", api_key=SecretStr("k"))
    )
    assert isinstance(reranker, HttpReranker)
    assert reranker.url == "http://127.0.0.1:8080/rerank"
    assert not isinstance(reranker, OnnxCrossEncoder)


def test_engine_rrf_normalization_matches_the_index_fusion() -> None:
    # The index fuses with Qdrant's k=2 counting ranks from 0; normalized with the paper's
    # k=60, the best hits' fused scores all clipped to 1.0, so the rank correlation behind
    # reranker_impact had no variance and the signal was missing from every result.
    engines = EngineSet(ConfidenceSettings(scorer="weighted"), EMBEDDER.embedder_id)
    fused = [1 / RRF_K + 1 / RRF_K, 1 / RRF_K + 1 / (RRF_K + 1), 1 / (RRF_K + 1) + 1 / (RRF_K + 2)]
    normalized = normalize_scores(fused, "rrf", engines.base.normalization).tolist()
    assert normalized[0] == 1.0  # first in both lists
    assert normalized[0] > normalized[1] > normalized[2] > 0.0
