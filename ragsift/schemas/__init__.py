"""Event contracts: pydantic v2 models, no I/O; JSON Schema export for other languages."""

from ragsift.schemas.base import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_VECTOR_DIM,
    TENANT_PATTERN,
    EventModel,
    derive_id,
    derive_query_id,
    tenant_scoped,
    utcnow,
)
from ragsift.schemas.deadletter import DeadLetter
from ragsift.schemas.downstream import Badge, Decision, Report, ReviewItem, ReviewQueue
from ragsift.schemas.evidence import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.schemas.ingest import DocumentEvent, FeedbackEvent, SourceType
from ragsift.schemas.query import QueryEvent, SearchMode, Selection
from ragsift.schemas.registry import ALL_SCHEMAS, export_json_schemas, json_schema_documents
from ragsift.schemas.retrieval import (
    Advice,
    AdvisoryFlag,
    CacheInfo,
    Citation,
    ConfidenceBreakdown,
    DroppedHit,
    ErrorInfo,
    Level,
    Outcome,
    RetrievalResult,
    RetrievedChunk,
    Status,
    StopReason,
)

__all__ = [
    "ALL_SCHEMAS",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_VECTOR_DIM",
    "TENANT_PATTERN",
    "Advice",
    "AdvisoryFlag",
    "Badge",
    "CacheInfo",
    "Citation",
    "ConfidenceBreakdown",
    "DeadLetter",
    "Decision",
    "DocumentEvent",
    "DroppedHit",
    "ErrorInfo",
    "EventModel",
    "EvidenceData",
    "EvidenceEvent",
    "EvidenceType",
    "FeedbackEvent",
    "Level",
    "Outcome",
    "QueryEvent",
    "Report",
    "RetrievalResult",
    "RetrievedChunk",
    "ReviewItem",
    "ReviewQueue",
    "SearchMode",
    "Selection",
    "SourceType",
    "Status",
    "StopReason",
    "derive_id",
    "derive_query_id",
    "export_json_schemas",
    "json_schema_documents",
    "tenant_scoped",
    "utcnow",
]
