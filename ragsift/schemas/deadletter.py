"""DeadLetter: an event a worker could not process (topic ``ragsift.deadletter.v1``)."""

from __future__ import annotations

import base64
import hashlib

from pydantic import Field

from ragsift.schemas.base import EventModel, Timestamp, derive_id, utcnow

__all__ = ["DEFAULT_MAX_ORIGINAL_BYTES", "MINIMAL_ERROR_CHARS", "DeadLetter"]

#: Most bytes of the original value (and of its key) a dead letter carries. Base64
#: makes 64 KiB about 87 KB, far below Kafka's default 1 MB message limit, so a
#: letter always fits whatever the poison's size (RAGSIFT_LIMITS_DEADLETTER_MAX_ORIGINAL_BYTES).
DEFAULT_MAX_ORIGINAL_BYTES = 64 * 1024
#: Error text kept by a minimal letter, the last resort when a full one cannot be sent.
MINIMAL_ERROR_CHARS = 500
# Error text kept by a full letter: enough for every field's message of a large event.
_MAX_ERROR_CHARS = 4_000
# Query id (and tenant id) kept by a letter: a valid one has at most 128 characters
# (ID_PATTERN); one read from an event that failed to decode can be megabytes, and is cut
# like the error so that the letter, and its minimal form, still fit the broker's limit.
_MAX_QUERY_ID_CHARS = 256


def _utf8(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (JSON's ``"\\ud800"`` decodes to
    one) as its escape. The query id of an event that failed to decode is the
    producer's, and a letter holding one could not be serialized, whole or minimal:
    every attempt failed and the letter was dropped."""
    # str.encode, not text.encode: a value that is no text (a buggy handler's) raises
    # the TypeError the router counts as a letter it could not build.
    return str.encode(text, "utf-8", "backslashreplace").decode("utf-8")


class DeadLetter(EventModel):
    """The failed input (byte for byte up to a limit), where it came from and why it failed."""

    dead_letter_id: str
    stage: str
    error_type: str
    error: str
    worker: str
    topic: str
    partition: int | None = None
    offset: int | None = None
    key_b64: str | None = None
    original_b64: str = Field(
        description="The original message value, base64; its first bytes if truncated."
    )
    query_id: str | None = None
    tenant_id: str | None = Field(
        default=None,
        description="The tenant of the failed event, when it decoded: whose event it was.",
    )
    failed_at: Timestamp = Field(default_factory=utcnow)
    original_length: int | None = Field(
        default=None, ge=0, description="Length of the whole original value in bytes."
    )
    original_sha256: str | None = Field(
        default=None, description="SHA-256 of the whole original value, hex."
    )
    original_truncated: bool = Field(
        default=False,
        description="True when original_b64 (or key_b64) holds less than the whole value.",
    )

    @classmethod
    def build(
        cls,
        *,
        original: bytes,
        stage: str,
        error_type: str,
        error: str,
        worker: str,
        topic: str,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        query_id: str | None = None,
        tenant_id: str | None = None,
        max_original_bytes: int = DEFAULT_MAX_ORIGINAL_BYTES,
    ) -> DeadLetter:
        """A dead letter whose id is stable for the same (worker, topic, partition, offset,
        stage): a replay of one worker's letter is the same letter, and two workers (two
        consumer groups) that both refuse a record write two letters, which a consumer
        keeping one letter per id would otherwise have merged.

        The original and the key are cut to ``max_original_bytes`` so that the letter
        can always be published; the original's full length and SHA-256 still
        identify it.
        """
        if max_original_bytes < 0:
            raise ValueError(f"max_original_bytes must be >= 0, got {max_original_bytes}")
        origin = f"{worker}:{topic}:{partition}:{offset}:{stage}"
        if offset is None:  # no position (embedded bus): fall back to the content
            origin += ":" + base64.b64encode(original[:256]).decode()
        kept_key = key[:max_original_bytes] if key is not None else None
        truncated = len(original) > max_original_bytes or (
            key is not None and len(key) > max_original_bytes
        )
        return cls(
            dead_letter_id=derive_id(origin, "deadletter"),
            stage=stage,
            error_type=error_type,
            error=_utf8(error[:_MAX_ERROR_CHARS]),
            worker=worker,
            topic=topic,
            partition=partition,
            offset=offset,
            key_b64=base64.b64encode(kept_key).decode() if kept_key is not None else None,
            original_b64=base64.b64encode(original[:max_original_bytes]).decode(),
            query_id=_utf8(query_id)[:_MAX_QUERY_ID_CHARS] if query_id is not None else None,
            tenant_id=_utf8(tenant_id)[:_MAX_QUERY_ID_CHARS] if tenant_id is not None else None,
            original_length=len(original),
            original_sha256=hashlib.sha256(original).hexdigest(),
            original_truncated=truncated,
        )

    def minimal(self) -> DeadLetter:
        """The same letter without the original or the key, and a short error.

        Sent when the full letter cannot be: the length and SHA-256 still say
        which message failed, and the topic, partition and offset where it is.
        """
        return self.model_copy(
            update={
                "original_b64": "",
                "key_b64": None,
                "error": self.error[:MINIMAL_ERROR_CHARS],
                "original_truncated": self.original_truncated or bool(self.original_b64),
            }
        )

    @property
    def original(self) -> bytes:
        """The original message value (its first bytes when ``original_truncated``)."""
        return base64.b64decode(self.original_b64)
