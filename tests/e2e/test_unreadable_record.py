"""A record the Kafka client cannot read, on the real broker: both runtimes go on.

aiokafka decodes a record header's name as UTF-8 while it parses a fetched
batch, and the broker does not check it. One record whose header name is
``b"\\xff\\xfe"`` made every ``getmany`` of the plain loop raise
``UnicodeDecodeError``: its partition stopped for good and the records the
failing call had taken from other partitions were never returned. Under Faust
the consumer thread stopped, and the worker with it. Since the fixes
(``ragsift/streams/unreadable.py`` and ``faust_read.py``, docs/reliability.md,
"Read") each runtime dead-letters the unreadable span at stage ``decode`` and
skips it. Here a real ``ragsift worker retrieval`` process on each runtime meets
such a record between two runs of valid queries.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.schemas import DeadLetter, QueryEvent, RetrievalResult
from ragsift.settings import EmbedderSettings
from ragsift.streams.codec import EventCodec
from tests.e2e.harness import TENANT, Stack, TopicReader, WorkerProcess, prepare_index

#: Not UTF-8: the byte 0xff never occurs in it. Any producer that takes the name as
#: bytes (librdkafka takes a C string) can write it; the broker stores it as is.
UNREADABLE_NAME = b"\xff\xfe"
#: The partition the unreadable record is written to (the topic has four).
PARTITION = 0
#: Valid queries before and after it: with four partitions, enough that each gets some.
BEFORE = 40
AFTER = 40
#: Generous bounds for a loaded machine; a stuck partition never meets them.
RESULTS_TIMEOUT_S = 180.0
COMMIT_TIMEOUT_S = 60.0
#: Reads of the record by a plain consumer before it must have raised (1 s each).
PROBE_READS = 30
#: The plain runtime under test, with the hashing embedder: this test is about the
#: loop, not the model, and the index and the worker must agree on the embedder.
EMBEDDER = EmbedderSettings(kind="hashing")

pytestmark = pytest.mark.timeout(600)

# Run in a process of its own with AIOKAFKA_NO_EXTENSIONS=1: aiokafka's compiled batch
# builder accepts only an exact str as a header name and encodes it itself, while its
# pure-Python builder calls the name's encode(), which a str subclass can answer with any
# bytes. The variable must be set before aiokafka is imported, hence the process.
UNREADABLE_WRITER = """
import asyncio
import sys

from aiokafka import AIOKafkaProducer


class RawName(str):
    def encode(self, *args, **kwargs):
        return bytes.fromhex(sys.argv[4])


async def main():
    bootstrap, topic, partition = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        sent = await producer.send_and_wait(
            topic,
            sys.stdin.buffer.read(),
            key=b"unreadable",
            partition=partition,
            headers=[(RawName("x"), b"1")],
        )
    finally:
        await producer.stop()
    print(sent.offset)


asyncio.run(main())
"""


@pytest.fixture(params=["plain", "faust"])
def plain_stack(
    request: pytest.FixtureRequest, kafka_bootstrap: str, redis_settings: object, tmp_path: Path
) -> Stack:
    """Fresh topics, group and keys; the runtime of the param whatever the environment says."""
    return Stack(
        bootstrap=kafka_bootstrap,
        redis_url=redis_settings.url,  # type: ignore[attr-defined]  # RedisSettings
        prefix=f"unreadable-{request.param}-{uuid.uuid4().hex[:8]}",
        base_dir=tmp_path,
        extra_env={"RAGSIFT_WORKER_RUNTIME": request.param, "RAGSIFT_EMBEDDER_KIND": EMBEDDER.kind},
    )


@pytest.fixture
def worker(plain_stack: Stack, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A ready ``ragsift worker retrieval`` over the handbook; killed at the end."""
    template = tmp_path / "template"
    asyncio.run(prepare_index(template, EMBEDDER))
    process = WorkerProcess(plain_stack, ["retrieval"], template, "w1")
    try:
        yield process.start().wait_ready()
    finally:
        process.kill()


def make_queries(tag: str, n: int) -> list[QueryEvent]:
    texts = [q.text for q in DEMO_QUERIES]
    return [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id=TENANT, query=f"{texts[i % len(texts)]} {i}")
        for i in range(n)
    ]


async def produce_placed(stack: Stack, queries: Sequence[QueryEvent]) -> dict[str, int]:
    """Produce ``queries`` keyed by id; the partition each one went to."""
    codec = EventCodec(QueryEvent)
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sending = [
            await producer.send(stack.topic("queries"), codec.encode(q), key=q.query_id.encode())
            for q in queries
        ]
        sent = await asyncio.gather(*sending)
    finally:
        await producer.stop()
    return {q.query_id: meta.partition for q, meta in zip(queries, sent, strict=True)}


def write_unreadable(stack: Stack, value: bytes) -> int:
    """Write ``value`` with a header named ``UNREADABLE_NAME`` to ``PARTITION``; its offset.

    Alone in its produce request, the record is alone in its batch on the log: the
    span the worker skips is this record and no other.
    """
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            UNREADABLE_WRITER,
            stack.bootstrap,
            stack.topic("queries"),
            str(PARTITION),
            UNREADABLE_NAME.hex(),
        ],
        input=value,
        env={**os.environ, "AIOKAFKA_NO_EXTENSIONS": "1"},
        capture_output=True,
        check=True,
        timeout=60,
    )
    return int(done.stdout)


async def assert_unreadable(stack: Stack, offset: int) -> None:
    """A plain aiokafka consumer cannot read the record: the fault is really injected."""
    tp = TopicPartition(stack.topic("queries"), PARTITION)
    consumer = AIOKafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for _ in range(PROBE_READS):  # a read may end before the fetch arrives
            try:
                await consumer.getmany(tp, timeout_ms=1000)
            except UnicodeDecodeError:
                return
    finally:
        await consumer.stop()
    raise AssertionError(f"a plain consumer read {tp}@{offset}: the fault was not injected")


async def until_committed_at_end(stack: Stack) -> None:
    """Wait until the worker's group has committed every partition at its log end.

    The skipped span is committed too: a restarted worker would not meet it again,
    and no readable record is left behind it.
    """
    topic = stack.topic("queries")
    admin = AIOKafkaAdminClient(bootstrap_servers=stack.bootstrap)
    probe = AIOKafkaConsumer(bootstrap_servers=stack.bootstrap, enable_auto_commit=False)
    await admin.start()
    await probe.start()
    try:
        (described,) = await admin.describe_topics([topic])
        parts = [TopicPartition(topic, p["partition"]) for p in described["partitions"]]
        ends = await probe.end_offsets(parts)
        committed: dict[TopicPartition, int] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COMMIT_TIMEOUT_S
        while loop.time() < deadline:
            offsets = await admin.list_consumer_group_offsets(stack.prefix)
            committed = {tp: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
            if all(committed.get(tp) == end for tp, end in ends.items()):
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"commits {committed} did not reach the log ends {ends}")
    finally:
        await probe.stop()
        await admin.close()


async def test_a_header_name_that_is_not_utf8_is_dead_lettered_once_and_the_worker_goes_on(
    plain_stack: Stack, worker: WorkerProcess
) -> None:
    before = make_queries("before", BEFORE)
    after = make_queries("after", AFTER)
    # A valid query in every other respect: only its header name keeps it from an answer.
    unreadable = QueryEvent(query_id="unreadable-0", tenant_id=TENANT, query=DEMO_QUERIES[0].text)
    wanted = {q.query_id for q in before + after}
    async with (
        TopicReader(plain_stack, "deadletter") as dead,
        TopicReader(plain_stack, "retrievals") as results,
    ):
        placed = await produce_placed(plain_stack, before)
        await results.until(
            lambda ev: {getattr(e, "query_id", None) for e in ev} >= placed.keys(),
            timeout_s=RESULTS_TIMEOUT_S,
        )
        bad_offset = await asyncio.to_thread(
            write_unreadable, plain_stack, EventCodec(QueryEvent).encode(unreadable)
        )
        placed |= await produce_placed(plain_stack, after)
        # Readable records follow the unreadable one on its partition: they must not be lost.
        assert PARTITION in {placed[q.query_id] for q in after}, placed
        await assert_unreadable(plain_stack, bad_offset)
        await results.until(
            lambda ev: {getattr(e, "query_id", None) for e in ev} >= wanted,
            timeout_s=RESULTS_TIMEOUT_S,
        )
        await dead.until(lambda ev: len(ev) >= 1, timeout_s=RESULTS_TIMEOUT_S)
        await until_committed_at_end(plain_stack)
        await results.poll()  # anything late (a replay) shows up in the counts below
        await dead.poll()

    answered = Counter(e.query_id for e in results.events if isinstance(e, RetrievalResult))
    assert answered.keys() == wanted, sorted(answered.keys() ^ wanted)[:5]
    assert set(answered.values()) == {1}, [q for q, n in answered.items() if n != 1][:5]
    letters = [e for e in dead.events if isinstance(e, DeadLetter)]
    assert len(letters) == 1, [(e.stage, e.error) for e in letters]
    letter = letters[0]
    assert letter.stage == "decode"
    assert letter.error_type == "UnreadableRecordsError"
    assert (letter.topic, letter.partition, letter.offset) == (
        plain_stack.topic("queries"),
        PARTITION,
        bad_offset,
    )
    # Alone in its batch, the span is the one record: the letter names its offset.
    assert f"{plain_stack.topic('queries')}[{PARTITION}]@{bad_offset} " in letter.error
    assert "UnicodeDecodeError" in letter.error
    assert worker.metric("ragsift_dead_letters_total") == 1
    assert worker.metric("ragsift_dead_letters_dropped_total") == 0
    assert worker.proc is not None
    assert worker.proc.poll() is None, "the worker died"
    assert worker.readyz() == 200
    log = worker.log.read_text(errors="replace")
    assert "batch failed" not in log  # the plain loop's word for a fetch that failed whole
    assert "could not be read" in log
