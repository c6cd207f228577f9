"""DeadLetter: an event a worker could not process (topic ``ragsift.deadletter.v1``)."""

from __future__ import annotations

import base64
from datetime import datetime

from pydantic import Field

from ragsift.schemas.base import EventModel, derive_id, utcnow

__all__ = ["DeadLetter"]


class DeadLetter(EventModel):
    """The failed input, byte for byte, with where it came from and why it failed."""

    dead_letter_id: str
    stage: str
    error_type: str
    error: str
    worker: str
    topic: str
    partition: int | None = None
    offset: int | None = None
    key_b64: str | None = None
    original_b64: str = Field(description="The original message value, base64.")
    query_id: str | None = None
    failed_at: datetime = Field(default_factory=utcnow)

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
    ) -> DeadLetter:
        """A dead letter whose id is stable for the same (topic, partition, offset, stage)."""
        origin = f"{topic}:{partition}:{offset}:{stage}"
        if offset is None:  # no position (embedded bus): fall back to the content
            origin += ":" + base64.b64encode(original[:256]).decode()
        return cls(
            dead_letter_id=derive_id(origin, "deadletter"),
            stage=stage,
            error_type=error_type,
            error=error[:4_000],
            worker=worker,
            topic=topic,
            partition=partition,
            offset=offset,
            key_b64=base64.b64encode(key).decode() if key is not None else None,
            original_b64=base64.b64encode(original).decode(),
            query_id=query_id,
        )

    @property
    def original(self) -> bytes:
        """The original message value."""
        return base64.b64decode(self.original_b64)
