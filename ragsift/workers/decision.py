"""The decision handler: retrieval results in, decisions and review items out."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.confidence.decision import decide
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.results import evidence_about
from ragsift.schemas import (
    Decision,
    EvidenceType,
    RetrievalResult,
    ReviewItem,
    derive_query_id,
)
from ragsift.settings import GuardrailSettings
from ragsift.workers.base import Emit, Outcome

__all__ = ["DecisionHandler"]

SOURCE = "/ragsift/worker/decision"


class DecisionHandler:
    """C5 decisions with their reasons; B3 review routing; evidence for advisory use."""

    name = "decision"
    source = "retrievals"

    def __init__(self, guardrails: GuardrailSettings, metrics: Metrics):
        self.guardrails = guardrails
        self.metrics = metrics

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """One decision (and maybe a review item and evidence) per result."""
        return [self._one(r) for r in events]

    def _one(self, r: RetrievalResult) -> list[Emit]:
        # D9 for every collection searched (D3): the strictest of their thresholds.
        threshold = self.guardrails.threshold_for_all(r.collections or [r.collection])
        verdict = decide(
            outcome=r.outcome,
            confidence=r.confidence,
            level=r.level,
            threshold=threshold,
            strict_mode=self.guardrails.strict_mode,
        )
        flags: list[str] = [r.advisory_flag]
        if r.advisory_only:
            flags.append("ADVISORY_ONLY")
        if r.should_flag_for_review:
            flags.append("FLAGGED_FOR_REVIEW")
        decision = Decision(
            decision_id=derive_query_id(r.tenant_id, r.query_id, "decision"),
            query_id=r.query_id,
            tenant_id=r.tenant_id,
            collection=r.collection,
            use_context=verdict.use_context,
            reason=verdict.reason,
            confidence=r.confidence,
            threshold=threshold,
            level=r.level,
            flags=flags,
            review_queue=verdict.review_queue,
        )
        out = [Emit("decisions", r.query_id, decision)]
        collection = r.collection
        self.metrics.decisions.labels(collection, str(verdict.use_context).lower()).inc()
        if verdict.review_queue is not None:
            item = ReviewItem(
                review_id=derive_query_id(r.tenant_id, r.query_id, "review"),
                query_id=r.query_id,
                tenant_id=r.tenant_id,
                collection=collection,
                queue=verdict.review_queue,
                level=r.level,
                confidence=r.confidence,
                reason=verdict.reason,
            )
            out.append(Emit("review", r.query_id, item))
            self.metrics.reviews.labels(collection, verdict.review_queue).inc()
        if verdict.advisory_used_below_threshold:
            ev = evidence_about(
                r,
                EvidenceType.ADVISORY_USED_BELOW_THRESHOLD,
                verdict.reason,
                threshold=threshold,
                source=SOURCE,
                decision_id=decision.decision_id,
            )
            out.append(Emit("audit", r.query_id, ev))
            self.metrics.evidence.labels(ev.type.value).inc()
        return out

    async def close(self) -> None:
        """Nothing held."""
