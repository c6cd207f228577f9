"""The topic registry: every topic ragsift reads or writes, in one table.

Names carry a version suffix; a breaking schema change gets a new topic. The
registry is the single source for Faust topic declarations, the Strimzi
``KafkaTopic`` resources and the docs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from ragsift.schemas import (
    DeadLetter,
    Decision,
    DocumentEvent,
    EvidenceEvent,
    FeedbackEvent,
    QueryEvent,
    Report,
    RetrievalResult,
    ReviewItem,
)
from ragsift.streams.codec import MAX_PAYLOAD_BYTES
from ragsift.streams.tombstones import tombstone_delete

__all__ = ["MAX_MESSAGE_BYTES", "TOPICS", "TopicSpec", "follows_of", "topic_name"]

#: The largest message a producer of ragsift's sends and the documents topic takes: the
#: largest event the codec reads (4 MiB) and room for the key and the record's framing.
MAX_MESSAGE_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic: its logical name, contract, key, and retention policy."""

    logical: str
    """Short name used in code: ``queries``, ``audit``..."""
    version: int
    model: type[BaseModel]
    key: str | tuple[str, ...]
    """Field(s) of the event used as the message key (several joined by ``/``)."""
    cleanup_policy: Literal["delete", "compact"] = "delete"
    retention_ms: int | None = 7 * _DAY_MS
    partitions: int | None = None
    """None: the deployment's default (RAGSIFT_KAFKA_PARTITIONS)."""
    description: str = ""
    tombstone: Callable[[bytes | None], BaseModel | None] | None = None
    """A compacted topic's reading of a record with a key and no value: the event its
    key stands for, or None when the key names none (passed over and counted). None
    here: a null value is a broken message, dead-lettered."""
    max_message_bytes: int | None = None
    """The topic's ``max.message.bytes``; None: the broker's (1 MiB by default)."""

    def key_of(self, event: BaseModel) -> str:
        """The message key of ``event`` on this topic."""
        fields = (self.key,) if isinstance(self.key, str) else self.key
        return "/".join(str(getattr(event, field, "")) for field in fields)

    @property
    def key_name(self) -> str:
        """The key as ``topics`` shows it: ``query_id``, ``tenant_id/collection/doc_id``."""
        return self.key if isinstance(self.key, str) else "/".join(self.key)

    def name(self, prefix: str = "ragsift") -> str:
        """Full topic name, e.g. ``ragsift.queries.v1``."""
        return f"{prefix}.{self.logical}.v{self.version}"

    def config(self) -> dict[str, str]:
        """Kafka topic configs (``cleanup.policy``, ``retention.ms``, ``max.message.bytes``)."""
        cfg: dict[str, str] = {"cleanup.policy": self.cleanup_policy}
        if self.retention_ms is not None:
            cfg["retention.ms"] = str(self.retention_ms)
        if self.max_message_bytes is not None:
            cfg["max.message.bytes"] = str(self.max_message_bytes)
        return cfg


TOPICS: dict[str, TopicSpec] = {
    spec.logical: spec
    for spec in (
        TopicSpec("queries", 1, QueryEvent, "query_id", description="Query events in."),
        TopicSpec("retrievals", 1, RetrievalResult, "query_id", description="Scored results."),
        TopicSpec("reports", 1, Report, "query_id", description="User-facing reports."),
        TopicSpec("decisions", 1, Decision, "query_id", description="Use/skip decisions."),
        TopicSpec(
            "review",
            1,
            ReviewItem,
            "query_id",
            retention_ms=30 * _DAY_MS,
            description="Human review queue (B3).",
        ),
        TopicSpec(
            "audit",
            1,
            EvidenceEvent,
            "subject",
            # Compliance reads the trail long after the fact; the audit sink
            # also keeps it on disk.
            retention_ms=365 * _DAY_MS,
            description="CloudEvents evidence trail.",
        ),
        TopicSpec(
            "deadletter",
            1,
            DeadLetter,
            "dead_letter_id",
            retention_ms=30 * _DAY_MS,
            description="Events a worker could not process, with the reason.",
        ),
        TopicSpec(
            "documents",
            1,
            DocumentEvent,
            # Compacted: the latest version of each document is kept, so a new
            # indexer can rebuild from the topic. Keyed by tenant, collection and
            # document: keyed by doc_id alone, one tenant's "faq.md" (or its delete)
            # compacted away another tenant's, and a rebuild lost it.
            ("tenant_id", "collection", "doc_id"),
            cleanup_policy="compact",
            retention_ms=None,
            tombstone=tombstone_delete,
            # A document may hold MAX_TEXT_CHARS characters: up to 4 MiB as UTF-8, over
            # the broker's default 1 MiB (600,000 Chinese characters are 1.8 MB).
            max_message_bytes=MAX_MESSAGE_BYTES,
            description="Live ingestion (per-document ordering by tenant/collection/doc_id key).",
        ),
        TopicSpec(
            "feedback",
            1,
            FeedbackEvent,
            "tenant_id",
            retention_ms=90 * _DAY_MS,
            description="Relevance labels for per-tenant calibration.",
        ),
    )
}


def topic_name(logical: str, prefix: str = "ragsift") -> str:
    """Full name of a registered topic; a clear error for an unknown one."""
    try:
        return TOPICS[logical].name(prefix)
    except KeyError:
        raise KeyError(f"unknown topic {logical!r}; known: {sorted(TOPICS)}") from None


def follows_of(handlers: Iterable[Any], prefix: str) -> dict[str, str]:
    """Following topic -> the topic it follows (full names), for the handlers of one
    process that say so (``follows``: feedback after the results it joins to) and
    whose leading topic the same process reads; both runtimes hold by it."""
    handlers = list(handlers)
    read = {handler.source for handler in handlers}
    return {
        TOPICS[handler.source].name(prefix): TOPICS[lead].name(prefix)
        for handler in handlers
        if (lead := getattr(handler, "follows", None)) is not None and lead in read
    }
