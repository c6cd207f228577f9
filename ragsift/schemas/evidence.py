"""EvidenceEvent: the audit trail, as CloudEvents 1.0 (topic ``ragsift.audit.v1``).

The envelope follows the CloudEvents 1.0 JSON format: required attributes
``specversion``, ``id``, ``source``, ``type``; optional ``subject``, ``time``,
``datacontenttype``, ``dataschema``; extension ``traceparent`` (the W3C
distributed-tracing extension). ``id`` is derived from the triggering event, so
a replay produces the same id and the audit sink drops it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragsift.schemas.base import Number, TenantId, Timestamp, derive_query_id, utcnow

__all__ = ["EVIDENCE_DATASCHEMA", "EvidenceData", "EvidenceEvent", "EvidenceType"]

EVIDENCE_DATASCHEMA = "urn:ragsift:schema:evidence:1"


class EvidenceType(StrEnum):
    """The kinds of audit evidence ragsift records."""

    ADVISORY_LOW_CONFIDENCE = "RAG_ADVISORY_LOW_CONFIDENCE"
    NO_RELEVANT_CONTEXT = "RAG_NO_RELEVANT_CONTEXT"
    REFUSAL = "RAG_REFUSAL"
    RETRIEVAL_FAILED = "RAG_RETRIEVAL_FAILED"
    ADVISORY_USED_BELOW_THRESHOLD = "RAG_ADVISORY_USED_BELOW_THRESHOLD"
    RESPONSE_INVALIDATED = "RAG_RESPONSE_INVALIDATED"
    #: The scope's top-hit scores drifted from its calibration's reference (issue 14).
    CALIBRATION_SHIFT = "RAG_CALIBRATION_SHIFT"
    #: A weak or split retrieval was retried once (B10); details say which path won.
    CORRECTIVE_RETRY = "RAG_CORRECTIVE_RETRY"
    #: The kept sources disagree on what the query asks (D7); details name them.
    SOURCES_DISAGREE = "RAG_SOURCES_DISAGREE"


class EvidenceData(BaseModel):
    """The payload of an evidence event (C4: confidence, threshold, summary)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: str = "1"
    query_id: str
    tenant_id: TenantId
    summary: str
    confidence: Number | None = Field(default=None, ge=0.0, le=1.0)
    threshold: Number | None = None
    status: str | None = None
    level: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class EvidenceEvent(BaseModel):
    """A CloudEvents 1.0 envelope around :class:`EvidenceData`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    specversion: Literal["1.0"] = "1.0"
    id: str
    source: str = Field(min_length=1, description="URI-reference of the emitting worker.")
    type: EvidenceType
    subject: str | None = None
    time: Timestamp = Field(default_factory=utcnow)
    datacontenttype: Literal["application/json"] = "application/json"
    dataschema: str = EVIDENCE_DATASCHEMA
    traceparent: str | None = None
    data: EvidenceData

    @classmethod
    def for_query(
        cls,
        kind: EvidenceType,
        data: EvidenceData,
        *,
        source: str,
        traceparent: str | None = None,
    ) -> EvidenceEvent:
        """Evidence about one query; its id derives from (tenant, query id, kind, source)."""
        return cls(
            id=derive_query_id(data.tenant_id, data.query_id, f"evidence:{kind.value}:{source}"),
            source=source,
            type=kind,
            subject=data.query_id,
            traceparent=traceparent,
            data=data,
        )
