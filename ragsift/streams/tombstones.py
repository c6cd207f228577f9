"""A tombstone on the documents topic: the delete its key names.

The documents topic is compacted, and a record with a key and no value (a
tombstone) is how Kafka deletes a key from a compacted topic: once compaction runs,
the key's document is gone from the topic, so an indexer rebuilt from it would not
have it. The live index follows the topic: a tombstone deletes the document its key
names (``tenant_id/collection/doc_id``, :attr:`~ragsift.streams.topics.TopicSpec.key`).
Until then a tombstone was decoded as an empty message and dead-lettered, one dead
letter per key an operator cleaned up.

A tombstone whose key names no document in that form (a key written before the
topic was keyed by tenant and collection, keyed by ``doc_id`` alone) cannot say
whose document it deletes: it is passed over and counted, never guessed at.
"""

from __future__ import annotations

import uuid
from typing import Final

from pydantic import ValidationError

from ragsift.schemas.ingest import DocumentEvent

__all__ = ["TOMBSTONE_SKIPPED", "tombstone_delete"]

#: ``ragsift_events_total{result}`` of a tombstone whose key names no document.
TOMBSTONE_SKIPPED: Final = "tombstone_skipped"
_NAMESPACE = uuid.UUID("0b6f7a4e-3f2c-5d1e-9a8b-7c6d5e4f3a2b")


def tombstone_delete(key: bytes | None) -> DocumentEvent | None:
    """The delete a documents-topic tombstone with this key stands for; None when the
    key does not name one document as ``tenant_id/collection/doc_id``.

    The event id comes from the key, so a tombstone read again is the same event.
    """
    if not key:
        return None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return None
    parts = text.split("/")
    if len(parts) != 3:
        return None
    tenant_id, collection, doc_id = parts
    try:
        return DocumentEvent(
            event_id=f"tombstone-{uuid.uuid5(_NAMESPACE, text).hex}",
            tenant_id=tenant_id,
            collection=collection,
            doc_id=doc_id,
            op="delete",
        )
    except ValidationError:
        return None
