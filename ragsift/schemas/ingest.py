"""Inbound events besides queries: documents (live ingestion) and feedback."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ragsift.schemas.base import (
    MAX_TEXT_CHARS,
    CollectionName,
    EventId,
    EventModel,
    Number,
    TenantId,
    Timestamp,
    derive_query_id,
    utcnow,
)
from ragsift.schemas.payload import metadata_problem

__all__ = ["DocumentEvent", "FeedbackEvent", "SourceType", "feedback_event_id"]

#: C1's source types (their weights live in the confidence engine), plus the
#: two a generic corpus needs.
SourceType = Literal[
    "government", "regulatory", "market_data", "third_party", "internal", "unknown"
]


class DocumentEvent(EventModel):
    """Add, replace or delete one document of a tenant (topic ``ragsift.documents.v1``)."""

    UNREPEATED_KEYS: ClassVar[tuple[str, ...]] = ("tenant_id",)

    event_id: EventId
    tenant_id: TenantId
    collection: CollectionName = "default"
    doc_id: EventId
    op: Literal["upsert", "delete"] = "upsert"
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    title: str | None = Field(default=None, max_length=500)
    source: str | None = Field(default=None, max_length=2_000)
    source_type: SourceType = "unknown"
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: Timestamp = Field(default_factory=utcnow)

    @field_validator("metadata")
    @classmethod
    def _storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Metadata the index cannot store is refused before the old chunks are deleted."""
        problem = metadata_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _upsert_has_text(self) -> DocumentEvent:
        if self.op == "upsert" and not (self.text and self.text.strip()):
            raise ValueError("text is required (non-empty) when op is 'upsert'")
        return self


class FeedbackEvent(EventModel):
    """Whether a result's context really held the answer (topic ``ragsift.feedback.v1``).

    The calibration updater uses these labels to re-fit per-tenant calibration (X2).
    """

    UNREPEATED_KEYS: ClassVar[tuple[str, ...]] = ("tenant_id",)

    event_id: EventId
    query_id: EventId
    tenant_id: TenantId
    relevant: bool = Field(
        strict=True, description="True when the kept context contained the answer."
    )
    sampled: bool = Field(
        strict=True,
        default=True,
        description=(
            "True when the result was picked for labelling without looking at how it"
            " turned out (every result, or a random share of them): such labels re-fit"
            " the calibration. False when a user chose to give it (a thumbs-down, a"
            " 'report a problem' button): those are chosen by their outcome, so they"
            " are kept and counted but never re-fit (docs/feedback.md)."
        ),
    )
    confidence: Number | None = Field(default=None, ge=0.0, le=1.0)
    signals: dict[str, Number] = Field(default_factory=dict)
    embedder_id: str | None = None
    comment: str | None = Field(default=None, max_length=2_000)
    created_at: Timestamp = Field(default_factory=utcnow)

    @classmethod
    def label(
        cls,
        tenant_id: str,
        query_id: str,
        *,
        relevant: bool,
        sampled: bool = True,
        comment: str | None = None,
    ) -> FeedbackEvent:
        """A client's label on a result, its id derived (:func:`feedback_event_id`).

        Raises:
            ValueError: a bad field (a ``ValidationError``), or an empty tenant.
        """
        return cls(
            event_id=feedback_event_id(tenant_id, query_id, relevant=relevant, sampled=sampled),
            query_id=query_id,
            tenant_id=tenant_id,
            relevant=relevant,
            sampled=sampled,
            comment=comment,
        )


def feedback_event_id(tenant_id: str, query_id: str, *, relevant: bool, sampled: bool) -> str:
    """The id of a label a client sends (``POST /v1/feedback``, a framework source):
    derived from tenant, query and the label, so a retry is the same event (ADR 004)
    and a changed label a new one.

    Raises:
        ValueError: an empty tenant, or one holding ``/``.
    """
    label = f"feedback:{'relevant' if relevant else 'not-relevant'}:{sampled}"
    return derive_query_id(tenant_id, query_id, label)
