"""The reranker edge: a :class:`Reranker` scores (query, passage) pairs with a cross-encoder.

Every backend returns *logits*: the confidence engine's ``reranker`` channel maps
them through a sigmoid (:mod:`ragsift.confidence.normalize`). Backends whose API
answers probabilities convert them with :func:`logit`, which keeps their order
and makes the sigmoid give the probability back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from ragsift.errors import RagsiftError, ServiceUnavailableError

__all__ = [
    "PROBABILITY_EPS",
    "Reranker",
    "RerankerResponseError",
    "RerankerUnavailableError",
    "check_scores",
    "logit",
]

# Probabilities are clipped this far from 0 and 1 before the logit, so a server
# answering exactly 0 or 1 gives a finite score (|logit| <= 13.8).
PROBABILITY_EPS = 1e-6


class RerankerUnavailableError(ServiceUnavailableError):
    """The reranker did not answer usefully (5xx, 429, timeout, deadline, unreachable)."""

    stage = "rerank"

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message, service="reranker", retry_after=retry_after)
        self.status_code = status_code
        self.attempts = attempts


class RerankerResponseError(RagsiftError):
    """The reranker refused the request (4xx) or answered something that is not scores."""

    stage = "rerank"

    def __init__(
        self, message: str, *, status_code: int | None = None, body: str | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class Reranker(Protocol):
    """A cross-encoder: how well does each passage answer the query.

    ``reranker_id`` names the model and protocol; it goes into cache keys (and,
    like an embedder id, into calibration artifacts fit on its scores).
    """

    reranker_id: str

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One logit per text, in the order of ``texts``."""
        ...

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        """Many queries' passages in as few calls as the backend allows.

        One outcome per query: its logits, or the exception that failed it (a
        failure is that query's; the others keep their scores).
        """
        ...

    async def close(self) -> None:
        """Release connections or sessions."""
        ...


def logit(probability: float) -> float:
    """The logit of a probability clipped to [PROBABILITY_EPS, 1 - PROBABILITY_EPS]."""
    p = min(max(probability, PROBABILITY_EPS), 1.0 - PROBABILITY_EPS)
    return math.log(p / (1.0 - p))


def check_scores(scores: Sequence[float], expected: int, source: str) -> list[float]:
    """``scores`` as floats if there is one finite number per text, else a clear error."""
    if len(scores) != expected:
        raise RerankerResponseError(f"{source} returned {len(scores)} scores for {expected} texts")
    out = [float(s) for s in scores]
    bad = next((s for s in out if not math.isfinite(s)), None)
    if bad is not None:
        raise RerankerResponseError(f"{source} returned a non-finite score ({bad})")
    return out
