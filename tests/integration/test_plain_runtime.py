"""A real broker: the plain runtime answers every query, dead-letters a bad one,
reports ready with the Faust worker's fields, and commits only what it has answered.
"""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from ragsift.schemas import QueryEvent
from ragsift.settings import (
    CacheSettings,
    EmbedderSettings,
    KafkaSettings,
    RedisSettings,
    Settings,
)
from ragsift.streams import clients
from ragsift.streams.admin import ensure_topics
from ragsift.streams.assembly import assemble
from ragsift.streams.codec import EventCodec
from ragsift.streams.plain import READY_LINE, PlainWorker
from tests.e2e.harness import free_port

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from streaming import prepare_shard  # noqa: E402

QUERIES = 12


async def _read(kafka: KafkaSettings, topic: str, n: int, unique: str) -> list[bytes]:
    consumer = clients.consumer(
        kafka, topic, group_id=f"read-{unique}", auto_offset_reset="earliest"
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(60):
            while len(got) < n:
                batch = await consumer.getmany(timeout_ms=500)
                got.extend(r.key for records in batch.values() for r in records)
    finally:
        await consumer.stop()
    return got


async def test_every_query_answered_bad_one_dead_lettered_offsets_committed(
    tmp_path: Path,
    kafka_settings: KafkaSettings,
    redis_settings: RedisSettings,
    unique: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shard = await prepare_shard(tmp_path, chunks=50, n_queries=QUERIES)
    prefix = f"it-plain-{unique}"
    kafka = kafka_settings.model_copy(update={"topic_prefix": prefix, "app_id": prefix})
    settings = Settings.from_env(
        data_dir=shard.template,
        kafka=kafka,
        redis=redis_settings,
        cache=CacheSettings(enabled=False),
        embedder=EmbedderSettings(kind="hashing"),
    )
    await ensure_topics(kafka)
    stop = asyncio.Event()
    port = free_port()
    plain = PlainWorker(assemble(["retrieval"], settings), settings, web_port=port)
    worker = asyncio.create_task(plain.run(stop))
    try:
        async with asyncio.timeout(60):
            while READY_LINE not in capsys.readouterr().out:
                assert not worker.done(), worker.exception()
                await asyncio.sleep(0.1)
        ready = await asyncio.to_thread(_get_json, f"http://127.0.0.1:{port}/readyz")
        assert ready == {
            "ready": True,
            "rebalancing": False,
            "agents_down": [],
            "handlers_stalled": [],
            "assigned_partitions": kafka.partitions,
        }
        producer = clients.producer(kafka)
        await producer.start()
        codec = EventCodec(QueryEvent)
        try:
            events = shard.events(prefix, 0, QUERIES)
            for event in events:
                key = event.query_id.encode()
                await producer.send(f"{prefix}.queries.v1", codec.encode(event), key=key)
            await producer.send(f"{prefix}.queries.v1", b"{not json", key=b"bad")
            await producer.flush()
        finally:
            await producer.stop()
        results = await _read(kafka, f"{prefix}.retrievals.v1", QUERIES, unique)
        letters = await _read(kafka, f"{prefix}.deadletter.v1", 1, f"{unique}-dl")
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
    assert sorted(results) == sorted(e.query_id.encode() for e in events)
    assert len(letters) == 1
    assert worker.exception() is None
    # Stopped cleanly: the committed offsets cover every event, the bad one included.
    consumer = clients.consumer(kafka, group_id=prefix)
    await consumer.start()
    try:
        topic = f"{prefix}.queries.v1"
        partitions = [TopicPartition(topic, p) for p in range(kafka.partitions)]
        ends = await consumer.end_offsets(partitions)
        committed = {tp: await consumer.committed(tp) or 0 for tp in partitions}
    finally:
        await consumer.stop()
    assert sum(ends.values()) == QUERIES + 1
    assert committed == ends


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())
