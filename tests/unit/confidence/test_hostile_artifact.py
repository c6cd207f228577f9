"""A calibration artifact with any one field made hostile, and its version re-hashed to
match (as a careless hand edit or a broken tool would write it): ``load_calibration``
refuses it with one ConfidenceError, or the scorer it loads into gives every query a
confidence that is a probability.

Each part of the artifact has targeted tests of its own (mix, near miss, alignment,
dense-only, keyword...); this draws over all of its fields at once: NaN, infinities,
negative and out-of-range numbers, wrong types, deep nesting, and a histogram or
table of a million entries.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragsift.confidence import ConfidenceEngine, HitBatch
from ragsift.confidence.artifact import CalibrationArtifact, load_calibration
from ragsift.confidence.errors import ConfidenceError
from ragsift.evaluation.scoring import served_config
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.hit_scores import hit_scores
from tests.factories import search_hit

_PATH = packaged_calibration_path(HashingEmbedder().embedder_id, reader=False)
assert _PATH is not None
SHIPPED: dict[str, Any] = json.loads(Path(_PATH).read_text(encoding="utf-8"))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field's path; a list of numbers is one field (and its first entry another)."""
    if isinstance(value, dict):
        return [path] + [p for key, item in value.items() for p in _leaves(item, (*path, key))]
    if isinstance(value, list) and value:
        if all(isinstance(v, int | float) for v in value):
            return [path, (*path, 0)]
        return [path] + [p for i, item in enumerate(value[:2]) for p in _leaves(item, (*path, i))]
    return [path]


FIELDS = [p for p in _leaves(SHIPPED) if p and p[0] != "version"]
HOSTILE: list[Any] = [
    math.nan,
    math.inf,
    -math.inf,
    -1,
    -1e-9,
    0,
    1.0000001,
    2,
    1e308,
    10**30,
    True,
    None,
    "",
    "\u202e\x00日本",
    [],
    {},
    [math.nan],
    [[[[[[]]]]]],
    {"extra": 1},
]


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(SHIPPED))
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _rehashed(text: str) -> str | None:
    """The file as a tool that re-hashes what it writes would leave it; None when the
    content itself is refused (load_calibration refuses it before the version)."""
    try:
        edited = CalibrationArtifact.model_validate_json(text)
    except ValidationError:
        return None
    return edited.model_copy(update={"version": edited.content_hash()}).to_json()


def _loaded(file: Path) -> tuple[CalibrationArtifact | None, str]:
    try:
        return load_calibration(file), ""
    except ConfidenceError as exc:
        return None, str(exc)


def _confidences(artifact: CalibrationArtifact, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    queries = [
        [search_hit(r + 1, float(rng.uniform(-1, 1)), float(rng.uniform(0, 30))) for r in range(k)]
        for k in (1, 3, 8)
    ]
    engine = ConfidenceEngine(served_config(artifact), calibration=artifact)
    batch = HitBatch.from_hits([hit_scores(hits, "hybrid", (), None) for hits in queries])
    return np.asarray(engine.assess_batch(batch).confidence, dtype=float)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(FIELDS),
    value=st.sampled_from(HOSTILE) | st.floats() | st.integers() | st.text(max_size=5),
    seed=st.integers(0, 2**16),
)
def test_any_hostile_field_is_refused_or_scores_probabilities(
    tmp_path_factory: pytest.TempPathFactory, path: tuple[Any, ...], value: Any, seed: int
) -> None:
    text = json.dumps(_with(path, value))
    file = tmp_path_factory.mktemp("artifact") / "cal.json"
    file.write_text(_rehashed(text) or text, encoding="utf-8")
    artifact, refused = _loaded(file)
    if artifact is None:  # refused with one ConfidenceError, saying what
        assert refused.startswith(("invalid calibration artifact", "calibration artifact"))
        return
    confidence = _confidences(artifact, seed)
    assert np.all(np.isfinite(confidence)), (path, value, confidence)
    assert np.all((confidence >= 0) & (confidence <= 1)), (path, value, confidence)


@pytest.mark.parametrize(
    "path",
    [
        ("conformal", "mix", "thresholds"),
        ("conformal", "near_miss", "out_of_scope"),
        ("keyword", "conformal", "in_scope", "relevant"),
    ],
)
def test_a_table_of_a_million_entries_is_refused_quickly(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    target: Any = SHIPPED
    for key in path:
        target = target[key]
    file = tmp_path / "cal.json"
    file.write_text(json.dumps(_with(path, [target[0]] * 1_000_000)), encoding="utf-8")
    with pytest.raises(ConfidenceError, match="invalid calibration artifact"):
        load_calibration(file)
