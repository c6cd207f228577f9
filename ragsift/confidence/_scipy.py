"""Typed wrappers of the few scipy routines the engine uses.

scipy ships no type stubs, so importing it directly would leave untyped names
in typed code; these wrappers give each routine a precise signature instead.
scipy is imported on first use: ``scipy.stats`` alone took a second of every
``ragsift`` command's start (3.5 s without bytecode caches), and most commands
never call it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np
import numpy.typing as npt

__all__ = ["beta_ppf", "minimize_bounded", "norm_ppf", "rankdata_rows", "t_ppf"]

FloatArray = npt.NDArray[np.float64]


@functools.cache
def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _stats() -> ModuleType:
    return _module("scipy.stats")


def beta_ppf(q: float, a: FloatArray, b: FloatArray) -> FloatArray:
    """Quantile ``q`` of Beta(a, b), elementwise."""
    return np.asarray(_stats().beta.ppf(q, a, b), dtype=np.float64)


def t_ppf(q: float, df: FloatArray) -> FloatArray:
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom, elementwise."""
    return np.asarray(_stats().t.ppf(q, df), dtype=np.float64)


def norm_ppf(q: float) -> float:
    """Quantile ``q`` of the standard normal."""
    return float(_stats().norm.ppf(q))


def rankdata_rows(x: FloatArray) -> FloatArray:
    """Average ranks (1-based, ties share their mean rank) along the last axis.

    ``scipy.stats.rankdata``'s figures for inputs without NaN, in numpy alone: the
    pipeline ranks every reranked batch (``reranker_impact``), and importing
    ``scipy.stats`` there put 1.7 s on a worker's first reranked batch.
    """
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    if n == 0:
        return np.zeros(x.shape, dtype=np.float64)
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=-1)
    position = np.broadcast_to(np.arange(n), x.shape)
    first = np.ones(x.shape, dtype=bool)  # each position: does a run of ties start here
    first[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    last = np.ones(x.shape, dtype=bool)
    last[..., :-1] = first[..., 1:]
    start = np.maximum.accumulate(np.where(first, position, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, position, n - 1), -1), -1), -1)
    ranks = np.empty(x.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=-1)
    return ranks


def minimize_bounded(
    fun: Callable[[FloatArray], tuple[float, FloatArray]],
    x0: FloatArray,
    bounds: Sequence[tuple[float | None, float | None]],
) -> FloatArray:
    """Minimize a smooth function with analytic gradient under box bounds (L-BFGS-B)."""
    result = _module("scipy.optimize").minimize(
        fun, x0, jac=True, method="L-BFGS-B", bounds=list(bounds)
    )
    return np.asarray(result.x, dtype=np.float64)
