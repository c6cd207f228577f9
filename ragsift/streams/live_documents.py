"""The documents one tenant's collection holds on the compacted documents topic.

In the streaming runtime the documents topic is the record of what is indexed: the
indexer applies each record in key order, and an indexer rebuilt from the topic
holds what the topic's last record per key says (an upsert, or a delete: a
``op="delete"`` event or a tombstone, :mod:`ragsift.streams.tombstones`). So a
client that cannot see the index (``ragsift submit --files --prune``) reads the
topic to learn which documents are live, without a consumer group: nothing is
committed, no worker's offsets move (:mod:`ragsift.streams.topic_read`).

A record the indexer cannot read (not a document event) changed nothing in the
index, so it changes nothing here either. The keys are read, and only a key of
the tenant's collection (``tenant_id/collection/doc_id``) has its value decoded.
Records the Kafka client cannot read at all are passed over as the workers pass
them over.
"""

from __future__ import annotations

from collections.abc import Callable

from ragsift.errors import RagsiftError
from ragsift.schemas.ingest import DocumentEvent
from ragsift.settings import KafkaSettings
from ragsift.streams.codec import EventCodec
from ragsift.streams.topic_read import IDLE_TIMEOUT_S, Record, TopicReadTimeout, read_to_end

__all__ = ["TopicReadTimeout", "live_documents"]


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
    live: dict[str, bool] = {}

    def take(record: Record) -> None:
        if record.key is not None and record.key.startswith(prefix):
            doc_id = record.key[len(prefix) :].decode("utf-8", "replace")
            state = _is_upsert(codec, record.value, tenant_id, collection, doc_id)
            if state is not None:
                live[doc_id] = state

    await read_to_end(kafka, topic, take, progress=progress, idle_timeout_s=idle_timeout_s)
    return {doc_id for doc_id, up in live.items() if up}


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
