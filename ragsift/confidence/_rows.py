"""Row sums that do not depend on how wide a batch is padded.

numpy's ``sum`` adds pairwise, in blocks whose boundaries move with the row's
width, so a query's sum would change in the last bits with the padding its
batch gives it (and BLAS's ``x @ w`` may change with the number of rows).
Adding each row left to right makes trailing padding zeros exact no-ops: a
query gets the same bits scored alone or in any batch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["row_sums"]

FloatArray = npt.NDArray[np.float64]


def row_sums(values: FloatArray) -> FloatArray:
    """Each row's sum of a (..., K) array, added left to right along the last axis (0 if K is 0)."""
    if values.shape[-1] == 0:
        return np.zeros(values.shape[:-1])
    # cumsum is sequential by definition: out[j] = out[j - 1] + x[j].
    # The method, not np.cumsum: one call to a small array costs mostly dispatch.
    sums: FloatArray = values.cumsum(axis=-1)[..., -1]
    return sums
