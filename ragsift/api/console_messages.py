"""The console's view of pipeline events: each result, report, decision, evidence event
and retrieval dead letter as one small JSON message (:mod:`ragsift.api.console` fans
them out to the pages)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ragsift.schemas import DeadLetter, Decision, EvidenceEvent, Report, RetrievalResult

__all__ = ["HIT_TEXT_CHARS", "Message", "message_of"]

#: text of a hit shown on the page: a glance, the full text is in the API's result
HIT_TEXT_CHARS = 400

#: one console message: {"kind": ..., "tenant_id": ..., "query_id": ..., "data": {...}}
Message = dict[str, Any]


def message_of(event: BaseModel) -> Message | None:
    """The console's view of one event, or None for events it does not show."""
    if isinstance(event, RetrievalResult):
        return _wrap("result", event.tenant_id, event.query_id, _result_view(event))
    if isinstance(event, Report):
        data = event.model_dump(
            mode="json",
            include={
                "answer",
                "is_refusal",
                "advisory_only",
                "disclaimer",
                "badge",
                "banner",
                "level",
                "confidence",
                "generated_by",
                "validation_issues",
            },
        )
        data["citations"] = [c.source for c in event.citations]
        return _wrap("report", event.tenant_id, event.query_id, data)
    if isinstance(event, Decision):
        data = event.model_dump(
            mode="json", include={"use_context", "reason", "threshold", "flags", "review_queue"}
        )
        return _wrap("decision", event.tenant_id, event.query_id, data)
    if isinstance(event, EvidenceEvent):
        data = {
            "type": event.type.value,
            "summary": event.data.summary,
            "time": event.time.isoformat(),
            "confidence": event.data.confidence,
        }
        return _wrap("evidence", event.data.tenant_id, event.data.query_id, data)
    if isinstance(event, DeadLetter) and event.worker == "retrieval":
        # a letter of an event that did not decode names no tenant: only a page that
        # sees every tenant gets it; one that did goes to its tenant's pages too
        data = {"stage": event.stage, "error": event.error[:500]}
        return _wrap("rejected", event.tenant_id, event.query_id, data)
    return None


def _wrap(kind: str, tenant: str | None, query_id: str | None, data: Any) -> Message:
    return {"kind": kind, "tenant_id": tenant, "query_id": query_id, "data": data}


def _result_view(r: RetrievalResult) -> dict[str, Any]:
    return {
        "query": r.query,
        "collection": r.collection,
        "outcome": r.outcome,
        "status": r.status,
        "level": r.level,
        "confidence": r.confidence,
        "answerable": r.answerable,
        "advisory_only": r.advisory_only,
        "advisory_flag": r.advisory_flag,
        "disclaimer": r.disclaimer,
        "answer_hint": r.answer_hint,
        "cache_hit": r.cache.hit,
        "scorer": r.breakdown.scorer,
        "threshold": r.threshold,
        "total_found": r.total_found,
        "hits": [
            {
                "rank": h.rank,
                "chunk_id": h.chunk_id,
                "score": h.score,
                "source": h.citation.source,
                "text": h.text[:HIT_TEXT_CHARS],
            }
            for h in r.hits
        ],
        "dropped": [d.model_dump(mode="json") for d in r.dropped],
        "recommendations": [a.model_dump(mode="json") for a in r.recommendations],
        "error": r.error.message if r.error else None,
    }
