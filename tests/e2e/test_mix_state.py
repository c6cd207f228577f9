"""The mix estimate outlives a retrieval worker on the real broker and Redis.

A worker saves its scopes' histograms at stop (and every 30 s) in the Redis hash
``<prefix>:calibration:mix``; the next worker takes them up, so its first query
already has an estimate (``ragsift_unanswerable_share``, and the near-miss share of
ADR 021, ``ragsift_near_miss_share``), where a cold one needs ~30.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
import redis

from ragsift.schemas import QueryEvent, RetrievalResult
from tests.e2e.harness import TENANT, Stack, TopicReader, hashing_worker, produce, wait_for

SHARE = "ragsift_unanswerable_share"
NEAR_MISS = "ragsift_near_miss_share"


def exported(port: int, name: str) -> bool:
    """Whether /metrics carries a sample of ``name`` for the test tenant (a gauge at 0
    and a gauge never set read the same through ``metric``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        body = r.read().decode()
    return any(
        line.startswith(name + "{") and f'tenant="{TENANT}"' in line for line in body.splitlines()
    )


async def answered(stack: Stack, sent: list[QueryEvent]) -> None:
    ids = {q.query_id for q in sent}
    async with TopicReader(stack, "retrievals") as reader:
        await produce(stack, "queries", sent)
        await reader.until(
            lambda ev: ids <= {e.query_id for e in ev if isinstance(e, RetrievalResult)}
        )


def ask(stack: Stack, tag: str, n: int) -> None:
    sent = [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id=TENANT, query=f"Who won the cup in {1900 + i}?")
        for i in range(n)
    ]
    asyncio.run(answered(stack, sent))


def test_a_restarted_worker_takes_up_the_saved_mix(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stack.extra_env.update(
        {"RAGSIFT_EMBEDDER_KIND": "hashing", "RAGSIFT_CALIBRATION_STORE": "redis"}
    )
    first = hashing_worker(stack, ["retrieval"], tmp_path_factory, "mix-first")
    try:
        ask(stack, "a", 1)
        assert first.metric(SHARE, {"tenant": TENANT}) == 0  # cold: no estimate yet
        assert not exported(first.port, NEAR_MISS)
        ask(stack, "b", 39)
        assert first.metric(SHARE, {"tenant": TENANT}) > 0
        assert exported(first.port, NEAR_MISS)  # the shipped calibration has a near-miss table
    finally:
        first.stop()
    assert first.proc is not None
    assert first.proc.returncode == 0
    client = redis.Redis.from_url(stack.redis_url)
    saved = client.hgetall(f"{stack.prefix}:calibration:mix")
    client.close()
    (state,) = [json.loads(v) for v in saved.values()]
    assert (state["tenant"], state["collection"]) == (TENANT, "default")
    assert sum(state["counts"]) > 35  # the 40 queries, decayed a little
    second = hashing_worker(stack, ["retrieval"], tmp_path_factory, "mix-second")
    try:
        ask(stack, "c", 1)
        wait_for(lambda: second.metric(SHARE, {"tenant": TENANT}) > 0, "the restored estimate", 30)
        assert exported(second.port, NEAR_MISS)  # read from the restored histogram too
    finally:
        second.stop()
