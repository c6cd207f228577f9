"""The pipeline's rerank step: score each query's hits, never fail the query.

Two uses (ADR 048). A query scored by a calibrated model has its confidence and
kept hits decided as without a reranker; the reranker then orders the kept hits
(:meth:`RerankStage.score`). Otherwise (the weighted scorer) the search fetches
``max(k, candidates)`` hits; the first ``candidates`` of them (in the
retriever's order) go to the reranker in one call for the whole batch; each
query keeps its ``k`` best by reranker score, which become the ``rerank``
channel the confidence engine ranks, thresholds and computes ``reranker_impact``
on (:meth:`RerankStage.apply`). When ``k`` exceeds ``candidates``, hits past the
window get the window's lowest reranker score: they rank last, as the retriever
ranked them.

A reranker failure is counted and the query goes on with the retriever's own
order and no reranker channel (exactly what it gets with the reranker off).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.rerank.base import Reranker, RerankerResponseError, check_scores

__all__ = ["RerankOutcome", "RerankStage"]


@dataclass(frozen=True, slots=True)
class RerankOutcome:
    """One query's hits after reranking, and the error if the reranker failed it."""

    hits: list[SearchHit]
    error: Exception | None = None


class RerankStage:
    """Reranks the candidates of a batch's queries.

    Args:
        reranker: the backend.
        candidates: hits per query sent to the reranker, ``> 0``.
        metrics: where failures and time are counted.
    """

    def __init__(self, reranker: Reranker, *, candidates: int, metrics: Metrics) -> None:
        if candidates <= 0:
            raise ValueError(f"candidates must be > 0, got {candidates}")
        self.reranker = reranker
        self.candidates = candidates
        self.metrics = metrics

    def fetch_limit(self, k: int) -> int:
        """Hits to search for a query that keeps ``k``: enough to fill the window."""
        return max(k, self.candidates)

    async def apply(
        self, queries: Sequence[tuple[str, list[SearchHit], int]]
    ) -> list[RerankOutcome]:
        """Each (query text, hits, k) reranked to its ``k`` best; one outcome per query."""
        todo = [i for i, (_, hits, _) in enumerate(queries) if hits]
        outcomes = [RerankOutcome(hits[:k]) for _, hits, k in queries]
        if not todo:
            return outcomes
        requests = [
            (queries[i][0], [h.text for h in queries[i][1][: self.candidates]]) for i in todo
        ]
        scored = await self.score(requests)
        for i, scores in zip(todo, scored, strict=True):
            _, hits, k = queries[i]
            if isinstance(scores, Exception):
                outcomes[i] = RerankOutcome(hits[:k], scores)
                continue
            outcomes[i] = RerankOutcome(_rerank(hits, scores, k))
        return outcomes

    async def score(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        """The reranker's scores of each (query text, texts) pair list, in one call for
        the batch; a failure (or not one finite score per text) is counted and returned
        in its query's place."""
        if not queries:
            return []
        started = time.perf_counter()
        try:
            answers = list(await self.reranker.rerank_many(queries))
        except Exception as exc:  # any backend error: the queries go on without the reranker
            answers = [exc for _ in queries]
        self.metrics.stage_seconds.labels("rerank").observe(time.perf_counter() - started)
        if len(answers) != len(queries):
            wrong = RerankerResponseError(
                f"{self.reranker.reranker_id} answered {len(answers)} of {len(queries)} queries"
            )
            answers = [wrong for _ in queries]
        scored: list[list[float] | Exception] = []
        for answer, (_, texts) in zip(answers, queries, strict=True):
            if not isinstance(answer, Exception):
                try:
                    answer = check_scores(answer, len(texts), self.reranker.reranker_id)
                except RerankerResponseError as exc:
                    answer = exc
            if isinstance(answer, Exception):
                self.metrics.reranker_failures.labels(_reason(answer)).inc()
            scored.append(answer)
        return scored


def _rerank(hits: list[SearchHit], scores: list[float], k: int) -> list[SearchHit]:
    window = [
        dataclasses.replace(h, rerank_score=s)
        for h, s in zip(hits[: len(scores)], scores, strict=True)
    ]
    window.sort(key=lambda h: -(h.rerank_score or 0.0))  # stable: ties keep retriever order
    floor = min(scores)
    tail = [dataclasses.replace(h, rerank_score=floor) for h in hits[len(window) :]]
    return (window + tail)[:k]


def _reason(exc: Exception) -> str:
    """A bounded label for a failure: unavailable, response or error."""
    if isinstance(exc, ServiceUnavailableError):
        return "unavailable"
    if isinstance(exc, RerankerResponseError):
        return "response"
    return "error"
