"""A record the Kafka client cannot read is dead-lettered and skipped; nothing else is lost.

Before: aiokafka raised ``UnicodeDecodeError`` at every ``getmany`` once a fetched
record had a header name that is not UTF-8. The plain loop logged "batch failed,
retrying" forever with that partition stopped, and the records the failing call
had already taken from other partitions were never returned, their positions
moved past them. :class:`LogConsumer` reads as aiokafka does: batch by batch,
each parsed from its first record, positions moved per partition as it goes.
(The same against a real broker: ``AIOKAFKA_NO_EXTENSIONS=1`` lets a producer
write such a header name.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition

from ragsift.observability.metrics import Metrics
from ragsift.streams import unreadable
from ragsift.streams.loop import BatchLoop
from ragsift.streams.routing import BatchRouter
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler, raw
from tests.unit.streams.test_loop import Record

TOPIC = "unit.queries.v1"
TP0, TP1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
UNREADABLE = b"<a header name that is not UTF-8>"


class LogConsumer:
    """Partitions of batches of (offset, value); ``UNREADABLE`` raises as aiokafka does.

    ``getmany`` drains partitions in ``order`` (aiokafka: as their fetches came
    back), each from its position; a batch is parsed from its first record, so an
    unreadable record fails every read of its batch. A partition's position moves
    once its records are taken; a raise discards what the call had taken.
    """

    def __init__(self, logs: dict[TopicPartition, list[list[tuple[int, bytes]]]]):
        self.logs = logs
        self.order = sorted(logs, reverse=True)  # the poisoned partition 0 comes last
        self.positions = dict.fromkeys(logs, 0)
        self.commits: dict[TopicPartition, int] = {}
        self.getmany_calls = 0

    def subscribe(self, topics: list[str], listener: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.logs)

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Record]]:
        self.getmany_calls += 1
        await asyncio.sleep(0)
        budget = max_records if max_records is not None else 10**9
        out: dict[TopicPartition, list[Record]] = {}
        for tp in [tp for tp in self.order if not partitions or tp in partitions]:
            taken: list[Record] = []
            for batch in self.logs[tp]:
                if batch[-1][0] < self.positions[tp]:
                    continue
                for offset, value in batch:  # parsed from its first record, one at a time
                    if len(taken) >= budget:
                        break
                    if value == UNREADABLE:
                        b"\xff".decode("utf-8")  # raises UnicodeDecodeError
                    if offset >= self.positions[tp]:
                        taken.append(Record(tp.topic, tp.partition, offset, b"k", value))
            if taken:
                self.positions[tp] = taken[-1].offset + 1
                out[tp] = taken
                budget -= len(taken)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self.positions[tp] = 0

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.commits.get(tp)

    async def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.logs[tp][-1][-1][0] + 1 for tp in partitions}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.update(offsets)


def good(partition: int, *offsets: int) -> list[tuple[int, bytes]]:
    return [(o, raw(f"p{partition}-{o}")) for o in offsets]


async def run(consumer: LogConsumer, sender: RecordingSender, metrics: Metrics) -> None:
    router = BatchRouter(ScriptedHandler(), sender, metrics=metrics, deadline_s=1.0)

    async def flush(*, partial: bool) -> None:
        return None

    loop = BatchLoop(consumer, {TOPIC: [router]}, flush, batch_size=8, within_s=0.001)
    loop.subscribe()
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    async with asyncio.timeout(10):
        while consumer.positions != ends(consumer):  # noqa: ASYNC110 (nothing to wait on)
            await asyncio.sleep(0.01)
    stop.set()
    await task


def ends(consumer: LogConsumer) -> dict[TopicPartition, int]:
    return {tp: batches[-1][-1][0] + 1 for tp, batches in consumer.logs.items()}


def answered(sender: RecordingSender) -> list[str]:
    return sorted(sender.output_ids())


async def test_an_unreadable_record_is_dead_lettered_and_every_readable_one_answered() -> None:
    consumer = LogConsumer(
        {
            TP0: [good(0, 0), [(1, UNREADABLE)], good(0, 2), good(0, 3)],
            TP1: [good(1, 0, 1, 2), good(1, 3, 4)],
        }
    )
    sender, metrics = RecordingSender(), Metrics()
    await run(consumer, sender, metrics)
    # Partition 1's records, taken by the first call before it raised, are answered too.
    assert answered(sender) == sorted(
        ["p0-0", "p0-2", "p0-3", "p1-0", "p1-1", "p1-2", "p1-3", "p1-4"]
    )
    [letter] = sender.dead_letters()
    assert (letter.partition, letter.offset, letter.stage) == (0, 1, "decode")
    assert letter.error.startswith(f"{TOPIC}[0]@1 could not be read by the Kafka client")
    assert "UnicodeDecodeError" in letter.error
    sample = metrics.registry.get_sample_value
    assert sample("ragsift_dead_letters_total", {"worker": "scripted", "stage": "decode"}) == 1
    assert consumer.commits == {TP0: 4, TP1: 5}


async def test_the_rest_of_its_batch_goes_with_it_in_one_letter() -> None:
    # aiokafka parses a batch from its first record: what follows the unreadable
    # record in its batch cannot be read; what precedes it can, and is answered.
    batch = [*good(0, 0, 1), (2, UNREADABLE), *good(0, 3, 4)]
    consumer = LogConsumer({TP0: [batch, good(0, 5, 6)], TP1: [good(1, 0)]})
    sender, metrics = RecordingSender(), Metrics()
    await run(consumer, sender, metrics)
    assert answered(sender) == ["p0-0", "p0-1", "p0-5", "p0-6", "p1-0"]
    [letter] = sender.dead_letters()
    assert letter.offset == 2
    assert letter.error.startswith(f"{TOPIC}[0] offsets 2..4 could not be read")
    assert consumer.commits == {TP0: 7, TP1: 1}
    # One letter, three events not processed (it counted one).
    sample = metrics.registry.get_sample_value
    assert sample("ragsift_dead_letters_total", {"worker": "scripted", "stage": "decode"}) == 1
    assert sample("ragsift_events_total", {"worker": "scripted", "result": "dead_letter"}) == 3


async def test_the_unreadable_span_is_found_in_few_reads_across_a_compacted_gap() -> None:
    # A compacted topic: one batch whose records are 1,000,000 offsets apart.
    consumer = LogConsumer({TP0: [good(0, 0), [(1, UNREADABLE), *good(0, 1_000_000)]]})
    consumer.positions[TP0] = 1
    assert await unreadable.readable_from(consumer, TP0, 1, wait_ms=0) == 1_000_001
    assert consumer.getmany_calls < 50
    assert consumer.positions[TP0] == 1_000_001


async def test_an_unreadable_last_record_ends_its_span_at_the_log_end() -> None:
    consumer = LogConsumer({TP0: [good(0, 0), [(1, UNREADABLE)]], TP1: [good(1, 0)]})
    sender = RecordingSender()
    await run(consumer, sender, Metrics())
    assert answered(sender) == ["p0-0", "p1-0"]
    assert [letter.offset for letter in sender.dead_letters()] == [1]
    assert consumer.commits == {TP0: 2, TP1: 1}
