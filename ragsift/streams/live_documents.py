"""The documents one tenant's collection holds on the compacted documents topic.

In the streaming runtime the documents topic is the record of what is indexed: the
indexer applies each record in key order, and an indexer rebuilt from the topic
holds what the topic's last record per key says (an upsert, or a delete: a
``op="delete"`` event or a tombstone, :mod:`ragsift.streams.tombstones`). So a
client that cannot see the index (``ragsift submit --files --prune``) reads the
topic to learn which documents are live, without a consumer group: nothing is
committed, no worker's offsets move.

A record the indexer cannot read (not a document event) changed nothing in the
index, so it changes nothing here either. The keys are read, and only a key of
the tenant's collection (``tenant_id/collection/doc_id``) has its value decoded.
Records the Kafka client cannot read at all (:mod:`ragsift.streams.unreadable`)
are passed over as the workers pass them over: one such record, any tenant's,
made every prune of every tenant fail with a traceback, for as long as compaction
kept it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from ragsift.errors import RagsiftError
from ragsift.schemas.ingest import DocumentEvent
from ragsift.settings import KafkaSettings
from ragsift.streams import clients
from ragsift.streams.codec import EventCodec
from ragsift.streams.unreadable import readable_from

__all__ = ["TopicReadTimeout", "live_documents"]

#: The longest wait for the next records before the read is given up.
IDLE_TIMEOUT_S = 30.0
_FETCH_MS = 500


class TopicReadTimeout(RagsiftError):
    """The topic stopped giving records before its end offsets were reached."""


async def live_documents(
    kafka: KafkaSettings,
    topic: str,
    tenant_id: str,
    collection: str,
    *,
    progress: Callable[[int, int], None] | None = None,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> set[str]:
    """The ids of the documents of ``tenant_id``'s ``collection`` whose last record on
    ``topic`` is an upsert, read from the beginning to the end offsets of the moment it
    started (records published after that are not waited for). A missing topic holds
    none. ``progress(done, total)``: records read of those there were to read."""
    codec = EventCodec(DocumentEvent)
    prefix = f"{tenant_id}/{collection}/".encode()
    consumer = clients.consumer(kafka, auto_offset_reset="earliest")
    await consumer.start()
    try:
        found = await consumer._client.fetch_all_metadata()
        ids = found.partitions_for_topic(topic)
        if not ids:
            return set()
        partitions = [TopicPartition(topic, p) for p in sorted(ids)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        starts = {tp: await consumer.position(tp) for tp in partitions}
        total = sum(max(0, ends[tp] - starts[tp]) for tp in partitions)
        open_ = {tp for tp in partitions if starts[tp] < ends[tp]}
        live: dict[str, bool] = {}
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
                    if record.key is not None and record.key.startswith(prefix):
                        doc_id = record.key[len(prefix) :].decode("utf-8", "replace")
                        state = _is_upsert(codec, record.value, tenant_id, collection, doc_id)
                        if state is not None:
                            live[doc_id] = state
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
    return {doc_id for doc_id, up in live.items() if up}


async def _read_around(
    consumer: AIOKafkaConsumer,
    partitions: list[TopicPartition],
    read_to: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
    """After a fetch that raised: each partition from where it was read to, one record
    a call; an unreadable span is passed over (the caller counts it done)."""
    out: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
    for tp in partitions:  # that fetch may have moved any of them past what it returned
        consumer.seek(tp, read_to[tp])
    for tp in partitions:
        mine: list[ConsumerRecord[bytes, bytes]] = []
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


def _is_upsert(
    codec: EventCodec[DocumentEvent],
    value: bytes | None,
    tenant_id: str,
    collection: str,
    doc_id: str,
) -> bool | None:
    """Whether the record keeps the document (True) or deletes it (False); None when the
    indexer would have dead-lettered it, or it names another document than its key."""
    if value is None:
        return False  # a tombstone deletes the document its key names
    try:
        event = codec.decode(value)
    except RagsiftError:
        return None
    if (event.tenant_id, event.collection, event.doc_id) != (tenant_id, collection, doc_id):
        return None
    return event.op != "delete"
