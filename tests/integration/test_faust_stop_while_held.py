"""A real Faust worker stopped while a handler holds its batch for a store, on a real broker.

The plain loop gives such a batch up at SIGTERM (tests/unit/streams/test_loop.py);
these check the Faust runtime does the same: the worker leaves, the held batch is
not committed (the next member reads it again), and a batch that is only slow is
finished and committed first.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ragsift.schemas import QueryEvent
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from tests.integration.apps import end, start_faust_worker
from tests.integration.test_kafka_roundtrip import create_topics
from tests.unit.streams.scripted import query

APP = Path(__file__).parent / "apps" / "held_store.py"
#: Far longer than a stop takes; a worker still there after it waits for the store.
STOP_TIMEOUT_S = 45
WAIT_S = 60


async def produce(bootstrap: str, topic: str, *texts: str) -> None:
    codec = EventCodec(QueryEvent)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i, text in enumerate(texts):
            event = query(f"{text}-{i}", text)
            await producer.send_and_wait(topic, codec.encode(event), key=b"k", partition=0)
    finally:
        await producer.stop()


async def committed(bootstrap: str, group: str, topic: str) -> int | None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    done = offsets.get(TopicPartition(topic, 0))
    return None if done is None else done.offset


def wait_for(what: str, log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while what not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {what!r} in the log:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)


def stopped(proc: subprocess.Popen[bytes]) -> bool:
    """SIGTERM, then whether the worker left before :data:`STOP_TIMEOUT_S`."""
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False
    return True


def started(
    bootstrap: str, unique: str, tmp_path: Path
) -> tuple[str, str, subprocess.Popen[bytes], Path]:
    """A held-store worker on fresh topics (one partition): source, group, process, log."""
    prefix = group = f"it-held-{unique}"
    source = TOPICS["queries"].name(prefix)
    names = [source, TOPICS["feedback"].name(prefix), TOPICS["deadletter"].name(prefix)]
    asyncio.run(create_topics(bootstrap, names, partitions=1))
    env = {"HELD_PREFIX": prefix, "HELD_APP_ID": group}
    proc, log = start_faust_worker(
        APP, bootstrap=bootstrap, env=env, workdir=tmp_path, log_name="worker.log"
    )
    return source, group, proc, log


def test_a_stop_gives_up_a_held_batch_uncommitted_and_the_worker_leaves(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    source, group, proc, log = started(kafka_bootstrap, unique, tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, source, "fine"))
        deadline = time.monotonic() + WAIT_S
        while asyncio.run(committed(kafka_bootstrap, group, source)) != 1:
            assert time.monotonic() < deadline, "the first batch was never committed"
            time.sleep(0.5)
        asyncio.run(produce(kafka_bootstrap, source, "hold"))
        wait_for("holding the batch", log)
        left = stopped(proc)
    finally:
        end(proc)
    assert left, f"the worker waited for the store at SIGTERM:\n{log.read_text()[-3000:]}"
    # Not committed past the held event (offset 1): the next member reads it again.
    assert asyncio.run(committed(kafka_bootstrap, group, source)) == 1


def test_a_stop_finishes_a_slow_batch_and_commits_it(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    source, group, proc, log = started(kafka_bootstrap, unique, tmp_path)
    try:
        asyncio.run(produce(kafka_bootstrap, source, "fine", "slow"))
        wait_for("slow batch started", log)
        left = stopped(proc)
    finally:
        end(proc)
    assert left, f"the worker did not stop:\n{log.read_text()[-3000:]}"
    assert asyncio.run(committed(kafka_bootstrap, group, source)) == 2
