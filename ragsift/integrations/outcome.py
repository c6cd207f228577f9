"""What a framework retriever makes of one ragsift result: its chunks, or a refusal.

Framework-neutral, so the LangChain and LlamaIndex retrievers refuse for the
same reasons and label chunks with the same metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragsift.schemas import RetrievalResult, RetrievedChunk

__all__ = ["REFUSAL_EVENT", "RetrievalOutcome", "chunk_metadata", "outcome_of"]

#: Name of the event both retrievers send when ragsift refuses (a LangChain custom
#: event; LlamaIndex's instrumentation event carries it as its class name's tag).
REFUSAL_EVENT = "ragsift_refusal"


@dataclass(frozen=True, slots=True)
class RetrievalOutcome:
    """One query's result as a retriever sees it.

    Attributes:
        result: ragsift's full result.
        refused: ragsift will not have this answered: the retriever returns no
            chunks, and the chain should answer with a refusal, not generate.
        reason: why it refused (``None`` when it did not).
        chunks: the kept hits to hand to the chain (empty when refused).
    """

    result: RetrievalResult
    refused: bool
    reason: str | None
    chunks: tuple[RetrievedChunk, ...]

    def event_data(self) -> dict[str, Any]:
        """The refusal event's payload: enough for a chain to say why, no document text."""
        r = self.result
        return {
            "query_id": r.query_id,
            "reason": self.reason,
            "status": r.status,
            "level": r.level,
            "confidence": r.confidence,
            "outcome": r.outcome,
        }


def _refusal_reason(result: RetrievalResult) -> str | None:
    """Why ragsift refuses ``result`` (as its strict-mode report builder would), or None."""
    if result.outcome == "error":
        stage = result.error.stage if result.error else "unknown"
        return f"retrieval failed at stage {stage}"
    if result.outcome in ("greeting", "scope"):
        return None  # answered without retrieval: see result.answer_hint
    if not result.hits:
        return f"no context retrieved (status {result.status})"
    if not result.answerable:
        return f"not answerable ({result.answerability_reason or 'unknown reason'})"
    if result.status == "no_relevant_context":
        return "no relevant context"
    return None


def outcome_of(result: RetrievalResult) -> RetrievalOutcome:
    """The chunks a retriever should return for ``result``, or its refusal."""
    reason = _refusal_reason(result)
    chunks = () if reason is not None else tuple(result.hits)
    return RetrievalOutcome(result, reason is not None, reason, chunks)


def chunk_metadata(result: RetrievalResult, chunk: RetrievedChunk) -> dict[str, Any]:
    """Metadata of one returned chunk: the result's confidence and level, the chunk's
    score and rank, its citation (document, chunk, collection, source), and the
    result's contradiction (D7: kept sources that disagree), or None."""
    contradiction = result.contradiction
    return {
        "source": chunk.citation.source,
        "confidence": result.confidence,
        "level": result.level,
        "status": result.status,
        "score": chunk.score,
        "rank": chunk.rank,
        "query_id": result.query_id,
        "citation": {
            "doc_id": chunk.citation.doc_id,
            "chunk_id": chunk.citation.chunk_id,
            "collection": result.collection,
            "source": chunk.citation.source,
            "title": chunk.citation.title,
        },
        "contradiction": contradiction.model_dump() if contradiction is not None else None,
    }
