"""Answerability (D1) and the refusal sentence (D4).

A query is answerable when at least ``min_documents`` (2) kept hits score at
or above the similarity threshold *and* its confidence reaches the answer
threshold (the calibration's conformal threshold for the calibrated scorer,
else the low-level bound 0.50). Otherwise the right answer is
:data:`REFUSAL_SENTENCE`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "ANSWERABILITY_LEVELS",
    "REFUSAL_SENTENCE",
    "Answerability",
    "AnswerabilityLevel",
    "AnswerabilityReason",
    "documents_within",
]

REFUSAL_SENTENCE = "I cannot answer this based on the provided documents."
"""D4: the exact sentence for insufficient context."""

AnswerabilityLevel = Literal["high", "medium", "low", "insufficient"]
"""D1 answerability level."""
AnswerabilityReason = Literal["answerable", "too_few_documents", "low_confidence"]
"""Why a query is (not) answerable."""

# Level code (0 high ... 3 none) -> D1 level, for answerable queries.
ANSWERABILITY_LEVELS: tuple[AnswerabilityLevel, ...] = ("high", "medium", "low", "low")


@dataclass(frozen=True, slots=True)
class Answerability:
    """D1 verdict for one query.

    Attributes:
        is_answerable: answer (True) or refuse with :data:`REFUSAL_SENTENCE`.
        level: high / medium / low when answerable, else insufficient.
        reason: answerable, too_few_documents or low_confidence.
        documents_within_threshold: kept hits at or above the similarity threshold.
        min_documents: how many were needed.
        answer_threshold: confidence needed.
    """

    is_answerable: bool
    level: AnswerabilityLevel
    reason: AnswerabilityReason
    documents_within_threshold: int
    min_documents: int
    answer_threshold: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return asdict(self)


def documents_within(
    ranked: npt.NDArray[np.float64],
    kept_count: npt.NDArray[np.int64],
    threshold: npt.NDArray[np.float64],
) -> npt.NDArray[np.int64]:
    """Per query, kept hits (the first ``kept_count`` ranked) scoring >= ``threshold``."""
    pos = np.arange(ranked.shape[1])[None, :]
    within = (pos < kept_count[:, None]) & (ranked >= threshold[:, None])
    return within.sum(1).astype(np.int64)
