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


def _same(a: Any, b: Any, path: str = "") -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert a.keys() == b.keys(), path
        for key in a:
            _same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list), path
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), path
    else:
        assert a == b, path


@pytest.fixture
def assert_same_assessment() -> Callable[[Any, Any], None]:
    """Compare two assessments field by field (floats to 1e-9)."""

    def check(a: Any, b: Any) -> None:
        _same(a.to_dict(), b.to_dict())

    return check
