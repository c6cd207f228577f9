"""The engine's output: :class:`Assessment` for one query, :class:`BatchAssessment` for many.

``BatchAssessment`` keeps everything as arrays (fast to compute, cheap to
aggregate); ``item(i)`` materializes one query's JSON-ready ``Assessment``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence.answerability import (
    ANSWERABILITY_LEVELS,
    Answerability,
    AnswerabilityReason,
)
from ragsift.confidence.config import ConfidenceConfig, ScorerName, Selection
from ragsift.confidence.filtering import STOP_REASONS, DropReason, StopReason, drop_reasons
from ragsift.confidence.filtering import Selection as SelectionArrays
from ragsift.confidence.guidance import (
    Disclaimer,
    Recommendation,
    disclaimer_for,
    recommendations_for,
)
from ragsift.confidence.levels import (
    ADVISORY_FLAGS,
    REVIEW_ACTIONS,
    REVIEW_LEVELS,
    STATUSES,
    AdvisoryFlag,
    ReviewLevel,
    Status,
)
from ragsift.confidence.normalize import Metric
from ragsift.confidence.signals import PreparedBatch, Signals

__all__ = ["Assessment", "BatchAssessment", "build_assessment"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Assessment:
    """Everything the engine concluded about one query's hits.

    Attributes:
        confidence: in [0, 1]; a probability for the calibrated scorer.
        scorer: which scorer produced it.
        status: A4 status. level / review_action / should_flag_for_review: B3.
        advisory_flag / advisory_only: C2 (advisory-only below the advisory threshold, or
            refused: ADR 049).
        disclaimer: A7. recommendations: B5.
        signals: B1 breakdown (B4).
        kept_indices: input positions of the kept hits, best first; kept_scores: their
            normalized scores.
        dropped: a reason for every dropped hit (A13).
        filtered_count / total_found / match_count: A5 counts (match_count = kept).
        threshold: score bar applied (relaxed if ``relaxed``; the floor in adaptive mode).
        selection: threshold, adaptive or top_k. stop_reason / chunks_retrieved: E1.
        adaptive_confidence: E1 accumulated confidence (adaptive mode only).
        answerability: D1 verdict.
        primary_metric: metric of the channel that ranked the hits.
        calibration_version: version of the calibration artifact, if calibrated.
    """

    confidence: float
    scorer: ScorerName
    status: Status
    level: ReviewLevel
    review_action: str
    should_flag_for_review: bool
    advisory_flag: AdvisoryFlag
    advisory_only: bool
    disclaimer: Disclaimer
    recommendations: tuple[Recommendation, ...]
    signals: Signals
    kept_indices: tuple[int, ...]
    kept_scores: tuple[float, ...]
    dropped: tuple[DropReason, ...]
    filtered_count: int
    total_found: int
    match_count: int
    threshold: float
    relaxed: bool
    selection: Selection
    stop_reason: StopReason
    chunks_retrieved: int
    adaptive_confidence: float | None
    answerability: Answerability
    primary_metric: Metric
    calibration_version: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8): nested objects become dicts, tuples lists."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if hasattr(value, "to_dict"):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
            out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class BatchAssessment:
    """Arrays for Q queries; :meth:`item` builds one :class:`Assessment`.

    Attributes:
        confidence: (Q,) confidences. level_code: (Q,) index into STATUSES / REVIEW_LEVELS.
        advisory_code: (Q,) index into ADVISORY_FLAGS.
        answerable: (Q,) D1 verdicts. signals: (Q, n_signals) signal matrix.
        selection: kept counts, reasons, stop reasons. prepared: ranked normalized scores.
    """

    confidence: FloatArray
    level_code: npt.NDArray[np.int8]
    advisory_code: npt.NDArray[np.int8]
    answerable: npt.NDArray[np.bool_]
    docs_within: npt.NDArray[np.int64]
    answer_threshold: float
    signals: FloatArray
    selection: SelectionArrays
    prepared: PreparedBatch
    config: ConfidenceConfig
    scorer: ScorerName
    primary_metric: Metric
    calibration_version: str | None

    def __len__(self) -> int:
        return int(self.confidence.shape[0])

    @property
    def statuses(self) -> list[Status]:
        """A4 status per query."""
        return [STATUSES[c] for c in self.level_code.tolist()]

    @property
    def kept_count(self) -> npt.NDArray[np.int64]:
        """Kept hits per query."""
        return self.selection.kept_count

    @property
    def stop_reasons(self) -> list[StopReason]:
        """E1 stop reason per query."""
        return [STOP_REASONS[c] for c in self.selection.stop.tolist()]

    def item(self, i: int) -> Assessment:
        """The full assessment of query ``i``."""
        sel = self.selection
        kept = int(sel.kept_count[i])
        adaptive = sel.adaptive_confidence
        return build_assessment(
            self.config,
            confidence=float(self.confidence[i]),
            code=int(self.level_code[i]),
            advisory_code=int(self.advisory_code[i]),
            signals=Signals.from_row(self.signals[i]),
            kept_indices=tuple(self.prepared.order[i, :kept].tolist()),
            kept_scores=tuple(self.prepared.ranked[i, :kept].tolist()),
            dropped=drop_reasons(sel, self.prepared, i),
            total=int(self.prepared.lengths[i]),
            bar=float(sel.bar[i]),
            relaxed=bool(sel.relaxed[i]),
            stop_reason=STOP_REASONS[int(sel.stop[i])],
            adaptive_confidence=None if adaptive is None else float(adaptive[i]),
            docs_within=int(self.docs_within[i]),
            answerable=bool(self.answerable[i]),
            answer_threshold=self.answer_threshold,
            scorer=self.scorer,
            primary_metric=self.primary_metric,
            calibration_version=self.calibration_version,
        )

    def to_list(self) -> list[Assessment]:
        """Every query's assessment."""
        return [self.item(i) for i in range(len(self))]


def build_assessment(
    cfg: ConfidenceConfig,
    *,
    confidence: float,
    code: int,
    advisory_code: int,
    signals: Signals,
    kept_indices: tuple[int, ...],
    kept_scores: tuple[float, ...],
    dropped: tuple[DropReason, ...],
    total: int,
    bar: float,
    relaxed: bool,
    stop_reason: StopReason,
    adaptive_confidence: float | None,
    docs_within: int,
    answerable: bool,
    answer_threshold: float,
    scorer: ScorerName,
    primary_metric: Metric,
    calibration_version: str | None,
) -> Assessment:
    """Assemble one :class:`Assessment` from computed parts (shared by batch and single paths)."""
    status, level = STATUSES[code], REVIEW_LEVELS[code]
    kept = len(kept_indices)
    reason: AnswerabilityReason = (
        "answerable"
        if answerable
        else "too_few_documents"
        if docs_within < cfg.min_documents
        else "low_confidence"
    )
    return Assessment(
        confidence=confidence,
        scorer=scorer,
        status=status,
        level=level,
        review_action=REVIEW_ACTIONS[level],
        should_flag_for_review=code != 0,
        advisory_flag=ADVISORY_FLAGS[advisory_code],
        advisory_only=confidence < cfg.advisory.advisory or not answerable,
        disclaimer=disclaimer_for(status, confidence, refusal=None if answerable else reason),
        recommendations=recommendations_for(
            status, signals, cfg.levels.high, keyword_only=primary_metric == "bm25"
        ),
        signals=signals,
        kept_indices=kept_indices,
        kept_scores=kept_scores,
        dropped=dropped,
        filtered_count=total - kept,
        total_found=total,
        match_count=kept,
        threshold=bar,
        relaxed=relaxed,
        selection=cfg.selection,
        stop_reason=stop_reason,
        chunks_retrieved=kept,
        adaptive_confidence=adaptive_confidence,
        answerability=Answerability(
            is_answerable=answerable,
            level=ANSWERABILITY_LEVELS[code] if answerable else "insufficient",
            reason=reason,
            documents_within_threshold=docs_within,
            min_documents=cfg.min_documents,
            answer_threshold=answer_threshold,
        ),
        primary_metric=primary_metric,
        calibration_version=calibration_version,
    )
