"""A real broker: a Faust agent echoes QueryEvents and dead-letters malformed payloads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from ragsift.schemas import DeadLetter, QueryEvent
from ragsift.streams.codec import EventCodec
from tests.integration.apps import faust_worker

ECHO_APP = Path(__file__).parent / "apps" / "echo.py"


async def create_topics(bootstrap: str, names: list[str], partitions: int = 2) -> None:
    """Create topics up front: a consumer subscribed to a missing topic waits for a
    metadata refresh (minutes) before it notices the topic was auto-created."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
        )
    finally:
        await admin.close()


@pytest.fixture
def echo_worker(kafka_bootstrap: str, unique: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Start the echo app as a real Faust worker process; stop it after the test."""
    topics = {
        "ECHO_IN": f"it.echo-in.{unique}",
        "ECHO_OUT": f"it.echo-out.{unique}",
        "ECHO_DLQ": f"it.echo-dlq.{unique}",
        "ECHO_APP_ID": f"it-echo-{unique}",
    }
    asyncio.run(
        create_topics(kafka_bootstrap, [v for k, v in topics.items() if k != "ECHO_APP_ID"])
    )
    with faust_worker(
        ECHO_APP, bootstrap=kafka_bootstrap, env=topics, workdir=tmp_path, log_name="echo.log"
    ):
        yield topics


async def _consume(bootstrap: str, topic: str, count: int, timeout_s: float = 60) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(values) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                values.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return values


async def test_query_event_round_trips_through_a_faust_agent(
    kafka_bootstrap: str, echo_worker: dict[str, str]
) -> None:
    codec = EventCodec(QueryEvent)
    sent = [
        QueryEvent(query_id=f"q-{i}", tenant_id="acme", query=f"question {i}?", k=3 + i % 5)
        for i in range(20)
    ]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for q in sent:
            await producer.send_and_wait(
                echo_worker["ECHO_IN"], codec.encode(q), key=q.query_id.encode()
            )
    finally:
        await producer.stop()
    received = [
        codec.decode(v) for v in await _consume(kafka_bootstrap, echo_worker["ECHO_OUT"], 20)
    ]
    assert sorted(received, key=lambda q: q.query_id) == sorted(sent, key=lambda q: q.query_id)


async def test_malformed_payload_is_dead_lettered_and_the_next_event_still_flows(
    kafka_bootstrap: str, echo_worker: dict[str, str]
) -> None:
    codec = EventCodec(QueryEvent)
    good = QueryEvent(query_id="after-bad", tenant_id="acme", query="still here?")
    bad_payloads = [b"{not json", b'{"query_id": "q-x", "tenant_id": "bad tenant", "query": "x"}']
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for payload in bad_payloads:
            await producer.send_and_wait(echo_worker["ECHO_IN"], payload, key=b"k")
        await producer.send_and_wait(echo_worker["ECHO_IN"], codec.encode(good), key=b"k")
    finally:
        await producer.stop()
    letters = [
        DeadLetter.model_validate_json(v)
        for v in await _consume(kafka_bootstrap, echo_worker["ECHO_DLQ"], 2)
    ]
    assert sorted(dl.original for dl in letters) == sorted(bad_payloads)
    reasons = " | ".join(dl.error for dl in letters)
    assert "not JSON" in reasons
    assert "tenant_id" in reasons
    assert all(dl.stage == "decode" and dl.offset is not None for dl in letters)
    echoed = await _consume(kafka_bootstrap, echo_worker["ECHO_OUT"], 1)
    assert [codec.decode(v) for v in echoed] == [good]


async def test_two_consumers_in_one_group_split_the_partitions(
    kafka_bootstrap: str, admin: object, unique: str
) -> None:
    from aiokafka.admin import NewTopic

    topic, group, partitions = f"it.split.{unique}", f"it-split-{unique}", 4
    await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])  # type: ignore[attr-defined]
    consumers = [
        AIOKafkaConsumer(
            topic, bootstrap_servers=kafka_bootstrap, group_id=group, auto_offset_reset="earliest"
        )
        for _ in range(2)
    ]
    for c in consumers:
        await c.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
            sets = [{tp.partition for tp in c.assignment()} for c in consumers]
            if all(sets) and sum(map(len, sets)) == partitions:
                break
        sets = [{tp.partition for tp in c.assignment()} for c in consumers]
        assert all(sets), f"each consumer should own partitions, got {sets}"
        assert not sets[0] & sets[1]
        assert sets[0] | sets[1] == set(range(partitions))
    finally:
        for c in consumers:
            await c.stop()
