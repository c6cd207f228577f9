"""Issue 12 in the pipeline: tenants never share ids, work or cached results; one
query's failure (search, scoring, a bad cache entry) stays with that query; a greeting
to an unknown collection is refused like any other query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence import Assessment
from ragsift.errors import InvalidEventError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchHit, SearchRequest, VectorIndex
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.results import result_id
from ragsift.schemas import QueryEvent, derive_query_id
from ragsift.settings import Settings
from ragsift.wiring import build_pipeline
from tests.factories import low_bar_confidence

EMBEDDER = HashingEmbedder()
ALPHA_TEXT = "Alpha handbook: refunds are paid within fourteen days by bank transfer."
BRAVO_TEXT = "Bravo handbook: refunds are paid in store credit within thirty days."
QUESTION = "How are refunds paid?"
POISON = "poison"  # the search of a query containing it raises (FlakyIndex)
BAD_THRESHOLD = 0.0123  # the scoring of a query with this threshold raises (FlakyEngine)


def make_settings(tmp_path: Path) -> Settings:
    # Low bars: the hashing embedder's cosines are small; the plumbing is what is checked.
    return Settings(
        data_dir=tmp_path,
        confidence=low_bar_confidence(),
    )


class FlakyIndex:
    """Delegates to a real index; a batch holding a poisoned query raises, as an engine might."""

    def __init__(self, inner: VectorIndex, error: type[Exception]):
        self.inner = inner
        self.error = error
        self.batches: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        self.batches.append(len(requests))
        if any(POISON in r.query for r in requests):
            raise self.error("engine refused a query vector")
        return await self.inner.search_batch(collection, requests)


class FlakyEngine:
    """Delegates to a real engine; a call holding the bad threshold raises."""

    def __init__(self, inner: Any):
        self.inner = inner

    def assess_many(self, hits: Any, *, thresholds: Sequence[float | None], **kw: Any) -> Any:
        if BAD_THRESHOLD in thresholds:
            raise FloatingPointError("overflow in the scoring math")
        result: list[Assessment] = self.inner.assess_many(hits, thresholds=thresholds, **kw)
        return result


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """Two tenants, each with its own handbook.md in the default collection."""
    built = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    await indexer.ingest("alpha", "default", [SourceDocument("handbook.md", ALPHA_TEXT)])
    await indexer.ingest("bravo", "default", [SourceDocument("handbook.md", BRAVO_TEXT)])
    yield built
    await built.close()


def pipeline(
    tmp_path: Path, index: Any, cache: InMemoryCache | None = None
) -> tuple[RetrievalPipeline, Metrics]:
    metrics = Metrics()
    built = build_pipeline(
        make_settings(tmp_path),
        index=index,
        embedder=EMBEDDER,
        metrics=metrics,
        cache=cache if cache is not None else InMemoryCache(),
    )
    return built, metrics


def q(tenant: str, query_id: str = "q1", text: str = QUESTION, **extra: Any) -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id=tenant, query=text, **extra)


def ok(output: PipelineOutput | Exception) -> PipelineOutput:
    assert isinstance(output, PipelineOutput), output
    return output


def cache_count(metrics: Metrics, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "ragsift_cache_requests_total", {"backend": "memory", "result": result}
    )
    return value or 0.0


# -- finding 2: ids, single flight and cache are per tenant ------------------------------------


def test_query_derived_ids_include_the_tenant() -> None:
    assert derive_query_id("alpha", "q1", "retrieval") == derive_query_id(
        "alpha", "q1", "retrieval"
    )
    ids = {
        derive_query_id("alpha", "q1", "retrieval"),
        derive_query_id("bravo", "q1", "retrieval"),
        derive_query_id("alpha", "q1", "report"),
        derive_query_id("alpha", "q2", "retrieval"),
    }
    assert len(ids) == 4
    assert result_id(q("alpha")) != result_id(q("bravo"))
    with pytest.raises(ValueError, match="tenant_id"):
        derive_query_id("al/pha", "q1", "retrieval")


async def test_same_query_id_from_two_tenants_in_one_batch_gives_two_results(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe, _ = pipeline(tmp_path, index)
    a, b = (ok(o) for o in await pipe.process([q("alpha"), q("bravo")]))
    assert a.result.result_id != b.result.result_id
    assert [h.text for h in a.result.hits] == [ALPHA_TEXT]
    assert [h.text for h in b.result.hits] == [BRAVO_TEXT]
    assert not a.result.cache.hit
    assert not b.result.cache.hit
    assert not {e.id for e in a.evidence} & {e.id for e in b.evidence}
    # Replays keep their ids (ADR 004).
    again = ok((await pipe.process([q("bravo")]))[0])
    assert again.result.result_id == b.result.result_id


async def test_cache_never_serves_another_tenants_result(tmp_path: Path, index: EdgeIndex) -> None:
    pipe, _ = pipeline(tmp_path, index)
    first = ok((await pipe.process([q("alpha")]))[0])
    assert not first.result.cache.hit
    other = ok((await pipe.process([q("bravo", "q2")]))[0])
    assert not other.result.cache.hit
    assert [h.text for h in other.result.hits] == [BRAVO_TEXT]
    cached = ok((await pipe.process([q("alpha", "q3")]))[0])
    assert cached.result.cache.hit
    assert [h.text for h in cached.result.hits] == [ALPHA_TEXT]
    assert cached.result.result_id == derive_query_id("alpha", "q3", "retrieval")


# -- finding 3: an undecodable cache entry is a miss ------------------------------------------


async def test_undecodable_cached_value_is_a_counted_miss_then_overwritten(
    tmp_path: Path, index: EdgeIndex
) -> None:
    cache = InMemoryCache()
    pipe, metrics = pipeline(tmp_path, index, cache)
    ok((await pipe.process([q("alpha")]))[0])
    [key] = list(cache._data)
    await cache.set(key, b"\x00not json{", 60)

    second, untouched = await pipe.process([q("alpha", "q2"), q("bravo", "q3")])
    assert not ok(second).result.cache.hit
    assert [h.text for h in ok(second).result.hits] == [ALPHA_TEXT]
    assert [h.text for h in ok(untouched).result.hits] == [BRAVO_TEXT]
    assert cache_count(metrics, "corrupt") == 1
    third = ok((await pipe.process([q("alpha", "q4")]))[0])
    assert third.result.cache.hit  # the fresh result replaced the garbage


async def test_another_tenants_result_under_a_key_is_not_served(
    tmp_path: Path, index: EdgeIndex
) -> None:
    cache = InMemoryCache()
    pipe, metrics = pipeline(tmp_path, index, cache)
    ok((await pipe.process([q("alpha")]))[0])
    bravo = ok((await pipe.process([q("bravo")]))[0])
    alpha_key = next(k for k in cache._data if ":alpha:" in k)
    planted = bravo.result.model_dump_json().encode()
    await cache.set(alpha_key, planted, 60)
    again = ok((await pipe.process([q("alpha", "q2")]))[0])
    assert [h.text for h in again.result.hits] == [ALPHA_TEXT]
    assert cache_count(metrics, "corrupt") == 1


class UnreadableVersions(InMemoryCache):
    """An in-memory cache whose counters read as unreadable until they are reset."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def index_versions(self, scopes: Sequence[tuple[str, str]]) -> list[int | None]:
        if self.broken:
            return [None for _ in scopes]
        return await super().index_versions(scopes)

    async def bump_index_version(self, tenant_id: str, collection: str) -> int:
        self.broken = False
        return await super().bump_index_version(tenant_id, collection)


async def test_unreadable_index_version_is_reset_not_raised(
    tmp_path: Path, index: EdgeIndex
) -> None:
    cache = UnreadableVersions()
    pipe, metrics = pipeline(tmp_path, index, cache)
    first = ok((await pipe.process([q("alpha")]))[0])
    assert not first.result.cache.hit
    assert cache_count(metrics, "corrupt") == 1
    assert await cache.index_versions([("alpha", "default")]) == [1]
    assert ok((await pipe.process([q("alpha", "q2")]))[0]).result.cache.hit


# -- finding 3: one query's failure is its own ----------------------------------------------


async def test_engine_error_on_one_query_fails_only_that_query(
    tmp_path: Path, index: EdgeIndex
) -> None:
    flaky = FlakyIndex(index, RuntimeError)
    pipe, _ = pipeline(tmp_path, flaky)
    good, bad, other = await pipe.process(
        [q("alpha", "q1"), q("alpha", "q2", f"{POISON} refunds"), q("bravo", "q3")]
    )
    assert [h.text for h in ok(good).result.hits] == [ALPHA_TEXT]
    assert [h.text for h in ok(other).result.hits] == [BRAVO_TEXT]
    failed = ok(bad).result
    assert failed.outcome == "error"
    assert failed.error is not None
    assert failed.error.stage == "search"
    assert failed.error.error_type == "RuntimeError"
    assert flaky.batches[0] == 3  # one engine call first, then one per query
    assert sorted(flaky.batches[1:]) == [1, 1, 1]


async def test_refused_input_on_one_query_is_its_own_invalid_event(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe, _ = pipeline(tmp_path, FlakyIndex(index, ValueError))
    good, bad = await pipe.process([q("alpha", "q1"), q("alpha", "q2", f"{POISON} refunds")])
    assert [h.text for h in ok(good).result.hits] == [ALPHA_TEXT]
    assert isinstance(bad, InvalidEventError)
    assert "refused a query vector" in str(bad)


async def test_scoring_error_on_one_query_fails_only_that_query(
    tmp_path: Path, index: EdgeIndex
) -> None:
    pipe, _ = pipeline(tmp_path, index)
    real = pipe.engines.engine
    pipe.engines.engine = lambda *a, **kw: FlakyEngine(real(*a, **kw))  # type: ignore[method-assign]  # fault
    good, bad = await pipe.process(
        [q("alpha", "q1"), q("alpha", "q2", similarity_threshold=BAD_THRESHOLD)]
    )
    assert [h.text for h in ok(good).result.hits] == [ALPHA_TEXT]
    failed = ok(bad).result
    assert failed.outcome == "error"
    assert failed.error is not None
    assert failed.error.stage == "score"


# -- finding 4: greetings are checked against the collections -------------------------------


@pytest.mark.parametrize("text", ["Hello!", "What documents do you have?"])
async def test_bypass_to_unknown_collection_is_refused_before_any_metric(
    tmp_path: Path, index: EdgeIndex, text: str
) -> None:
    pipe, metrics = pipeline(tmp_path, index)
    bypass, search, known = await pipe.process(
        [
            q("alpha", "q1", text, collection="no-such-collection"),
            q("alpha", "q2", collection="no-such-collection"),
            q("alpha", "q3", text),
        ]
    )
    assert isinstance(bypass, InvalidEventError)
    assert isinstance(search, InvalidEventError)
    assert str(bypass) == str(search)
    assert "unknown collection 'no-such-collection'" in str(bypass)
    assert ok(known).result.outcome in ("greeting", "scope")
    outcomes = [
        s.labels["outcome"]
        for m in metrics.registry.collect()
        if m.name == "ragsift_queries"
        for s in m.samples
        if s.name == "ragsift_queries_total"
    ]
    assert outcomes == [ok(known).result.outcome]
