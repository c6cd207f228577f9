"""What report and decision workers publish: Report, Decision, ReviewItem."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragsift.schemas.base import EventId, EventModel, TenantId, Timestamp, utcnow
from ragsift.schemas.retrieval import Citation, Contradiction, Level, Status

__all__ = ["Badge", "Decision", "Report", "ReviewItem", "ReviewQueue"]

#: C6 badge colours: green at or above the high flag, orange above the advisory
#: threshold, red below it.
Badge = Literal["green", "orange", "red"]
ReviewQueue = Literal["mandatory_review", "expert_review", "label_sample"]


class Report(EventModel):
    """A user-facing answer built from a retrieval result (topic ``ragsift.reports.v1``)."""

    report_id: str
    query_id: EventId
    tenant_id: TenantId
    collection: str
    answer: str
    is_refusal: bool
    advisory_only: bool
    disclaimer: str | None = None
    status: Status
    level: Level
    confidence: float = Field(ge=0.0, le=1.0)
    composite_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    badge: Badge
    banner: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    prompt_variant: str
    generated_by: Literal["extractive", "llm", "bypass"]
    validation_issues: list[str] = Field(default_factory=list)
    contradiction: Contradiction | None = Field(
        default=None, description="D7: the sources behind the answer disagree (the answer says so)."
    )
    created_at: Timestamp = Field(default_factory=utcnow)


class Decision(EventModel):
    """The engine's use/skip decision for retrieved context (topic ``ragsift.decisions.v1``)."""

    decision_id: str
    query_id: EventId
    tenant_id: TenantId
    collection: str
    use_context: bool = Field(description="C5: use retrieved context only at/above threshold.")
    reason: str
    confidence: float = Field(ge=0.0, le=1.0)
    threshold: float
    level: Level
    flags: list[str] = Field(default_factory=list)
    review_queue: ReviewQueue | None = None
    created_at: Timestamp = Field(default_factory=utcnow)


class ReviewItem(EventModel):
    """A result routed to human review (topic ``ragsift.review.v1``, B3)."""

    review_id: str
    query_id: EventId
    tenant_id: TenantId
    collection: str
    queue: ReviewQueue
    level: Level
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str
    created_at: Timestamp = Field(default_factory=utcnow)
