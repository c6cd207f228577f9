"""Per-task adaptive-k strategies (E2): task type -> confidence threshold, min_k, max_k."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from ragsift.confidence.config import AdaptiveParams
from ragsift.confidence.errors import ConfidenceError

__all__ = ["DEFAULT_TASK", "TASK_STRATEGIES", "TaskStrategy", "strategy_for"]

DEFAULT_TASK = "general"


@dataclass(frozen=True, slots=True)
class TaskStrategy:
    """How much context one kind of task needs (E2)."""

    task: str
    confidence_threshold: float
    min_k: int
    max_k: int

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence_threshold <= 1.0:
            raise ConfidenceError(
                f"confidence_threshold must be in [0, 1], got {self.confidence_threshold}"
            )
        if self.min_k < 1 or self.max_k < self.min_k:
            raise ConfidenceError(
                f"need 1 <= min_k <= max_k, got min_k={self.min_k}, max_k={self.max_k}"
            )

    def apply(self, params: AdaptiveParams) -> AdaptiveParams:
        """``params`` with this strategy's threshold and k range (floor and weights kept)."""
        return AdaptiveParams(
            floor=params.floor,
            threshold=self.confidence_threshold,
            min_k=self.min_k,
            max_k=self.max_k,
            similarity_weight=params.similarity_weight,
            coverage_weight=params.coverage_weight,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


# Seed E's table (E2): lower thresholds and more chunks for tasks that need broad context.
TASK_STRATEGIES: Mapping[str, TaskStrategy] = MappingProxyType(
    {
        s.task: s
        for s in (
            TaskStrategy("debugging", 0.6, 2, 8),
            TaskStrategy("code_review", 0.7, 1, 5),
            TaskStrategy("architecture", 0.5, 2, 8),
            TaskStrategy("explanation", 0.8, 1, 4),
            TaskStrategy("testing", 0.7, 1, 5),
            TaskStrategy("devops", 0.6, 1, 6),
            TaskStrategy("ml_engineering", 0.6, 2, 8),
            TaskStrategy(DEFAULT_TASK, 0.7, 1, 5),
        )
    }
)
"""Strategies by task type."""


def strategy_for(task: str | None) -> TaskStrategy:
    """The strategy of ``task``; unknown or missing tasks get ``general``."""
    if task is None:
        return TASK_STRATEGIES[DEFAULT_TASK]
    return TASK_STRATEGIES.get(task, TASK_STRATEGIES[DEFAULT_TASK])
