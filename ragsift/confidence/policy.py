"""Answer policy: levels and answerability re-derived for one result's tenant and collections.

The engine levels every query with one configuration. Some bars belong to the
query's context instead: a tenant's own level bounds and answer threshold
(A13), a collection's confidence threshold (D9) and the guardrails' minimum
number of documents (D1, ``RAGSIFT_GUARDRAILS_MIN_DOCUMENTS``). An
:class:`AnswerPolicy` carries them; :func:`apply_policy` re-derives an
assessment's status, level, advice and answerability from its confidence and
kept hits. Selection (which hits are kept, and every drop reason) is not
touched. The confidence itself changes only where the policy carries a
:class:`PriorShift` (the scope's mix moved its bar, ADR 016): then the
confidence and the bar are reported at that mix, and the answer is decided
before the mapping, so it is the one the bar gives in the calibration's terms.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ragsift.confidence.assessment import Assessment, build_assessment
from ragsift.confidence.config import ConfidenceConfig, LevelThresholds
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.levels import advisory_code, level_code
from ragsift.confidence.mix import at_share

__all__ = ["AnswerPolicy", "PriorShift", "apply_policy"]


@dataclass(frozen=True, slots=True)
class PriorShift:
    """Report a confidence calibrated at ``calibration_share`` unanswerable at ``share``."""

    calibration_share: float
    share: float

    def __post_init__(self) -> None:
        for name in ("calibration_share", "share"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfidenceError(f"{name} must be in (0, 1), got {value}")

    def apply(self, confidence: float) -> float:
        """``confidence`` at this share (:func:`~ragsift.confidence.mix.at_share`).

        A confidence that is not a number (hostile hits) passes through as it is, to
        be refused where the result is built, as without a prior.
        """
        if not 0.0 <= confidence <= 1.0:
            return confidence
        return at_share(confidence, self.calibration_share, self.share)


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    """The bars of one result, where they differ from the engine's.

    Attributes:
        levels: level bounds (A4/B3) replacing the engine's; None keeps them.
        answer_threshold: confidence needed to answer, replacing the engine's; None keeps it.
        answer_floor: a confidence the answer threshold may not be below (D9: the
            strictest collection threshold of the query); 0 sets no floor.
        min_documents: kept hits within the similarity threshold needed to answer
            (D1), at least the engine's own.
        prior: the mix the confidence and the bar are reported at; None keeps the
            calibration's.
    """

    levels: LevelThresholds | None = None
    answer_threshold: float | None = None
    answer_floor: float = 0.0
    min_documents: int = 1
    prior: PriorShift | None = None

    def __post_init__(self) -> None:
        for name in ("answer_threshold", "answer_floor"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfidenceError(f"{name} must be in [0, 1], got {value}")
        if self.min_documents < 1:
            raise ConfidenceError(f"min_documents must be >= 1, got {self.min_documents}")

    @property
    def is_neutral(self) -> bool:
        """Whether the policy changes nothing the engine decided (its min_documents stay)."""
        return (
            self.levels is None
            and self.answer_threshold is None
            and self.answer_floor == 0.0
            and self.min_documents == 1
            and self.prior is None
        )


def apply_policy(assessment: Assessment, cfg: ConfidenceConfig, policy: AnswerPolicy) -> Assessment:
    """``assessment`` (made with ``cfg``) with levels and answerability under ``policy``."""
    a = assessment
    if policy.is_neutral:
        return a
    levels = policy.levels or cfg.levels
    min_documents = max(cfg.min_documents, policy.min_documents)
    if levels is not cfg.levels or min_documents != cfg.min_documents:
        # Copied only when the policy moves them: the mix's bar (every calibrated query)
        # leaves both, and a copy re-runs the config's checks (~10 us a query).
        cfg = dataclasses.replace(cfg, levels=levels, min_documents=min_documents)
    base = a.answerability.answer_threshold
    threshold = max(
        base if policy.answer_threshold is None else policy.answer_threshold, policy.answer_floor
    )
    conf = a.confidence
    docs = a.answerability.documents_within_threshold
    answerable = docs >= cfg.min_documents and conf >= threshold
    if policy.prior is not None:  # decided above; only what is reported moves
        conf, threshold = policy.prior.apply(conf), policy.prior.apply(threshold)
    advisory = advisory_code(conf, cfg.advisory, answered=answerable)
    code = level_code(conf, levels, kept=bool(a.kept_indices), answered=answerable)
    return build_assessment(
        cfg,
        confidence=conf,
        code=int(code),
        advisory_code=advisory,
        signals=a.signals,
        kept_indices=a.kept_indices,
        kept_scores=a.kept_scores,
        dropped=a.dropped,
        total=a.total_found,
        bar=a.threshold,
        relaxed=a.relaxed,
        stop_reason=a.stop_reason,
        adaptive_confidence=a.adaptive_confidence,
        docs_within=docs,
        answerable=answerable,
        answer_threshold=threshold,
        scorer=a.scorer,
        primary_metric=a.primary_metric,
        calibration_version=a.calibration_version,
    )
