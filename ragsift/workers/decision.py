"""The decision handler: retrieval results in, decisions and review items out.

Besides B3's review routing, a configured share of scored results
(``RAGSIFT_FEEDBACK_SAMPLE_SHARE``) goes to the ``label_sample`` queue: chosen by a
hash of tenant and query id, so at random with respect to anything the result says,
and the same on every replica and redelivery. Labels given to those are a sample of
the traffic, which is what the feedback re-fit certifies on (docs/feedback.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

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

__all__ = ["LABEL_SAMPLE_FLAG", "SOURCES_DISAGREE_FLAG", "DecisionHandler", "sampled_for_labels"]

SOURCE = "/ragsift/worker/decision"
#: The decision flag of a result routed to the ``label_sample`` queue.
LABEL_SAMPLE_FLAG: Final = "SAMPLED_FOR_LABEL"
#: The flag of a decision whose result's kept sources disagree (D7); it is reviewed.
SOURCES_DISAGREE_FLAG: Final = "SOURCES_DISAGREE"
_HASH_SPAN: Final = float(2**64)


def sampled_for_labels(tenant_id: str, query_id: str, share: float) -> bool:
    """Whether a query's result is in the label sample: its hash under ``share``.

    A hash, not a random draw, so a redelivered or replayed result is chosen again
    (its review item is the same event, ADR 004) and replicas agree. The tenant's
    length leads the key, so no two (tenant, query id) pairs share one.
    """
    if share <= 0.0:
        return False
    key = f"{len(tenant_id)}:{tenant_id}{query_id}".encode()
    digest = hashlib.blake2b(key, digest_size=8, person=b"ragsift-label").digest()
    return int.from_bytes(digest, "big") / _HASH_SPAN < share


class DecisionHandler:
    """C5 decisions with their reasons; B3 review routing; evidence for advisory use."""

    name = "decision"
    source = "retrievals"

    def __init__(
        self, guardrails: GuardrailSettings, metrics: Metrics, *, label_share: float = 0.0
    ):
        if not 0.0 <= label_share <= 1.0:
            raise ValueError(f"label_share must be in [0, 1], got {label_share}")
        self.guardrails = guardrails
        self.metrics = metrics
        self.label_share = label_share

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
            sources_disagree=r.contradiction is not None,
            answerable=r.answerable,
            answerability_reason=r.answerability_reason,
        )
        flags: list[str] = [r.advisory_flag]
        if r.advisory_only:
            flags.append("ADVISORY_ONLY")
        if r.contradiction is not None:
            flags.append(SOURCES_DISAGREE_FLAG)
        if r.should_flag_for_review:
            flags.append("FLAGGED_FOR_REVIEW")
        # Scored results only: a greeting, a scope answer or a failed retrieval has no
        # retrieval to label (the feedback worker refuses such labels as unknown).
        sampled = r.outcome == "ok" and sampled_for_labels(
            r.tenant_id, r.query_id, self.label_share
        )
        if sampled:
            flags.append(LABEL_SAMPLE_FLAG)
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
        if sampled:
            out.append(Emit("review", r.query_id, self._label_item(r)))
            self.metrics.reviews.labels(collection, "label_sample").inc()
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

    def _label_item(self, r: RetrievalResult) -> ReviewItem:
        return ReviewItem(
            review_id=derive_query_id(r.tenant_id, r.query_id, "label-sample"),
            query_id=r.query_id,
            tenant_id=r.tenant_id,
            collection=r.collection,
            queue="label_sample",
            level=r.level,
            confidence=r.confidence,
            reason=(
                f"chosen at random ({self.label_share:.1%} of results) for a label: did"
                " the kept context hold the answer? Send it as sampled feedback; the"
                " re-fit certifies on such labels"
            ),
        )

    async def close(self) -> None:
        """Nothing held."""
