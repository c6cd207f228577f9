"""Reading a whole topic once, from its beginning to where it ended when the read began.

Commands that need what a topic holds (``submit --files --prune`` reads the documents
topic, ``deadletters`` the dead-letter topic) read it without a consumer group: the
partitions are assigned by hand, nothing is committed and no worker's offsets move.
Records published after the read began are not waited for, so the read ends.

Records the Kafka client cannot read at all (:mod:`ragsift.streams.unreadable`) are
passed over as the workers pass them over: one such record made every prune fail with
a traceback, for as long as the topic kept it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from ragsift.errors import RagsiftError
from ragsift.settings import KafkaSettings
from ragsift.streams import clients
from ragsift.streams.unreadable import readable_from

__all__ = ["IDLE_TIMEOUT_S", "Record", "TopicReadTimeout", "read_to_end"]

#: The longest wait for the next records before the read is given up.
IDLE_TIMEOUT_S = 30.0
_FETCH_MS = 500

#: One record as the Kafka client reads it.
Record: TypeAlias = ConsumerRecord[bytes, bytes]


class TopicReadTimeout(RagsiftError):
    """The topic stopped giving records before its end offsets were reached."""


async def read_to_end(
    kafka: KafkaSettings,
    topic: str,
    take: Callable[[Record], None],
    *,
    progress: Callable[[int, int], None] | None = None,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> bool:
    """Hand each record of ``topic`` to ``take``, partition by partition in offset order,
    from the beginning to the end offsets of the moment the read started; False when the
    topic does not exist (nothing read). ``progress(done, total)``: offsets read of
    those there were to read.

    Raises:
        TopicReadTimeout: no records for ``idle_timeout_s`` before the end offsets.
        KafkaError: the cluster cannot be reached.
    """
    consumer = clients.consumer(kafka, auto_offset_reset="earliest")
    try:
        await consumer.start()  # in the try: a consumer that failed to start is closed too
        found = await consumer._client.fetch_all_metadata()
        ids = found.partitions_for_topic(topic)
        if not ids:
            return False
        partitions = [TopicPartition(topic, p) for p in sorted(ids)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        starts = {tp: await consumer.position(tp) for tp in partitions}
        total = sum(max(0, ends[tp] - starts[tp]) for tp in partitions)
        open_ = {tp for tp in partitions if starts[tp] < ends[tp]}
        done, last = 0, time.monotonic()
        read_to = dict(starts)  # per partition, the offset after the last record taken
        while open_:
            try:
                batches = await consumer.getmany(*open_, timeout_ms=_FETCH_MS)
            except UnicodeDecodeError:  # a record no client read takes: go round it
                batches = await _read_around(consumer, sorted(open_), read_to, ends)
            for tp, records in batches.items():
                for record in records:
                    if record.offset >= ends[tp]:
                        break
                    read_to[tp] = max(read_to[tp], record.offset + 1)
                    take(record)
            # offsets, not records: compaction's gaps and spans passed over count too
            done = sum(read_to[tp] - starts[tp] for tp in partitions)
            if batches:
                last = time.monotonic()
                if progress is not None:
                    progress(done, total)
            elif time.monotonic() - last > idle_timeout_s:
                raise TopicReadTimeout(
                    f"{topic} gave no records for {idle_timeout_s:.0f} s with {total - done}"
                    " left to read before its end offsets"
                )
            open_ = {tp for tp in open_ if await consumer.position(tp) < ends[tp]}
    finally:
        await consumer.stop()
    return True


async def _read_around(
    consumer: AIOKafkaConsumer,
    partitions: list[TopicPartition],
    read_to: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
) -> dict[TopicPartition, list[Record]]:
    """After a fetch that raised: each partition from where it was read to, one record
    a call; an unreadable span is passed over (the caller counts it done)."""
    out: dict[TopicPartition, list[Record]] = {}
    for tp in partitions:  # that fetch may have moved any of them past what it returned
        consumer.seek(tp, read_to[tp])
    for tp in partitions:
        mine: list[Record] = []
        at = read_to[tp]
        while at < ends[tp]:
            try:
                part = await consumer.getmany(tp, timeout_ms=_FETCH_MS, max_records=1)
            except UnicodeDecodeError:
                at = await readable_from(consumer, tp, at)
                read_to[tp] = max(read_to[tp], min(at, ends[tp]))
                continue
            if not part.get(tp):
                break
            mine.extend(part[tp])
            at = part[tp][-1].offset + 1
        if mine:
            out[tp] = mine
    return out
