"""Adaptive k (E1, a threshold-only Stop-RAG): keep as many hits as the query needs.

Per query, with hits ranked best first by normalized score:

1. drop hits below the similarity floor (0.2);
2. add hits one at a time, tracking
   ``similarity = mean(scores so far)`` and, when the query has entities,
   ``coverage = share of query entities mentioned by the hits so far`` and
   ``confidence = 0.6 x similarity + 0.4 x coverage`` (else ``similarity``);
3. stop at the first count where ``confidence >= threshold`` and
   ``count >= min_k`` (stop_reason ``threshold``), or when ``count = max_k``
   or the candidates run out (``max_k``); with no hit above the floor,
   stop_reason is ``no_results``.

Thresholds and k bounds may differ per query (per-task strategies, E2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence.config import AdaptiveParams
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.filtering import (
    ADAPTIVE_STOP,
    BELOW_FLOOR,
    KEPT,
    MAX_K,
    PADDING,
    STOP_MAX_K,
    STOP_NO_RESULTS,
    STOP_THRESHOLD,
    Selection,
)
from ragsift.confidence.hits import HitBatch
from ragsift.confidence.signals import PreparedBatch

__all__ = ["select_adaptive"]


def select_adaptive(
    prepared: PreparedBatch,
    params: AdaptiveParams,
    *,
    batch: HitBatch | None = None,
    threshold: float | npt.ArrayLike | None = None,
    min_k: int | npt.ArrayLike | None = None,
    max_k: int | npt.ArrayLike | None = None,
) -> Selection:
    """E1 adaptive selection (module docstring).

    Args:
        prepared: the normalized, ranked batch.
        params: E1 defaults (floor, threshold, k range, weights).
        batch: the raw batch, for its entity matrix (coverage); optional.
        threshold, min_k, max_k: per-query overrides (scalars or (Q,) arrays).
    """
    ranked = prepared.ranked
    q, k = ranked.shape
    thr = _per_query(params.threshold if threshold is None else threshold, np.float64, q)
    lo = _per_query(params.min_k if min_k is None else min_k, np.int64, q)
    hi = _per_query(params.max_k if max_k is None else max_k, np.int64, q)
    if (lo < 1).any() or (hi < lo).any():
        raise ConfidenceError(f"need 1 <= min_k <= max_k, got min_k={lo.min()}, max_k={hi.min()}")
    valid = ranked >= params.floor  # ranked is best first, so valid hits form a prefix
    n_valid = valid.sum(1)
    count = np.arange(1, k + 1, dtype=np.float64)[None, :]
    similarity = np.where(valid, ranked, 0.0).cumsum(axis=1) / count
    confidence = similarity
    if batch is not None and batch.entity_matrix is not None and batch.entity_counts is not None:
        em = batch.entity_matrix
        if em.shape[1] < k:  # a batch of empty hit lists was padded to width 1
            em = np.zeros((q, k, em.shape[2]), dtype=bool)
        em_ranked = em[np.arange(q)[:, None], prepared.order]  # each row's hits, ranked
        seen = np.logical_or.accumulate(em_ranked & valid[:, :, None], axis=1)
        cols = np.arange(em.shape[2])[None, None, :] < batch.entity_counts[:, None, None]
        counts = batch.entity_counts.astype(np.float64)[:, None]
        coverage = (seen & cols).sum(2) / np.maximum(counts, 1.0)
        combined = params.similarity_weight * similarity + params.coverage_weight * coverage
        confidence = np.where(counts > 0, combined, similarity)
    reached = valid & (confidence >= thr[:, None]) & (count >= lo[:, None])
    stop_here = reached | (count >= hi[:, None]) | (count >= n_valid[:, None])
    first = stop_here.argmax(axis=1)
    kept = np.where(n_valid > 0, first + 1, 0)
    rows = np.arange(q)
    by_threshold = reached[rows, first]
    stop = np.where(
        n_valid == 0, STOP_NO_RESULTS, np.where(by_threshold, STOP_THRESHOLD, STOP_MAX_K)
    )
    adaptive_conf = np.where(n_valid > 0, confidence[rows, first], 0.0)
    pos = np.arange(k)[None, :]
    after = np.where(by_threshold[:, None], ADAPTIVE_STOP, MAX_K)
    reasons = np.where(pos < kept[:, None], KEPT, np.where(valid, after, BELOW_FLOOR))
    reasons = np.where(prepared.mask, reasons, PADDING).astype(np.int8)
    return Selection(
        kept_count=kept.astype(np.int64),
        reasons=reasons,
        bar=np.full(q, params.floor),
        limit=hi.astype(np.int64),
        relaxed=np.zeros(q, dtype=bool),
        stop=stop.astype(np.int64),
        adaptive_confidence=adaptive_conf,
        target=thr.astype(np.float64),
    )


def _per_query(
    value: float | npt.ArrayLike, dtype: type[np.float64] | type[np.int64], q: int
) -> npt.NDArray[Any]:
    """``value`` as a (Q,) array: broadcast only when it is not one already (the
    wrapper of ``np.broadcast_to`` costs more than a one-query batch's arithmetic)."""
    arr = np.asarray(value, dtype=dtype)
    return arr if arr.shape == (q,) else np.broadcast_to(arr, (q,))
