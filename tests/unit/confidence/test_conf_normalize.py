"""Per-channel normalization: every formula maps onto [0, 1], monotonically."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragsift.confidence import ConfidenceError, NormalizationParams, normalize_scores


def test_cosine_clips_negative_to_zero_and_keeps_positive_values() -> None:
    out = normalize_scores([-0.5, 0.0, 0.7, 1.0], "cosine")
    assert out.tolist() == [0.0, 0.0, 0.7, 1.0]


def test_euclid_on_unit_vectors_equals_cosine() -> None:
    rng = np.random.default_rng(1)
    q = rng.normal(size=16)
    docs = rng.normal(size=(50, 16))
    q /= np.linalg.norm(q)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    cos = docs @ q
    dist = np.linalg.norm(docs - q, axis=1)
    np.testing.assert_allclose(
        normalize_scores(dist, "euclid"), normalize_scores(cos, "cosine"), atol=1e-12
    )
    np.testing.assert_allclose(normalize_scores(cos, "dot"), normalize_scores(cos, "cosine"))


def test_bm25_is_half_at_bm25_half() -> None:
    assert normalize_scores([10.0], "bm25")[0] == pytest.approx(0.5)
    assert normalize_scores([5.0], "bm25", NormalizationParams(bm25_half=5.0))[0] == pytest.approx(
        0.5
    )


def test_rrf_first_in_every_list_is_one() -> None:
    top = 2 / (60 + 1)
    assert normalize_scores([top], "rrf")[0] == pytest.approx(1.0)
    assert normalize_scores([1 / 61], "rrf")[0] == pytest.approx(0.5)


def test_reranker_logits_go_through_sigmoid() -> None:
    assert normalize_scores([0.0], "reranker")[0] == pytest.approx(0.5)
    assert normalize_scores([-1000.0], "reranker")[0] == 0.0
    probs = NormalizationParams(reranker_logits=False)
    assert normalize_scores([0.3], "reranker", probs)[0] == pytest.approx(0.3)


def test_nan_stays_nan() -> None:
    assert np.isnan(normalize_scores([np.nan], "cosine")[0])


@pytest.mark.parametrize(("metric", "value"), [("euclid", -0.1), ("bm25", -1.0)])
def test_negative_distance_or_bm25_is_rejected(metric: str, value: float) -> None:
    with pytest.raises(ConfidenceError, match="must be >= 0"):
        normalize_scores([value], metric)  # type: ignore[arg-type]


def test_unknown_metric_is_named() -> None:
    with pytest.raises(ConfidenceError, match="'manhattan'"):
        normalize_scores([0.1], "manhattan")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dot_scale": 0.0}, "dot_scale must be > 0, got 0.0"),
        ({"bm25_half": -1.0}, "bm25_half must be > 0, got -1.0"),
        ({"rrf_lists": 0}, "rrf_lists must be >= 1, got 0"),
    ],
)
def test_params_name_the_bad_value(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ConfidenceError, match=message):
        NormalizationParams(**kwargs)  # type: ignore[arg-type]


@given(
    st.sampled_from(["cosine", "dot", "euclid", "bm25", "rrf", "reranker"]),
    st.lists(st.floats(0, 50, allow_nan=False), min_size=2, max_size=20),
)
def test_every_formula_is_in_unit_interval_and_monotone(metric: str, raw: list[float]) -> None:
    values = np.sort(np.asarray(raw))
    out = normalize_scores(values, metric)  # type: ignore[arg-type]
    assert np.all((out >= 0) & (out <= 1))
    diffs = np.diff(out)
    if metric == "euclid":  # a distance: larger is worse
        assert np.all(diffs <= 1e-12)
    else:
        assert np.all(diffs >= -1e-12)
