"""The streaming runtime against the real Kafka broker and redis-server (issue: workers)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis

from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.schemas import (
    MAX_QUERY_CHARS,
    DeadLetter,
    DocumentEvent,
    EvidenceEvent,
    QueryEvent,
    RetrievalResult,
)
from tests.e2e.harness import (
    TENANT,
    Stack,
    TopicReader,
    WorkerProcess,
    audit_rows,
    produce,
    services,
    until_cache_hit,
)


@pytest.fixture(scope="module")
def worker(stack: Stack, template_index: Path) -> Iterator[WorkerProcess]:
    """One process running the retrieval, indexer and audit agents."""
    proc = WorkerProcess(stack, ["retrieval", "indexer", "audit"], template_index, "w1")
    proc.start().wait_ready()
    yield proc
    proc.stop()


def queries(prefix: str, n: int) -> list[QueryEvent]:
    texts = [q.text for q in DEMO_QUERIES]
    return [
        QueryEvent(query_id=f"{prefix}-{i}", tenant_id=TENANT, query=texts[i % len(texts)])
        for i in range(n)
    ]


def by_query(events: Sequence[object]) -> dict[str, RetrievalResult]:
    return {e.query_id: e for e in events if isinstance(e, RetrievalResult)}


async def test_thousand_queries_thousand_results_and_one_advisory_each(
    stack: Stack, worker: WorkerProcess
) -> None:
    sent = queries("k", 1000)
    async with TopicReader(stack, "retrievals") as results:
        await produce(stack, "queries", sent)
        await results.until(
            lambda ev: len(by_query(ev).keys() & {q.query_id for q in sent}) == 1000
        )
    got = by_query(results.events)
    assert {q.query_id for q in sent} <= got.keys()
    assert len({got[q.query_id].result_id for q in sent}) == 1000
    low = {
        q.query_id
        for q in sent
        if got[q.query_id].outcome == "ok" and got[q.query_id].advisory_only
    }
    assert low, "the scripted queries include out-of-scope ones"
    async with TopicReader(stack, "audit") as audit:
        await audit.until(
            lambda ev: (
                low
                <= {
                    e.subject
                    for e in ev
                    if isinstance(e, EvidenceEvent)
                    and e.type.value == "RAG_ADVISORY_LOW_CONFIDENCE"
                }
            )
        )
    advisories = [
        e
        for e in audit.events
        if isinstance(e, EvidenceEvent)
        and e.type.value == "RAG_ADVISORY_LOW_CONFIDENCE"
        and e.subject in {q.query_id for q in sent}
    ]
    per_query = Counter(e.subject for e in {e.id: e for e in advisories}.values())
    assert set(per_query) == low
    assert set(per_query.values()) == {1}
    # The audit sink's file holds every evidence event of these queries exactly once.
    deadline = time.monotonic() + 60
    wanted = {e.id for e in audit.events if isinstance(e, EvidenceEvent)}
    while time.monotonic() < deadline:
        rows = audit_rows(worker.dir)
        if wanted <= {r["id"] for r in rows}:
            break
        await asyncio.sleep(0.5)
    ids = [r["id"] for r in audit_rows(worker.dir)]
    assert wanted <= set(ids)
    assert len(ids) == len(set(ids))


async def test_repeat_served_from_redis_with_level_ttl_until_ingestion(
    stack: Stack, worker: WorkerProcess
) -> None:
    text = "How many days do I have to return the Orbit thermostat for a full refund?"
    client = redis.Redis.from_url(stack.redis_url)
    async with TopicReader(stack, "retrievals") as results:
        await produce(stack, "queries", [QueryEvent(query_id="c-1", tenant_id=TENANT, query=text)])
        await results.until(lambda ev: "c-1" in by_query(ev))
        await produce(stack, "queries", [QueryEvent(query_id="c-2", tenant_id=TENANT, query=text)])
        await results.until(lambda ev: "c-2" in by_query(ev))
        first, second = by_query(results.events)["c-1"], by_query(results.events)["c-2"]
        assert not first.cache.hit
        assert second.cache.hit, second.cache
        keys = [k for k in client.scan_iter(f"{stack.prefix}:r:{TENANT}:*")]
        assert len(keys) >= 1
        ttls = {"high_confidence": 86400, "medium_confidence": 3600, "low_confidence": 300}
        expected = ttls[first.status]
        live = [client.ttl(k) for k in keys]
        assert any(expected - 60 <= t <= expected for t in live), (first.status, live)
        # A document for this tenant bumps its index version: the same query misses.
        before = int(client.get(f"{stack.prefix}:v:{TENANT}:default") or 0)
        doc = DocumentEvent(
            event_id="d-1",
            tenant_id=TENANT,
            doc_id="warranty-addendum",
            text="The extended warranty costs 19 euros and adds a third year.",
        )
        await produce(stack, "documents", [doc])
        deadline = time.monotonic() + 60
        while int(client.get(f"{stack.prefix}:v:{TENANT}:default") or 0) <= before:
            assert time.monotonic() < deadline, "the indexer did not bump the index version"
            await asyncio.sleep(0.2)
        await produce(stack, "queries", [QueryEvent(query_id="c-3", tenant_id=TENANT, query=text)])
        await results.until(lambda ev: "c-3" in by_query(ev))
        third = by_query(results.events)["c-3"]
        assert not third.cache.hit
        assert any(h.doc_id == "warranty-addendum" for h in third.hits) or third.total_found > 0


async def test_a_tombstone_deletes_its_document_and_is_no_dead_letter(
    stack: Stack, worker: WorkerProcess
) -> None:
    """A record with a key and no value on the compacted documents topic (how Kafka
    deletes a key there) deletes the document its key names from the live index."""
    from aiokafka import AIOKafkaProducer

    client = redis.Redis.from_url(stack.redis_url)
    version = f"{stack.prefix}:v:{TENANT}:default"

    async def bumped(before: int) -> None:
        deadline = time.monotonic() + 60
        while int(client.get(version) or 0) <= before:
            assert time.monotonic() < deadline, "the indexer did not bump the index version"
            await asyncio.sleep(0.2)

    doc = DocumentEvent(
        event_id="d-tomb", tenant_id=TENANT, doc_id="zeppelin",
        text="The zeppelin hangar opens its doors at dawn every Sunday.",
    )  # fmt: skip
    question = "When does the zeppelin hangar open its doors?"
    async with TopicReader(stack, "deadletter") as dead, TopicReader(stack, "retrievals") as res:
        before = int(client.get(version) or 0)
        await produce(stack, "documents", [doc])
        await bumped(before)
        await produce(
            stack, "queries", [QueryEvent(query_id="t-1", tenant_id=TENANT, query=question)]
        )
        await res.until(lambda ev: "t-1" in by_query(ev))
        assert any(h.doc_id == "zeppelin" for h in by_query(res.events)["t-1"].hits)
        producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all")
        await producer.start()
        try:
            before = int(client.get(version) or 0)
            key = f"{TENANT}/default/zeppelin".encode()
            await producer.send_and_wait(stack.topic("documents"), None, key=key)
        finally:
            await producer.stop()
        await bumped(before)
        await produce(
            stack, "queries", [QueryEvent(query_id="t-2", tenant_id=TENANT, query=question)]
        )
        await res.until(lambda ev: "t-2" in by_query(ev))
        after = by_query(res.events)["t-2"]
        assert not any(h.doc_id == "zeppelin" for h in after.hits)
        assert not any(d.chunk_id.startswith("zeppelin:") for d in after.dropped)
    tombstone = base64.b64encode(key).decode()
    assert not [e for e in dead.events if isinstance(e, DeadLetter) and e.key_b64 == tombstone]


async def test_bad_input_is_dead_lettered_and_later_events_processed(
    stack: Stack, worker: WorkerProcess
) -> None:
    malformed = b'{"query_id": "bad-1", "tenant_id": "demo", "query": '
    # 2,400 characters: past the contract's MAX_QUERY_CHARS, so only raw bytes can carry it
    oversized = json.dumps({"query_id": "bad-2", "tenant_id": TENANT, "query": "why " * 600})
    after = QueryEvent(query_id="bad-3", tenant_id=TENANT, query="How long is data kept?")
    async with TopicReader(stack, "deadletter") as dead, TopicReader(stack, "retrievals") as res:
        await produce(stack, "queries", [malformed, oversized.encode(), after])
        await dead.until(
            lambda ev: (
                {"bad-2"} <= {e.query_id for e in ev} and any(e.original == malformed for e in ev)
            )
        )
        await res.until(lambda ev: "bad-3" in by_query(ev))
    letters = [e for e in dead.events if isinstance(e, DeadLetter)]
    bad_json = next(e for e in letters if e.original == malformed)
    assert bad_json.stage == "decode"
    assert "not JSON" in bad_json.error
    assert bad_json.offset is not None
    too_long = next(e for e in letters if e.query_id == "bad-2")
    assert too_long.stage == "decode"
    assert f"at most {MAX_QUERY_CHARS} characters" in too_long.error
    assert worker.metric("ragsift_dead_letters_total") >= 2


async def test_redis_outage_bypasses_cache_then_caching_resumes(
    stack: Stack, worker: WorkerProcess
) -> None:
    errors_before = worker.metric("ragsift_cache_requests_total", {"result": "error"})
    await asyncio.to_thread(services, "stop", "redis")
    try:
        async with TopicReader(stack, "retrievals") as results:
            down = [
                QueryEvent(query_id=f"r-{i}", tenant_id=TENANT, query=f"Shipping to country {i}?")
                for i in range(20)
            ]
            await produce(stack, "queries", down)
            await results.until(lambda ev: {q.query_id for q in down} <= by_query(ev).keys())
        assert all(by_query(results.events)[q.query_id].outcome == "ok" for q in down)
        assert worker.metric("ragsift_cache_requests_total", {"result": "error"}) > errors_before
    finally:
        await asyncio.to_thread(services, "start", "redis")
    await until_cache_hit(stack, "What is the API rate limit per key per minute?")


async def test_two_worker_processes_share_the_partitions(
    stack: Stack, worker: WorkerProcess, template_index: Path
) -> None:
    second = WorkerProcess(stack, ["retrieval", "indexer", "audit"], template_index, "w2")
    second.start().wait_ready()
    try:
        # Let the group rebalance onto both members before measuring.
        deadline = time.monotonic() + 60
        batch = 0
        while True:
            batch += 1
            sent = queries(f"two-{batch}", 200)
            async with TopicReader(stack, "retrievals") as results:
                await produce(stack, "queries", sent)
                await results.until(
                    lambda ev, s=sent: {q.query_id for q in s} <= by_query(ev).keys()
                )
            if (
                second.metric("ragsift_queries_total") > 0
                and worker.metric("ragsift_queries_total") > 0
            ):
                break
            assert time.monotonic() < deadline, "the second worker never got partitions"
        assert second.metric("ragsift_queries_total") > 0
    finally:
        second.stop()
