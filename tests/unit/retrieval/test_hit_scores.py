"""hit_scores: the confidence engine's input from hits, missing channel scores filled."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ragsift.retrieval.hit_scores import hit_scores
from tests.factories import search_hit

_score = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.none()


_hit = search_hit


@given(st.lists(st.tuples(_score, _score), min_size=1, max_size=12))
def test_missing_scores_take_the_channels_lowest_or_zero_and_all_are_rounded(
    pairs: list[tuple[float | None, float | None]],
) -> None:
    hits = [_hit(rank, d, s) for rank, (d, s) in enumerate(pairs, 1)]
    scores = hit_scores(hits, "hybrid", [])
    dense = [np.round(d, 5) for d, _ in pairs if d is not None]
    lowest = float(min(dense)) if dense else 0.0
    assert scores.dense is not None
    assert scores.sparse is not None
    for (d, s), got_dense, got_sparse in zip(pairs, scores.dense, scores.sparse, strict=True):
        assert got_dense == (lowest if d is None else np.round(d, 5))
        assert got_sparse == (0.0 if s is None else np.round(s, 5))
        assert math.isfinite(got_dense)
        assert math.isfinite(got_sparse)
