"""A real Faust worker on fresh topics of a real broker, and what the tests read of it.

Shared by the Faust runtime's broker tests (a held batch, a batch failing as a whole,
a poison event, an agent that dies): each starts one of ``tests/integration/apps`` on
topics of its own, produces queries to partition 0 and waits for the group's commit.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ragsift.schemas import QueryEvent
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from tests.integration.apps import start_faust_worker
from tests.integration.test_kafka_roundtrip import create_topics
from tests.unit.streams.scripted import query

#: How long a step may take on a busy machine before the test fails with the worker's log.
WAIT_S = 60


@dataclass(frozen=True)
class Topics:
    """A worker's fresh topics (one partition each) and its group, named from ``prefix``."""

    prefix: str

    @property
    def group(self) -> str:
        return self.prefix

    @property
    def source(self) -> str:
        return TOPICS["queries"].name(self.prefix)

    @property
    def out(self) -> str:
        return TOPICS["feedback"].name(self.prefix)

    @property
    def letters(self) -> str:
        return TOPICS["deadletter"].name(self.prefix)


def fresh_topics(bootstrap: str, prefix: str) -> Topics:
    """Create ``prefix``'s source, output and dead-letter topics."""
    topics = Topics(prefix)
    names = [topics.source, topics.out, topics.letters]
    asyncio.run(create_topics(bootstrap, names, partitions=1))
    return topics


def app_env(name: str, topics: Topics) -> dict[str, str]:
    """What a test app reads: ``<NAME>_PREFIX`` and ``<NAME>_APP_ID``."""
    return {f"{name}_PREFIX": topics.prefix, f"{name}_APP_ID": topics.group}


def start(
    app: Path, bootstrap: str, env: dict[str, str], tmp_path: Path, log_name: str = "worker.log"
) -> tuple[subprocess.Popen[bytes], Path]:
    """``app`` as a Faust worker, once it is ready: the process and its log."""
    return start_faust_worker(
        app, bootstrap=bootstrap, env=env, workdir=tmp_path, log_name=log_name
    )


async def produce(bootstrap: str, topic: str, *texts: str) -> None:
    """A query per text to partition 0, ids ``<text>-<i>``."""
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
    """The group's committed offset of ``topic``'s partition 0 (None: nothing yet)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    done = offsets.get(TopicPartition(topic, 0))
    return None if done is None else done.offset


def wait_committed(bootstrap: str, topics: Topics, offset: int, log: Path) -> None:
    """Until the group has committed ``offset``; fails with the log after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while asyncio.run(committed(bootstrap, topics.group, topics.source)) != offset:
        assert time.monotonic() < deadline, (
            f"not committed to {offset}:\n{log.read_text(errors='replace')[-3000:]}"
        )
        time.sleep(0.5)


def wait_for(what: str, log: Path) -> None:
    """Until ``what`` is in the worker's log; fails with the log after :data:`WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while what not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {what!r} in the log:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)
