"""RetrievalResult: what a retrieval worker publishes (topic ``ragsift.retrievals.v1``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ragsift.schemas.base import EventId, EventModel, TenantId, utcnow
from ragsift.schemas.query import RetrievalStrategy, SearchMode

__all__ = [
    "CacheInfo",
    "Citation",
    "ConfidenceBreakdown",
    "DroppedHit",
    "ErrorInfo",
    "Level",
    "Outcome",
    "RetrievalResult",
    "RetrievedChunk",
    "Status",
    "StopReason",
]

#: Seed A's statuses (A4).
Status = Literal["high_confidence", "medium_confidence", "low_confidence", "no_relevant_context"]
#: Seed B's levels (B3).
Level = Literal["high", "medium", "low", "very_low"]
StopReason = Literal["threshold", "max_k", "no_results", "fixed_k"]
#: ok: retrieved and scored; error: retrieval failed (see ``error``);
#: greeting: retrieval bypassed (D7); scope: answered from index metadata (D7).
Outcome = Literal["ok", "error", "greeting", "scope"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Citation(_Part):
    """Where a chunk came from (A5 provenance)."""

    chunk_id: str
    doc_id: str
    source: str = Field(description="File path, URL or system the document came from.")
    title: str | None = None


class RetrievedChunk(_Part):
    """One kept hit with its per-channel scores."""

    chunk_id: str
    doc_id: str
    text: str
    rank: int = Field(ge=1)
    score: float = Field(description="Normalized score in [0, 1] the filters compared.")
    raw_scores: dict[str, float] = Field(
        default_factory=dict, description="Raw per-channel scores: dense, bm25, rrf, rerank."
    )
    source_type: str = "unknown"
    citation: Citation


class DroppedHit(_Part):
    """A hit the filters removed, and why (A13)."""

    chunk_id: str
    rule: str = Field(description="Which rule dropped it, e.g. similarity_threshold.")
    threshold: float
    value: float


class ConfidenceBreakdown(_Part):
    """How the confidence was reached (B4): the signals and the scorer."""

    scorer: str
    calibration_version: str | None = None
    signals: dict[str, float] = Field(default_factory=dict)


class CacheInfo(_Part):
    """Whether the result came from the cache, and for how long it is kept."""

    hit: bool = False
    ttl_seconds: int | None = None
    backend: str | None = None


class ErrorInfo(_Part):
    """Why a result has outcome ``error``."""

    stage: str
    error_type: str
    message: str
    attempts: int = 1


class RetrievalResult(EventModel):
    """The scored, filtered context for one query; never silently empty (see ``status``)."""

    result_id: str = Field(description="derive_id(query_id, 'retrieval'): stable on replay.")
    query_id: EventId
    tenant_id: TenantId
    collection: str
    query: str
    outcome: Outcome = "ok"
    status: Status
    level: Level
    confidence: float = Field(ge=0.0, le=1.0)
    answerable: bool = Field(description="D1: enough relevant documents to answer from.")
    should_flag_for_review: bool = False
    advisory_only: bool = Field(description="C3: confidence under the advisory threshold.")
    flags: list[str] = Field(default_factory=list)
    disclaimer: str | None = None
    recommendations: list[str] = Field(default_factory=list)
    breakdown: ConfidenceBreakdown
    hits: list[RetrievedChunk] = Field(default_factory=list)
    dropped: list[DroppedHit] = Field(default_factory=list)
    filtered_count: int = Field(ge=0)
    total_found: int = Field(ge=0)
    match_count: int = Field(ge=0, description="Hits that passed the threshold before relaxing.")
    mode: SearchMode = "hybrid"
    strategy: RetrievalStrategy = "fixed"
    stop_reason: StopReason
    chunks_retrieved: int = Field(ge=0)
    embedder_id: str
    cache: CacheInfo = Field(default_factory=CacheInfo)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    answer_hint: str | None = Field(
        default=None, description="Greeting reply or index scope description (D7)."
    )
    traceparent: str | None = None
    timestamp: datetime = Field(default_factory=utcnow)

    @property
    def citations(self) -> list[Citation]:
        """Provenance of the kept hits, in rank order."""
        return [h.citation for h in self.hits]
