"""Factories for the confidence engine's unit tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitScores


@pytest.fixture
def make_hits() -> Callable[..., HitScores]:
    """Build HitScores; keyword overrides replace the defaults (seed A's worked example)."""

    def factory(**overrides: Any) -> HitScores:
        fields: dict[str, Any] = {"dense": np.array([0.92, 0.45, 0.88, 0.35]), "metric": "cosine"}
        fields.update(overrides)
        return HitScores(**fields)

    return factory


@pytest.fixture
def make_engine() -> Callable[..., ConfidenceEngine]:
    """Build an engine; keyword overrides go to ConfidenceConfig."""

    def factory(**overrides: Any) -> ConfidenceEngine:
        return ConfidenceEngine(ConfidenceConfig(**overrides))

    return factory
