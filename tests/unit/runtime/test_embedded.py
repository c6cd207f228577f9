"""The embedded runtime end to end: pipeline, cache, evidence, dead letters, isolation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsift.embedded import EmbeddedRuntime
from ragsift.errors import ServiceUnavailableError
from ragsift.ingest.loaders import SourceDocument
from ragsift.retrieval.index import SearchHit, SearchRequest
from ragsift.schemas import DeadLetter, QueryEvent, RetrievalResult


def q(query_id: str, text: str, tenant: str = "acme", **extra: Any) -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id=tenant, query=text, **extra)


async def test_in_scope_query_finds_its_document(runtime: EmbeddedRuntime) -> None:
    [result] = await runtime.ask([q("q1", "How many days do I have to return the thermostat?")])
    assert isinstance(result, RetrievalResult)
    assert result.outcome == "ok"
    assert result.hits
    assert result.hits[0].doc_id == "returns-and-refunds"
    assert result.hits[0].citation.source == "handbook/returns-and-refunds.md"
    assert result.total_found >= result.match_count == len(result.hits)
    assert result.filtered_count == len(result.dropped)
    assert set(result.breakdown.signals) >= {"top_score", "score_gap"}


async def test_repeat_is_served_from_cache_with_level_ttl(runtime: EmbeddedRuntime) -> None:
    first, second = await runtime.ask([q("a", "What are the API rate limits per key?")]) + (
        await runtime.ask([q("b", "what are the API rate limits   per key?")])
    )
    assert isinstance(first, RetrievalResult)
    assert isinstance(second, RetrievalResult)
    assert not first.cache.hit
    assert second.cache.hit
    assert second.query_id == "b"
    assert second.result_id != first.result_id
    assert second.confidence == first.confidence
    ttls = runtime.settings.cache
    expected = {
        "high_confidence": ttls.ttl_high_s,
        "medium_confidence": ttls.ttl_medium_s,
        "low_confidence": ttls.ttl_low_s,
    }[second.status]
    assert second.cache.ttl_seconds is not None
    assert expected - 5 <= second.cache.ttl_seconds <= expected


async def test_ingesting_for_the_tenant_invalidates_its_cache(runtime: EmbeddedRuntime) -> None:
    await runtime.ask([q("a", "What are the API rate limits per key?")])
    await runtime.ingest("acme", [SourceDocument("new-doc", "A brand new policy text.")])
    [again] = await runtime.ask([q("b", "What are the API rate limits per key?")])
    assert isinstance(again, RetrievalResult)
    assert not again.cache.hit


async def test_greeting_and_scope_bypass_retrieval(runtime: EmbeddedRuntime) -> None:
    greeting, scope = await runtime.ask([q("g", "Hello!"), q("s", "What documents do you have?")])
    assert isinstance(greeting, RetrievalResult)
    assert isinstance(scope, RetrievalResult)
    assert greeting.outcome == "greeting"
    assert greeting.hits == []
    assert scope.outcome == "scope"
    assert scope.answer_hint is not None
    assert "12 indexed passages" in scope.answer_hint


async def test_other_tenants_see_nothing(runtime: EmbeddedRuntime) -> None:
    [result] = await runtime.ask([q("x", "How many days do I have to return it?", tenant="other")])
    assert isinstance(result, RetrievalResult)
    assert result.hits == []
    assert result.status == "no_relevant_context"
    assert not result.answerable
    evidence = [e for e in runtime.audit.read_all() if e["subject"] == "x"]
    # the report worker runs embedded too (X5): it refuses, and records that
    assert {e["type"] for e in evidence} == {
        "RAG_NO_RELEVANT_CONTEXT",
        "RAG_ADVISORY_LOW_CONFIDENCE",
        "RAG_REFUSAL",
    }


async def test_bad_input_is_dead_lettered_and_the_rest_processed(
    runtime: EmbeddedRuntime,
) -> None:
    good = q("ok", "What is the warranty period?")
    long = q("long", "x " * 300)
    wrong_embedder = q("vec", "refund?", vector=[0.1] * 384, embedder_id="someone-else")
    out = await runtime.ask([long, good, wrong_embedder])
    assert isinstance(out[0], DeadLetter)
    assert "limit is 500" in out[0].error
    assert out[0].stage == "validate"
    assert isinstance(out[1], RetrievalResult)
    assert isinstance(out[2], DeadLetter)
    assert "someone-else" in out[2].error
    registry = runtime.metrics.registry
    counted = sum(
        registry.get_sample_value(
            "ragsift_dead_letters_total", {"worker": "retrieval", "stage": stage}
        )
        or 0.0
        for stage in ("validate", "embed")
    )
    assert counted == 2


async def test_undecodable_bytes_are_dead_lettered(runtime: EmbeddedRuntime) -> None:
    await runtime.bus.publish("queries", "k", b'{"query_id": "q", "tenant_id": "bad tenant"}')
    await runtime.bus.drain()
    [letter] = runtime.bus.published["deadletter"]
    assert isinstance(letter, DeadLetter)
    assert letter.stage == "decode"
    assert letter.original.startswith(b'{"query_id"')


class FlakyIndex:
    """Wraps an index: fails the first ``failures`` searches, counts searches."""

    def __init__(self, inner: Any, failures: int):
        self.inner = inner
        self.failures = failures
        self.searches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def search_batch(
        self, collection: str, requests: Sequence[SearchRequest]
    ) -> list[list[SearchHit]]:
        self.searches += 1
        if self.failures > 0:
            self.failures -= 1
            raise ServiceUnavailableError("qdrant down", service="qdrant")
        return await self.inner.search_batch(collection, requests)


async def test_index_outage_gives_error_results_and_evidence(runtime: EmbeddedRuntime) -> None:
    flaky = FlakyIndex(runtime.index, failures=100)
    runtime.pipeline.index = flaky
    [result] = await runtime.ask([q("down", "What is the warranty period?")])
    assert isinstance(result, RetrievalResult)
    assert result.outcome == "error"
    assert result.error is not None
    assert result.error.attempts == runtime.settings.qdrant.max_retries + 1
    assert flaky.searches == runtime.settings.qdrant.max_retries + 1
    types = {e["type"] for e in runtime.audit.read_all() if e["subject"] == "down"}
    assert types == {"RAG_RETRIEVAL_FAILED", "RAG_REFUSAL"}


async def test_transient_outage_is_retried(runtime: EmbeddedRuntime) -> None:
    runtime.pipeline.index = FlakyIndex(runtime.index, failures=2)
    [result] = await runtime.ask([q("blip", "What is the warranty period?")])
    assert isinstance(result, RetrievalResult)
    assert result.outcome == "ok"


async def test_identical_queries_in_a_batch_search_once(runtime: EmbeddedRuntime) -> None:
    counting = FlakyIndex(runtime.index, failures=0)
    runtime.pipeline.index = counting
    out = await runtime.ask([q(f"same-{i}", "Which countries do you ship to?") for i in range(5)])
    assert counting.searches == 1
    assert len({r.result_id for r in out}) == 5
    assert all(isinstance(r, RetrievalResult) for r in out)
    assert sum(1 for r in out if isinstance(r, RetrievalResult) and r.cache.hit) == 4


async def test_replay_gives_same_ids_and_the_audit_keeps_one(runtime: EmbeddedRuntime) -> None:
    event = q("dup", "Who won the football world cup in 2014?")
    first = await runtime.ask([event])
    second = await runtime.ask([event])
    assert isinstance(first[0], RetrievalResult)
    assert isinstance(second[0], RetrievalResult)
    assert first[0].result_id == second[0].result_id
    ids = [e["id"] for e in runtime.audit.read_all() if e["subject"] == "dup"]
    assert ids
    assert len(ids) == len(set(ids))
