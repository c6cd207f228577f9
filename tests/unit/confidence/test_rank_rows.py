"""``rankdata_rows`` in numpy: scipy's average ranks, without importing scipy.stats.

The pipeline ranks every reranked batch (``reranker_impact``); scipy.stats took
1.7 s to import on a worker's first reranked batch.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ragsift.confidence._scipy import rankdata_rows

# Few distinct values (ties are the hard part), and the +inf the engine pads with.
VALUES = st.sampled_from([-1.5, 0.0, 0.25, 2.0, 7.0, float("inf")])


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(0, 12)), elements=VALUES))
def test_average_ranks_match_scipy(x: np.ndarray) -> None:
    from scipy.stats import rankdata

    want = rankdata(x, axis=-1) if x.shape[-1] else np.zeros(x.shape)
    assert np.array_equal(rankdata_rows(x), want)


def test_worked_example() -> None:
    got = rankdata_rows(np.array([[3.0, 1.0, 3.0, np.inf], [0.5, 0.5, 0.5, 0.5]]))
    assert got.tolist() == [[2.5, 1.0, 2.5, 4.0], [2.5, 2.5, 2.5, 2.5]]


def test_ranking_does_not_import_scipy_stats() -> None:
    code = (
        "import sys, numpy as np\n"
        "from ragsift.confidence._scipy import rankdata_rows\n"
        "rankdata_rows(np.array([[1.0, 2.0]]))\n"
        "print('scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("shape", [(0,), (3, 0)])
def test_empty_rows(shape: tuple[int, ...]) -> None:
    assert rankdata_rows(np.zeros(shape)).shape == shape
