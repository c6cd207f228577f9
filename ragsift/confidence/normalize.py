"""Per-channel score normalization: every raw score onto one [0, 1] relevance scale.

Raw scores from different metrics are not comparable (a cosine of 0.7, a BM25
of 7 and an RRF of 0.03 can all describe the same hit), so nothing in ragsift
compares or thresholds a score before it has passed through here. Each
formula maps its channel monotonically (a better raw score never maps lower)
into [0, 1]:

* ``cosine``   s in [-1, 1]:  ``clip(s, 0, 1)``. Negative cosine is "unrelated"
  for text embedders, so it maps to 0; positive values keep their meaning,
  which keeps seed A's 0.70 threshold and worked example valid as written.
* ``dot``      inner product: ``clip(s / dot_scale, 0, 1)``. For unit-length
  vectors (``dot_scale`` = 1, the default) this is exactly the cosine rule;
  for unnormalized vectors pass the largest norm product as ``dot_scale``.
* ``euclid``   distance d >= 0: ``clip(1 - d**2 / 2, 0, 1)``. For unit vectors
  ``d**2 = 2 - 2 cos``, so this recovers the cosine and makes a euclid index
  and a cosine index over the same vectors score identically.
* ``bm25``     s >= 0, unbounded, query-length dependent:
  ``s / (s + bm25_half)``, a saturating map that is 0.5 at ``bm25_half``.
* ``rrf``      ``sum 1 / (rrf_k + rank)`` over ``rrf_lists`` ranked lists:
  ``s * (rrf_k + 1) / rrf_lists``, i.e. divided by its maximum (first in
  every list), so 1 means "ranked first by every retriever". Rank-only: it
  says nothing about absolute relevance.
* ``reranker`` cross-encoder logit: ``1 / (1 + exp(-s))``; if the reranker
  already emits probabilities (``reranker_logits=False``): ``clip(s, 0, 1)``.

A collection's score alignment (ADR 024) moves two of these: ``dense_offset``
is added to a dense channel's value before the clip, and ``bm25_half`` is
divided by its BM25 scale, so each collection's off-topic questions score where
they did on the calibration corpus.

NaN inputs (padding) stay NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError

__all__ = [
    "DENSE_METRICS",
    "METRICS",
    "DenseMetric",
    "Metric",
    "NormalizationParams",
    "normalize_scores",
]

Metric = Literal["cosine", "dot", "euclid", "bm25", "rrf", "reranker"]
"""Every score channel ragsift knows how to normalize."""

DenseMetric = Literal["cosine", "dot", "euclid"]
"""Metrics a dense vector index can report."""

METRICS: tuple[str, ...] = get_args(Metric)
DENSE_METRICS: tuple[str, ...] = get_args(DenseMetric)

# Unit-length embeddings bound the dot product by 1 (ragsift's embedders all normalize).
DEFAULT_DOT_SCALE = 1.0
# BM25 score that maps to 0.5: ragsift default, about the score of one rare query
# term matched once in a typical chunk with k1=1.2, b=0.75; calibration absorbs the rest.
DEFAULT_BM25_HALF = 10.0
# RRF constant k = 60 from Cormack, Clarke & Buettcher (SIGIR 2009), the value every
# hybrid engine (Qdrant included) uses.
DEFAULT_RRF_K = 60.0
# Seed B's hybrid retrieval fuses two lists: BM25 and dense.
DEFAULT_RRF_LISTS = 2


@dataclass(frozen=True, slots=True)
class NormalizationParams:
    """Parameters of the per-channel normalization formulas (see module docstring).

    Args:
        dot_scale: the largest possible dot product (1 for unit vectors).
        bm25_half: the BM25 score that maps to 0.5.
        rrf_k: the RRF constant used by the fusion step.
        rrf_lists: how many ranked lists were fused.
        reranker_logits: True if reranker scores are logits, False if probabilities.
        dense_offset: added to a dense channel's score before its clip (a
            collection's alignment, ADR 024); 0 leaves the formulas as above.
    """

    dot_scale: float = DEFAULT_DOT_SCALE
    bm25_half: float = DEFAULT_BM25_HALF
    rrf_k: float = DEFAULT_RRF_K
    rrf_lists: int = DEFAULT_RRF_LISTS
    reranker_logits: bool = True
    dense_offset: float = 0.0

    def __post_init__(self) -> None:
        if not -1.0 <= self.dense_offset <= 1.0:  # NaN fails too
            raise ConfidenceError(f"dense_offset must be in [-1, 1], got {self.dense_offset}")
        if not self.dot_scale > 0:
            raise ConfidenceError(f"dot_scale must be > 0, got {self.dot_scale}")
        if not self.bm25_half > 0:
            raise ConfidenceError(f"bm25_half must be > 0, got {self.bm25_half}")
        if not self.rrf_k >= 0:
            raise ConfidenceError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if self.rrf_lists < 1:
            raise ConfidenceError(f"rrf_lists must be >= 1, got {self.rrf_lists}")


_DEFAULT_PARAMS = NormalizationParams()


def normalize_scores(
    scores: npt.ArrayLike,
    metric: Metric,
    params: NormalizationParams = _DEFAULT_PARAMS,
) -> npt.NDArray[np.float64]:
    """Map raw scores of one channel onto [0, 1], elementwise, for any array shape.

    Args:
        scores: raw scores as the index or model reported them.
        metric: which channel (and so which formula) they come from.
        params: parameters of the formulas.

    Returns:
        A float64 array of the same shape; NaN stays NaN.

    Raises:
        ConfidenceError: unknown metric, or a negative euclidean distance/BM25 score.
    """
    s = np.asarray(scores, dtype=np.float64)
    shift = params.dense_offset
    if metric == "cosine":
        out = (s + shift if shift else s).clip(0.0, 1.0)
    elif metric == "dot":
        out = (s / params.dot_scale + shift).clip(0.0, 1.0)
    elif metric == "euclid":
        if (s < 0).any():
            raise ConfidenceError(f"euclidean distances must be >= 0, got min {np.nanmin(s)}")
        out = (1.0 - 0.5 * s * s + shift).clip(0.0, 1.0)
    elif metric == "bm25":
        if (s < 0).any():
            raise ConfidenceError(f"BM25 scores must be >= 0, got min {np.nanmin(s)}")
        out = s / (s + params.bm25_half)
    elif metric == "rrf":
        out = (s * ((params.rrf_k + 1.0) / params.rrf_lists)).clip(0.0, 1.0)
    elif metric == "reranker":
        if params.reranker_logits:
            # exp overflow for very negative logits yields 0.0, which is the right limit.
            with np.errstate(over="ignore"):
                out = 1.0 / (1.0 + np.exp(-s))
        else:
            out = s.clip(0.0, 1.0)
    else:
        raise ConfidenceError(f"metric must be one of {METRICS}, got {metric!r}")
    return out
