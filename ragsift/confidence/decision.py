"""The decision policy (C5, B3): use retrieved context or decide without it, and who reviews.

Pure: it reads a result's confidence, level and outcome and returns what the
engine decided and why. The decision is the engine's; the context is an input
to it only when its confidence reaches the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DecisionOutcome", "ReviewQueue", "decide"]

ReviewQueue = Literal["mandatory_review", "expert_review"]

# B3: LOW confidence needs a mandatory review, VERY LOW an expert's.
_REVIEW: dict[str, ReviewQueue] = {"LOW": "mandatory_review", "VERY_LOW": "expert_review"}


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    """What the decision step concluded for one result."""

    use_context: bool
    reason: str
    review_queue: ReviewQueue | None
    advisory_used_below_threshold: bool
    """Context used although under the threshold (strict mode off): audit it."""


def decide(
    *,
    outcome: str,
    confidence: float,
    level: str,
    threshold: float,
    strict_mode: bool = True,
    sources_disagree: bool = False,
    answerable: bool = True,
    answerability_reason: str | None = None,
) -> DecisionOutcome:
    """Decide for one retrieval result.

    Args:
        outcome: the result's outcome (ok, error, greeting, scope).
        confidence: its confidence in [0, 1].
        level: its B3 level (HIGH, MEDIUM, LOW, VERY_LOW).
        threshold: confidence needed to use the context (preset or per collection).
        strict_mode: off (D8 rollback) uses the context whatever its confidence.
        sources_disagree: its kept sources disagree on what is asked (D7): a HIGH or
            MEDIUM result goes to the mandatory review queue, its reason says why.
        answerable: the result's D1 answerability. In strict mode a result its bars
            refused (too few documents, a collection's or tenant's bar) is refused by
            the report too, so its context is not used whatever its confidence: the
            decision said "context used" beside a report that refused.
        answerability_reason: why it is not answerable, named in the reason.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    if outcome in ("greeting", "scope"):
        return DecisionOutcome(False, f"{outcome}: answered without retrieval", None, False)
    if outcome == "error":
        return DecisionOutcome(
            False, "retrieval failed: decided without retrieved context", "expert_review", False
        )
    review = _REVIEW.get(level)
    disagree = ""
    if sources_disagree:
        review = review or "mandatory_review"
        disagree = "; the kept sources disagree: reviewed"
    if confidence >= threshold and strict_mode and not answerable:
        why = answerability_reason or "unknown reason"
        return DecisionOutcome(
            False,
            f"confidence {confidence:.2f} >= threshold {threshold:.2f}, but the result is not"
            f" answerable ({why}): decided without retrieved context{disagree}",
            review,
            False,
        )
    if confidence >= threshold:
        return DecisionOutcome(
            True,
            f"confidence {confidence:.2f} >= threshold {threshold:.2f}: context used{disagree}",
            review,
            False,
        )
    if not strict_mode:
        return DecisionOutcome(
            True,
            f"confidence {confidence:.2f} < threshold {threshold:.2f}, but strict mode is off:"
            f" context used as advisory{disagree}",
            review,
            True,
        )
    return DecisionOutcome(
        False,
        f"confidence {confidence:.2f} < threshold {threshold:.2f}: decided without retrieved"
        f" context{disagree}",
        review,
        False,
    )
