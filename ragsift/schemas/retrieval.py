"""RetrievalResult: what a retrieval worker publishes (topic ``ragsift.retrievals.v1``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragsift.schemas.base import (
    CollectionName,
    Count,
    CountOrNone,
    EventId,
    EventModel,
    Flag,
    Number,
    Reading,
    TenantId,
    Timestamp,
    utcnow,
)
from ragsift.schemas.query import MAX_COLLECTIONS, SearchMode, Selection

__all__ = [
    "Advice",
    "AdvisoryFlag",
    "CacheInfo",
    "Citation",
    "ConfidenceBreakdown",
    "Contradiction",
    "CorrectiveInfo",
    "CorrectiveStrategy",
    "CorrectiveTrigger",
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
#: Seed B's review levels (B3).
Level = Literal["HIGH", "MEDIUM", "LOW", "VERY_LOW"]
#: Seed C's advisory flags (C2).
AdvisoryFlag = Literal[
    "HIGH_CONFIDENCE", "MEDIUM_CONFIDENCE", "LOW_CONFIDENCE", "VERY_LOW_CONFIDENCE"
]
StopReason = Literal["threshold", "max_k", "no_results"]
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
    rank: Count = Field(ge=1)
    score: Number = Field(description="Normalized score in [0, 1] the filters compared.")
    raw_scores: dict[str, Reading] = Field(
        default_factory=dict, description="Raw per-channel scores: dense, bm25, rrf, rerank."
    )
    source_type: str = "unknown"
    citation: Citation
    collection: str | None = Field(
        default=None, description="D3: the collection the hit came from (multi-collection)."
    )


class DroppedHit(_Part):
    """A hit the filters removed, and why (A13)."""

    chunk_id: str
    rule: str = Field(description="Which rule dropped it, e.g. below_threshold.")
    value: Number = Field(description="The hit's normalized score.")
    threshold: Number | None = Field(default=None, description="Score bar (threshold rules).")
    limit: CountOrNone = Field(default=None, description="Count limit (cap rules).")


class Advice(_Part):
    """A recommendation for a weak retrieval (B5)."""

    code: str
    message: str


class ConfidenceBreakdown(_Part):
    """How the confidence was reached (B4): the signals and the scorer."""

    scorer: str
    calibration_version: str | None = None
    signals: dict[str, Reading] = Field(default_factory=dict)


class Contradiction(_Part):
    """Kept sources that disagree on what the query asks (D7), e.g. 30 vs 14 days."""

    kind: Literal["value", "negation"] = Field(
        description="value: different durations, amounts or percentages; negation: one"
        " source says what the other denies."
    )
    chunk_ids: list[str] = Field(min_length=2, description="The conflicting chunks.")
    doc_ids: list[str] = Field(min_length=2, description="Their documents, in the same order.")
    statements: list[str] = Field(description="The conflicting sentences, in the same order.")
    values: list[str] = Field(
        default_factory=list, description="The differing values as written (kind value)."
    )


#: B10 retry strategies: keyword-only, query expanded from the top hits' terms, larger k.
CorrectiveStrategy = Literal["expand", "wider", "keyword"]
#: Why a retry ran: the first try's confidence was low, or its BM25 and dense channels split.
CorrectiveTrigger = Literal["low_confidence", "disagreement"]


class CorrectiveInfo(_Part):
    """B10: the one corrective retry a result had, and which path was kept."""

    trigger: CorrectiveTrigger
    tried: list[CorrectiveStrategy] = Field(
        max_length=1, description="The retry strategies run (at most one retry)."
    )
    won: Literal["first", "expand", "wider", "keyword"] = Field(
        description="The path whose hits and confidence the result carries."
    )
    first_confidence: Number = Field(ge=0.0, le=1.0)
    retry_confidence: Number | None = Field(
        default=None, ge=0.0, le=1.0, description="None when the retry failed."
    )
    reason: str = Field(description="Why the winner won, e.g. retry_not_answerable.")
    expansion_terms: list[str] = Field(
        default_factory=list, description="Terms the expand retry added to the query."
    )


class CacheInfo(_Part):
    """Whether the result came from the cache, and for how long it is kept."""

    hit: Flag = False
    ttl_seconds: CountOrNone = None
    backend: str | None = None


class ErrorInfo(_Part):
    """Why a result has outcome ``error``."""

    stage: str
    error_type: str
    message: str
    attempts: Count = 1


class RetrievalResult(EventModel):
    """The scored, filtered context for one query; never silently empty (see ``status``)."""

    result_id: str = Field(
        description="derive_query_id(tenant_id, query_id, 'retrieval'): stable on replay."
    )
    query_id: EventId
    tenant_id: TenantId
    collection: CollectionName
    collections: list[CollectionName] = Field(
        default_factory=list,
        max_length=MAX_COLLECTIONS + 1,
        description="D3: every collection searched, when several: ``collection`` first.",
    )
    query: str
    outcome: Outcome = "ok"
    status: Status
    level: Level
    confidence: Number = Field(ge=0.0, le=1.0)
    answerable: Flag = Field(description="D1: enough relevant documents to answer from.")
    answerability_reason: str | None = Field(
        default=None, description="answerable, too_few_documents or low_confidence."
    )
    should_flag_for_review: Flag = False
    review_action: str | None = Field(default=None, description="B3 action for the level.")
    advisory_flag: AdvisoryFlag
    advisory_only: Flag = Field(description="C3: confidence under the advisory threshold.")
    disclaimer: str | None = None
    recommendations: list[Advice] = Field(default_factory=list)
    breakdown: ConfidenceBreakdown
    hits: list[RetrievedChunk] = Field(default_factory=list)
    dropped: list[DroppedHit] = Field(default_factory=list)
    filtered_count: Count = Field(ge=0)
    total_found: Count = Field(ge=0)
    match_count: Count = Field(ge=0, description="Hits kept (A5).")
    threshold: Number = Field(description="Score bar applied to hits (relaxed if relaxed).")
    relaxed: Flag = Field(default=False, description="A2: threshold relaxed to reach min results.")
    mode: SearchMode = "hybrid"
    selection: Selection = "threshold"
    stop_reason: StopReason
    chunks_retrieved: Count = Field(ge=0)
    embedder_id: str
    cache: CacheInfo = Field(default_factory=CacheInfo)
    timings_ms: dict[str, Reading] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    calibration_shift: Flag = Field(
        default=False,
        description=(
            "The tenant's recent top-hit scores drifted from the calibration's reference"
            " (PSI above the threshold): the confidence may no longer mean what it says."
        ),
    )
    answer_hint: str | None = Field(
        default=None, description="Greeting reply or index scope description (D7)."
    )
    contradiction: Contradiction | None = Field(
        default=None, description="D7: kept sources that disagree; None when they do not."
    )
    corrective: CorrectiveInfo | None = Field(
        default=None, description="B10: the corrective retry, when one ran."
    )
    traceparent: str | None = None
    timestamp: Timestamp = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _collection_leads_collections(self) -> RetrievalResult:
        """A result lists what its query searched, its collection first: the decision
        worker's threshold is the strictest of them, so a result of ``regulated`` that
        listed only ``default`` would be decided at ``default``'s bar."""
        if self.collections and self.collections[0] != self.collection:
            raise ValueError(
                f"collections must start with collection {self.collection!r}"
                f" (the collections searched, collection first), got {self.collections[0]!r}"
            )
        return self

    @property
    def citations(self) -> list[Citation]:
        """Provenance of the kept hits, in rank order."""
        return [h.citation for h in self.hits]
