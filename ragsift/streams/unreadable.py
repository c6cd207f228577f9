"""Records the Kafka client cannot read: where they end, so they can be dead-lettered and skipped.

aiokafka decodes each record header's name as UTF-8 while it reads a fetched
batch. The broker does not check it (Java decodes header names leniently), and a
producer can write any bytes there (librdkafka takes a C string), so one record
can be unreadable to aiokafka: ``getmany`` raises ``UnicodeDecodeError`` on it at
every call, and what the call had taken from other partitions is never returned
though their positions moved past it. Nothing after that record in its batch can
be read either: aiokafka parses a batch from its first record, whatever offset
is asked for. The plain runtime's :class:`~ragsift.streams.loop.BatchLoop` reads
each partition alone to find the one that fails, asks :func:`readable_from`
where records can be read again, and dead-letters and skips the span between.
"""

from __future__ import annotations

from typing import Protocol

from aiokafka import TopicPartition

from ragsift.errors import DecodeError

__all__ = ["PROBE_WAIT_MS", "UnreadableRecordsError", "readable_from"]

#: How long one probe of :func:`readable_from` waits for its fetch. After a seek the
#: consumer fetches again, behind any fetch in flight (which the broker may hold up to
#: aiokafka's fetch_max_wait_ms, 500 ms); a probe that reads nothing in time ends the
#: span early, and what is left of it is found on the next read.
PROBE_WAIT_MS = 1_000


class UnreadableRecordsError(DecodeError):
    """Records the Kafka client could not read; their dead letter names the offsets."""

    def __init__(self, tp: TopicPartition, first: int, end: int, cause: Exception):
        span = f"@{first}" if end == first + 1 else f" offsets {first}..{end - 1}"
        super().__init__(
            f"{tp.topic}[{tp.partition}]{span} could not be read by the Kafka client"
            f" ({type(cause).__name__}: {cause}): a record header name that is not UTF-8,"
            " in the record or before it in its batch; the bytes are on the topic, not here"
        )
        self.first = first
        self.end = end


class _Consumer(Protocol):
    """What :func:`readable_from` needs of an ``AIOKafkaConsumer``."""

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[object]]: ...

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]: ...


async def readable_from(
    consumer: _Consumer, tp: TopicPartition, first: int, wait_ms: int = PROBE_WAIT_MS
) -> int:
    """The first offset past ``first`` from which ``tp`` can be read, given that ``first`` cannot.

    A read fails at every offset up to the end of the batch that holds the
    unreadable record, and succeeds from the next batch on; so this tries
    ``first + 1``, ``+ 2``, ``+ 4``... up to the log's end until a read succeeds,
    then halves the gap back. A probe that reads nothing within ``wait_ms`` counts
    as a success: that can only end the span early (what is left of it fails the
    next read and is skipped then), never skip a readable record. The consumer is
    left positioned at the offset returned.
    """
    end = (await consumer.end_offsets([tp]))[tp]

    async def reads(offset: int) -> bool:
        consumer.seek(tp, offset)
        try:
            await consumer.getmany(tp, timeout_ms=wait_ms, max_records=1)
        except UnicodeDecodeError:
            return False
        return True

    failing, step = first, 1
    while failing + 1 < end and not await reads(min(failing + step, end)):
        failing, step = min(failing + step, end), step * 2
    reading = min(failing + step, end) if failing + 1 < end else failing + 1
    while reading - failing > 1:
        middle = (failing + reading) // 2
        if await reads(middle):
            reading = middle
        else:
            failing = middle
    consumer.seek(tp, reading)
    return reading
