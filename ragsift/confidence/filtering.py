"""Which hits are kept: A1 threshold with A2 relaxation, and E4 fixed top-k, vectorized.

A1/A2 (seed A), per query with normalized scores s and threshold t:

1. keep every hit with s >= t;
2. if fewer than ``min_results`` (3) pass and the query has hits, relax the
   threshold to t x (1 - relax_fraction) (10%) and keep the best hits with
   s >= the relaxed threshold, at most ``min_results`` of them.

E4: keep the best min(k, n) hits.

Every dropped hit gets a reason (A13): the rule, the value it had and the
threshold or limit it failed. Selections are computed as (Q, K) arrays of
reason codes; :func:`drop_reasons` turns one row into :class:`DropReason` objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.signals import PreparedBatch

__all__ = [
    "DROP_RULES",
    "STOP_REASONS",
    "DropReason",
    "DropRule",
    "Selection",
    "StopReason",
    "drop_reasons",
    "select_threshold",
    "select_top_k",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DropRule = Literal[
    "below_threshold", "min_results_cap", "below_floor", "adaptive_stop", "max_k", "top_k_cap"
]
"""Why a hit was dropped."""

StopReason = Literal["threshold", "max_k", "no_results"]
"""Why selection stopped (E1's vocabulary, used by every selection mode)."""

# Reason codes in the (Q, K) arrays: 0 kept, -1 padding, else 1 + index in DROP_RULES.
KEPT = 0
PADDING = -1
DROP_RULES: tuple[DropRule, ...] = (
    "below_threshold",
    "min_results_cap",
    "below_floor",
    "adaptive_stop",
    "max_k",
    "top_k_cap",
)
BELOW_THRESHOLD, MIN_RESULTS_CAP, BELOW_FLOOR, ADAPTIVE_STOP, MAX_K, TOP_K_CAP = range(1, 7)
STOP_REASONS: tuple[StopReason, ...] = ("threshold", "max_k", "no_results")
STOP_THRESHOLD, STOP_MAX_K, STOP_NO_RESULTS = range(3)


class DropReason(NamedTuple):
    """Why one hit was not kept (A13).

    Attributes:
        hit_index: position of the hit in the input.
        rule: the rule that dropped it.
        value: its normalized primary score.
        threshold: the score bar it was compared with (threshold rules), else None.
        limit: the count limit it fell beyond (cap rules), else None.
    """

    hit_index: int
    rule: DropRule
    value: float
    threshold: float | None = None
    limit: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return self._asdict()


@dataclass(frozen=True, slots=True)
class Selection:
    """A selection over Q queries (arrays in *ranked* order: column j = j-th best hit).

    Attributes:
        kept_count: (Q,) kept hits; the kept hits are the first ``kept_count`` ranked ones.
        reasons: (Q, K) reason code per ranked hit (0 kept, -1 padding).
        bar: (Q,) score bar applied (the relaxed one if relaxed; the floor in adaptive mode).
        limit: (Q,) count limit applied (min_results, max_k or k).
        relaxed: (Q,) whether A2 relaxation was used.
        stop: (Q,) index into STOP_REASONS.
        adaptive_confidence: (Q,) E1 accumulated confidence, or None outside adaptive mode.
        target: (Q,) E1 confidence threshold, or None outside adaptive mode.
    """

    kept_count: IntArray
    reasons: npt.NDArray[np.int8]
    bar: FloatArray
    limit: IntArray
    relaxed: npt.NDArray[np.bool_]
    stop: IntArray
    adaptive_confidence: FloatArray | None = None
    target: FloatArray | None = None


def _per_query(name: str, value: float | npt.ArrayLike, q: int) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (q,):  # broadcast_to's wrapper costs more than a one-query batch's work
        arr = np.broadcast_to(arr, (q,))
    if ((arr < 0) | (arr > 1)).any():
        raise ConfidenceError(f"{name} must be in [0, 1], got {arr[(arr < 0) | (arr > 1)][0]}")
    return arr


def select_threshold(
    prepared: PreparedBatch,
    threshold: float | npt.ArrayLike,
    *,
    min_results: int,
    relax_fraction: float,
) -> Selection:
    """A1/A2 threshold filter with minimum-results relaxation (module docstring)."""
    if min_results < 0:
        raise ConfidenceError(f"min_results must be >= 0, got {min_results}")
    ranked = prepared.ranked
    q, k = ranked.shape
    t = _per_query("threshold", threshold, q)
    n = prepared.lengths
    strict = (ranked >= t[:, None]).sum(1)
    relaxed = (strict < min_results) & (n > 0)
    rt = t * (1.0 - relax_fraction)
    passing_relaxed = (ranked >= rt[:, None]).sum(1)
    kept = np.where(relaxed, np.minimum(passing_relaxed, min_results), strict)
    bar = np.where(relaxed, rt, t)
    pos = np.arange(k)[None, :]
    reasons = np.where(
        pos < kept[:, None],
        KEPT,
        np.where(ranked >= bar[:, None], MIN_RESULTS_CAP, BELOW_THRESHOLD),
    )
    # The mask marks each row's first ``lengths`` columns: its real ranked hits.
    reasons = np.where(prepared.mask, reasons, PADDING).astype(np.int8)
    return Selection(
        kept_count=kept.astype(np.int64),
        reasons=reasons,
        bar=bar,
        limit=np.full(q, min_results, dtype=np.int64),
        relaxed=relaxed,
        stop=np.where(kept > 0, STOP_THRESHOLD, STOP_NO_RESULTS).astype(np.int64),
    )


def select_top_k(prepared: PreparedBatch, k: int | npt.ArrayLike) -> Selection:
    """E4: keep the best ``k`` hits, unchanged fixed top-k retrieval (``k`` per query or one)."""
    q, width = prepared.ranked.shape
    ks = np.asarray(k, dtype=np.int64)
    if ks.shape != (q,):
        ks = np.broadcast_to(ks, (q,))
    if ks.size and ks.min() < 1:
        raise ConfidenceError(f"top_k must be > 0, got {ks.min()}")
    n = prepared.lengths
    kept = np.minimum(n, ks)
    pos = np.arange(width)[None, :]
    reasons = np.where(pos < kept[:, None], KEPT, TOP_K_CAP)
    reasons = np.where(prepared.mask, reasons, PADDING).astype(np.int8)
    return Selection(
        kept_count=kept.astype(np.int64),
        reasons=reasons,
        bar=np.zeros(q),
        limit=ks.astype(np.int64),
        relaxed=np.zeros(q, dtype=bool),
        stop=np.where(kept > 0, STOP_MAX_K, STOP_NO_RESULTS).astype(np.int64),
    )


def drop_reasons(selection: Selection, prepared: PreparedBatch, row: int) -> tuple[DropReason, ...]:
    """The reasons of every dropped hit of query ``row``, best hit first."""
    # Python lists, not numpy scalars: a row has a few dozen hits at most, and
    # indexing a list is far cheaper than indexing an array element by element.
    codes = selection.reasons[row].tolist()
    order = prepared.order[row].tolist()
    ranked = prepared.ranked[row].tolist()
    bar = float(selection.bar[row])
    limit = int(selection.limit[row])
    target = None if selection.target is None else float(selection.target[row])
    out = []
    for j, code in enumerate(codes):
        if code <= 0:
            continue
        is_bar = code in (BELOW_THRESHOLD, BELOW_FLOOR)
        if code == ADAPTIVE_STOP and target is not None:
            threshold: float | None = target
        else:
            threshold = bar if is_bar else None
        out.append(
            DropReason(
                hit_index=order[j],
                rule=DROP_RULES[code - 1],
                value=ranked[j],
                threshold=threshold,
                limit=None if is_bar or code == ADAPTIVE_STOP else limit,
            )
        )
    return tuple(out)
