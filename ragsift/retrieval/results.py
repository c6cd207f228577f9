"""Build RetrievalResults and their evidence events from an engine assessment.

Kept pure (no I/O) so the cached path and the fresh path produce evidence the
same way: evidence ids derive from the query id, so a replay emits the same ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsift.confidence import Assessment, CalibrationArtifact
from ragsift.confidence.artifact import UNCERTIFIED_ADVICE_CODE
from ragsift.retrieval.index import SearchHit
from ragsift.schemas import (
    Advice,
    CacheInfo,
    ConfidenceBreakdown,
    ErrorInfo,
    EvidenceData,
    EvidenceEvent,
    EvidenceType,
    QueryEvent,
    RetrievalResult,
    SearchMode,
    Selection,
    derive_query_id,
)

__all__ = [
    "bypass_result",
    "collections_of",
    "error_result",
    "evidence_about",
    "evidence_for",
    "result_id",
    "scored_result",
    "searched_dense_only",
    "searched_keyword",
    "searched_mode",
    "uncertified_advice",
]

RESULT_KIND = "retrieval"


def result_id(query: QueryEvent) -> str:
    """The id of ``query``'s result: stable on replay, distinct per tenant (ADR 004)."""
    return derive_query_id(query.tenant_id, query.query_id, RESULT_KIND)


def uncertified_advice(
    assessment: Assessment, calibration: CalibrationArtifact | None
) -> Advice | None:
    """The advice a result carries when its scope's answer threshold is known not to
    hold (the collection's probes certified none, ADR 015); None otherwise."""
    if (
        calibration is None
        or calibration.provenance is None
        or calibration.provenance.uncertified is None
        or assessment.calibration_version != calibration.version
    ):
        return None
    return Advice(
        code=UNCERTIFIED_ADVICE_CODE,
        message=(
            "No answer threshold is certified on this collection"
            f" ({calibration.provenance.uncertified}): the confidence may overstate"
            " how likely these passages are to hold the answer."
        ),
    )


def _raw_scores(hit: SearchHit) -> dict[str, float]:
    scores = {
        "dense": hit.dense_score,
        "bm25": hit.sparse_score,
        "rrf": hit.fused_score,
        "rerank": hit.rerank_score,
    }
    return {k: float(v) for k, v in scores.items() if v is not None}


def scored_result(
    query: QueryEvent,
    hits: Sequence[SearchHit],
    assessment: Assessment,
    *,
    embedder_id: str,
    selection: Selection,
    timings_ms: dict[str, float],
) -> RetrievalResult:
    """A result with outcome ``ok`` from the hits and the engine's assessment.

    The whole result is one dict validated in one call: pydantic-core builds
    the nested chunks, citations and dropped hits in Rust, several times faster
    than a Python constructor call per nested model (``model_construct``
    included, which is pure Python).
    """
    a = assessment
    kept = [
        _chunk(hits[i], rank, score)
        for rank, (i, score) in enumerate(zip(a.kept_indices, a.kept_scores, strict=True), 1)
    ]
    dropped = [
        {
            "chunk_id": hits[d.hit_index].chunk_id,
            "rule": d.rule,
            "value": round(float(d.value), 6),
            "threshold": None if d.threshold is None else float(d.threshold),
            "limit": d.limit,
        }
        for d in a.dropped
    ]
    signals = {k: float(v) for k, v in a.signals.to_dict().items() if v is not None}
    return RetrievalResult.model_validate(
        {
            "result_id": result_id(query),
            "query_id": query.query_id,
            "tenant_id": query.tenant_id,
            "collection": query.collection,
            "collections": collections_of(query),
            "query": query.query,
            "status": a.status,
            "level": a.level,
            "confidence": round(float(a.confidence), 6),
            "answerable": a.answerability.is_answerable,
            "answerability_reason": a.answerability.reason,
            "should_flag_for_review": a.should_flag_for_review,
            "review_action": a.review_action,
            "advisory_flag": a.advisory_flag,
            "advisory_only": a.advisory_only,
            "disclaimer": a.disclaimer.text,
            "recommendations": [{"code": r.code, "message": r.message} for r in a.recommendations],
            "breakdown": {
                "scorer": a.scorer,
                "calibration_version": a.calibration_version,
                "signals": signals,
            },
            "hits": kept,
            "dropped": dropped,
            "filtered_count": a.filtered_count,
            "total_found": a.total_found,
            "match_count": a.match_count,
            "threshold": float(a.threshold),
            "relaxed": a.relaxed,
            "mode": query.mode,
            "selection": selection,
            "stop_reason": a.stop_reason,
            "chunks_retrieved": a.chunks_retrieved,
            "embedder_id": embedder_id,
            "timings_ms": timings_ms,
            "traceparent": query.traceparent,
        }
    )


def ordered_by_reranker(result: RetrievalResult, scores: Sequence[float]) -> RetrievalResult:
    """``result`` with its kept hits in the reranker's order (ADR 048): ``scores`` holds
    one score per hit, best first after sorting (ties keep the scored order); each hit
    carries its score as ``raw_scores["rerank"]`` and its new rank. Nothing else moves:
    the confidence and the kept set are the ones the calibrated model gave the hits."""
    if len(scores) != len(result.hits):
        raise ValueError(f"{len(scores)} reranker scores for {len(result.hits)} hits")
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    hits = [
        result.hits[i].model_copy(
            update={
                "rank": rank,
                "raw_scores": {**result.hits[i].raw_scores, "rerank": float(scores[i])},
            }
        )
        for rank, i in enumerate(order, 1)
    ]
    return result.model_copy(update={"hits": hits})


def searched_mode(result: RetrievalResult) -> SearchMode:
    """The mode ``result``'s hits were searched in: its query's, or ``keyword`` where a
    corrective keyword retry won. It says which model scored them (ADR 028, 029)."""
    won = result.corrective.won if result.corrective is not None else "first"
    return "keyword" if won == "keyword" else result.mode


def searched_dense_only(result: RetrievalResult) -> bool:
    """Whether ``result``'s hits came from a dense-only search (no BM25 channel), so
    that its calibration imputed their agreement as fit for those (ADR 028)."""
    return searched_mode(result) == "dense"


def searched_keyword(result: RetrievalResult) -> bool:
    """Whether ``result``'s hits came from a keyword-only search (its own or a corrective
    retry's), so that it was scored with the calibration's keyword model (ADR 029)."""
    return searched_mode(result) == "keyword"


def collections_of(query: QueryEvent) -> list[str]:
    """What a result lists as searched: every collection of a D3 query, else nothing."""
    return query.searched if query.collections else []


def _chunk(hit: SearchHit, rank: int, score: float) -> dict[str, object]:
    return {
        "chunk_id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "text": hit.text,
        "rank": rank,
        "score": round(float(score), 6),
        "raw_scores": _raw_scores(hit),
        "source_type": hit.source_type,
        "citation": {
            "chunk_id": hit.chunk_id,
            "doc_id": hit.doc_id,
            "source": hit.source,
            "title": _title(hit),
        },
        "collection": hit.collection,
    }


def _title(hit: SearchHit) -> str | None:
    title = hit.payload.get("title")
    return title if isinstance(title, str) else None


def _empty_result(query: QueryEvent, embedder_id: str, **fields: object) -> RetrievalResult:
    base: dict[str, object] = {
        "result_id": result_id(query),
        "query_id": query.query_id,
        "tenant_id": query.tenant_id,
        "collection": query.collection,
        "collections": collections_of(query),
        "query": query.query,
        "status": "no_relevant_context",
        "level": "VERY_LOW",
        "confidence": 0.0,
        "answerable": False,
        "advisory_flag": "VERY_LOW_CONFIDENCE",
        "advisory_only": True,
        "breakdown": ConfidenceBreakdown(scorer="none"),
        "filtered_count": 0,
        "total_found": 0,
        "match_count": 0,
        "threshold": 0.0,
        "mode": query.mode,
        "stop_reason": "no_results",
        "chunks_retrieved": 0,
        "embedder_id": embedder_id,
        "traceparent": query.traceparent,
    }
    base.update(fields)
    return RetrievalResult.model_validate(base)


def bypass_result(
    query: QueryEvent, *, kind: str, answer: str, embedder_id: str
) -> RetrievalResult:
    """D7: a greeting or scope question, answered without retrieval."""
    return _empty_result(
        query,
        embedder_id,
        outcome=kind,
        answer_hint=answer,
        answerable=True,
        answerability_reason=kind,
        advisory_only=False,
        disclaimer=None,
    )


def error_result(
    query: QueryEvent,
    *,
    stage: str,
    error: Exception,
    attempts: int,
    embedder_id: str,
    disclaimer: str,
) -> RetrievalResult:
    """Retrieval failed after its retries: an explicit error result, never silence."""
    return _empty_result(
        query,
        embedder_id,
        outcome="error",
        error=ErrorInfo(
            stage=stage,
            error_type=type(error).__name__,
            message=str(error)[:2000],
            attempts=attempts,
        ),
        disclaimer=disclaimer,
        cache=CacheInfo(hit=False),
    )


def evidence_about(
    result: RetrievalResult,
    kind: EvidenceType,
    summary: str,
    *,
    threshold: float,
    source: str,
    **details: object,
) -> EvidenceEvent:
    """One evidence event about a result, its id derived from (query, kind, source)."""
    data = EvidenceData(
        query_id=result.query_id,
        tenant_id=result.tenant_id,
        summary=summary,
        confidence=result.confidence,
        threshold=threshold,
        status=result.status,
        level=result.level,
        details={"collection": result.collection, "result_id": result.result_id, **details},
    )
    return EvidenceEvent.for_query(kind, data, source=source, traceparent=result.traceparent)


def evidence_for(
    result: RetrievalResult, *, advisory_threshold: float, source: str
) -> list[EvidenceEvent]:
    """The audit evidence a result calls for (C4, K4)."""
    out: list[EvidenceEvent] = []

    def add(kind: EvidenceType, summary: str, **details: object) -> None:
        out.append(
            evidence_about(
                result, kind, summary, threshold=advisory_threshold, source=source, **details
            )
        )

    if result.outcome == "error":
        err = result.error
        add(
            EvidenceType.RETRIEVAL_FAILED,
            f"retrieval failed at {err.stage if err else 'unknown'}: "
            f"{err.message if err else 'no detail'}",
            attempts=err.attempts if err else 0,
        )
        return out
    if result.outcome != "ok":
        return out
    fix = result.corrective
    if fix is not None and not result.cache.hit:  # a cache hit ran no retry
        add(
            EvidenceType.CORRECTIVE_RETRY,
            f"{fix.trigger} retried once by {', '.join(fix.tried)}; kept {fix.won}"
            f" ({fix.reason}; confidence {fix.first_confidence:.2f} first,"
            f" {'failed' if fix.retry_confidence is None else f'{fix.retry_confidence:.2f}'}"
            " retry)",
            **fix.model_dump(mode="json"),
        )
    if result.contradiction is not None:
        c = result.contradiction
        said = f": {' vs '.join(c.values)}" if c.values else ""
        add(
            EvidenceType.SOURCES_DISAGREE,
            f"the kept sources {' and '.join(c.doc_ids)} disagree ({c.kind}{said});"
            " flagged for review",
            disagreement=c.model_dump(mode="json"),
        )
    if result.status == "no_relevant_context":
        add(
            EvidenceType.NO_RELEVANT_CONTEXT,
            f"no relevant context among {result.total_found} hits"
            f" (confidence {result.confidence:.2f})",
            total_found=result.total_found,
        )
    if result.confidence < advisory_threshold:
        add(
            EvidenceType.ADVISORY_LOW_CONFIDENCE,
            f"confidence {result.confidence:.2f} is below the advisory threshold"
            f" {advisory_threshold:.2f}; {result.match_count} of {result.total_found} hits kept;"
            " the result is advisory only",
            kept=result.match_count,
            flag=result.advisory_flag,
        )
    elif result.outcome == "ok" and not result.answerable:
        # ADR 049: refused over the advisory threshold (too few documents, or a bar
        # raised above it): advisory only, and the trail says so.
        add(
            EvidenceType.ADVISORY_LOW_CONFIDENCE,
            f"confidence {result.confidence:.2f} is over the advisory threshold"
            f" {advisory_threshold:.2f} but the query was refused"
            f" ({result.answerability_reason}); the result is advisory only",
            kept=result.match_count,
            flag=result.advisory_flag,
            refused=result.answerability_reason,
        )
    return out
