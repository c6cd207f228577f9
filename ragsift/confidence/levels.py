"""From a confidence to its level names: A4 status, B3 review level, C2 advisory flag.

================  ===================  =============  =====================
confidence        A4 status            B3 level       C2 flag
================  ===================  =============  =====================
>= 0.90           high_confidence      HIGH           HIGH_CONFIDENCE
0.85 - 0.90       high_confidence      HIGH           MEDIUM_CONFIDENCE
0.70 - 0.85       medium_confidence    MEDIUM         MEDIUM_CONFIDENCE
0.50 - 0.70       low_confidence       LOW            LOW_CONFIDENCE (advisory-only)
< 0.50            no_relevant_context  VERY_LOW       VERY_LOW_CONFIDENCE (advisory-only)
================  ===================  =============  =====================

A4/B3 boundaries are :class:`~.config.LevelThresholds`, C2's are
:class:`~.config.AdvisoryThresholds`. A query with no kept hit is
``no_relevant_context`` / ``VERY_LOW`` whatever its confidence; an answered
query (D1) is at worst ``low_confidence`` / LOW whatever its confidence, and a
refused one at best (ADR 049): LOW is where the two meet. Every level but HIGH
should be flagged for review (B3). All functions are vectorized.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence.config import AdvisoryThresholds, LevelThresholds

__all__ = [
    "ADVISORY_FLAGS",
    "REVIEW_ACTIONS",
    "REVIEW_LEVELS",
    "STATUSES",
    "AdvisoryFlag",
    "ReviewLevel",
    "Status",
    "advisory_code",
    "advisory_codes",
    "level_code",
    "level_codes",
]

Status = Literal["high_confidence", "medium_confidence", "low_confidence", "no_relevant_context"]
"""A4 status of a result."""
ReviewLevel = Literal["HIGH", "MEDIUM", "LOW", "VERY_LOW"]
"""B3 review level."""
AdvisoryFlag = Literal[
    "HIGH_CONFIDENCE", "MEDIUM_CONFIDENCE", "LOW_CONFIDENCE", "VERY_LOW_CONFIDENCE"
]
"""C2 advisory flag."""

# Index = level code (0 best, 3 worst); statuses and review levels share codes.
STATUSES: tuple[Status, ...] = (
    "high_confidence",
    "medium_confidence",
    "low_confidence",
    "no_relevant_context",
)
REVIEW_LEVELS: tuple[ReviewLevel, ...] = ("HIGH", "MEDIUM", "LOW", "VERY_LOW")
ADVISORY_FLAGS: tuple[AdvisoryFlag, ...] = (
    "HIGH_CONFIDENCE",
    "MEDIUM_CONFIDENCE",
    "LOW_CONFIDENCE",
    "VERY_LOW_CONFIDENCE",
)
# Seed B (B3): what each level asks of a human.
REVIEW_ACTIONS: dict[ReviewLevel, str] = {
    "HIGH": "safe to automate",
    "MEDIUM": "review recommended",
    "LOW": "mandatory review",
    "VERY_LOW": "expert review required",
}


def _codes(
    conf: npt.NDArray[np.float64], bounds: tuple[float, float, float]
) -> npt.NDArray[np.int8]:
    # bounds are descending (high, mid, low): code = how many bounds conf falls short of,
    # counted in one comparison against all three (a NaN falls short of none).
    c = np.asarray(conf, dtype=np.float64)
    return (c[..., None] < np.array(bounds)).sum(axis=-1).astype(np.int8)


#: Level code of a query with no kept hit, whatever its confidence (A4).
NO_CONTEXT_CODE = 3
#: The worst level code of an answered query and the best of a refused one:
#: ``low_confidence`` / LOW (ADR 049). It is the C2 flag code of LOW_CONFIDENCE too.
ANSWERED_WORST_CODE = REFUSED_BEST_CODE = 2


def level_code(
    confidence: float, thresholds: LevelThresholds, *, kept: bool, answered: bool
) -> int:
    """:func:`level_codes` of one query, without numpy's per-call cost."""
    if not kept:
        return NO_CONTEXT_CODE
    t = thresholds
    code = (confidence < t.high) + (confidence < t.medium) + (confidence < t.low)
    return min(code, ANSWERED_WORST_CODE) if answered else max(code, REFUSED_BEST_CODE)


def level_codes(
    confidence: npt.NDArray[np.float64],
    thresholds: LevelThresholds,
    kept_count: npt.NDArray[np.int64] | None = None,
    *,
    answered: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int8]:
    """A4/B3 level code per query (index into STATUSES / REVIEW_LEVELS).

    A query ``answered`` (its answer bar cleared, D1) is at worst ``low_confidence``
    / LOW: a bar lowered for the traffic's mix (ADR 030) can answer under the
    ``low`` band, and a result must not be answered and read ``no_relevant_context``
    at once (a strict report would refuse it, the cache would drop it). A query
    refused (``answered`` False) is at best LOW (ADR 049): a bar raised above the
    confidence, or too few documents, must not leave a refusal reading HIGH, "safe
    to automate", and cached for a day.
    """
    codes = _codes(confidence, (thresholds.high, thresholds.medium, thresholds.low))
    if answered is not None:
        capped = np.minimum(codes, ANSWERED_WORST_CODE)
        floored = np.maximum(codes, REFUSED_BEST_CODE)
        codes = np.where(np.asarray(answered, dtype=bool), capped, floored)
    if kept_count is not None:
        codes = np.where(np.asarray(kept_count) > 0, codes, NO_CONTEXT_CODE)
    return codes.astype(np.int8)


def advisory_code(confidence: float, thresholds: AdvisoryThresholds, *, answered: bool) -> int:
    """One query's C2 flag code; a refused query's is at best LOW_CONFIDENCE (ADR 049)."""
    t = thresholds
    code = int((confidence < t.high) + (confidence < t.advisory) + (confidence < t.low))
    return code if answered else max(code, REFUSED_BEST_CODE)


def advisory_codes(
    confidence: npt.NDArray[np.float64],
    thresholds: AdvisoryThresholds,
    *,
    answered: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.int8]:
    """C2 flag code per query (index into ADVISORY_FLAGS); refused at best LOW_CONFIDENCE."""
    codes = _codes(confidence, (thresholds.high, thresholds.advisory, thresholds.low))
    if answered is not None:
        floored = np.maximum(codes, REFUSED_BEST_CODE)
        codes = np.where(np.asarray(answered, dtype=bool), codes, floored)
    return codes.astype(np.int8)
