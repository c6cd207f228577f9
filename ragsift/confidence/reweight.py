"""The conformal walk on a sample re-weighted to another share of unanswerable queries.

:func:`~ragsift.confidence.mix.fit_mix_table` tabulates it at every share;
:func:`certify_at_share` gives one exact share's certificate, with its evidence
(the probes of :mod:`.probes` certify at the calibration's share). Unanswerable
queries weigh ``pi / pi_cal``, answerable ones ``(1 - pi) / (1 - pi_cal)``; the
bound is the same (grouped) Clopper-Pearson bound at the weighted sample's
effective size (:func:`~ragsift.confidence.conformal.risk_upper_bounds`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragsift.confidence.conformal import (
    _GRID,
    ConformalResult,
    _group_index,
    design_effect_bound,
    fixed_sequence_walk,
    risk_upper_bounds,
)
from ragsift.confidence.errors import ConfidenceError

__all__ = ["KindCounts", "certify_at_share", "walk_at_share"]

FloatArray = npt.NDArray[np.float64]


def certify_at_share(
    confidence: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    share: float,
    alpha: float,
    delta: float,
    groups: npt.ArrayLike | None = None,
    floor: float = 0.0,
) -> ConformalResult:
    """The conformal threshold of a sample re-weighted to ``share`` unanswerable queries.

    What :func:`fit_mix_table` tabulates, at one exact share, with its evidence;
    at the sample's own share it is
    :func:`~ragsift.confidence.conformal.conformal_threshold`. ``coverage`` is
    the re-weighted share of queries answered. A threshold under ``floor`` is
    raised to it: the walk passed the floor on its way down, so the floor is
    certified too, with its own bound.

    Raises:
        ConfidenceError: ``share`` outside (0, 1), or the sample holds one kind of query.
    """
    if not 0.0 < share < 1.0:
        raise ConfidenceError(f"share must be in (0, 1), got {share}")
    conf = np.asarray(confidence, dtype=np.float64)
    wrong = (np.asarray(labels) == 0).astype(np.int64)
    if conf.ndim != 1 or conf.shape != wrong.shape or np.isnan(conf).any():
        raise ConfidenceError("confidence and labels must be 1-D, equal length and not NaN")
    if wrong.sum() in (0, wrong.size):
        raise ConfidenceError("the sample must hold both answerable and unanswerable queries")
    group_index = _group_index(groups, conf.shape)
    g, upper, _, deff = walk_at_share(conf, wrong, group_index, share, alpha, delta)
    n_groups = None if group_index is None else int(group_index.max(initial=-1) + 1)
    method = "ltt-fixed-sequence-clopper-pearson" + ("" if n_groups is None else "-clustered")
    if g < 0:
        return ConformalResult(
            1.0, False, 1.0, 0.0, alpha, delta, int(conf.size), method, n_groups, None
        )
    g = max(g, int(np.searchsorted(_GRID, floor - 1e-9)))
    weights = _share_weights(wrong, share)
    row_weight = np.where(wrong == 1, weights[0], weights[1])
    answered = conf >= _GRID[g]
    return ConformalResult(
        threshold=float(_GRID[g]),
        feasible=True,
        risk_upper_bound=float(upper[g]),
        coverage=float(row_weight[answered].sum() / row_weight.sum()),
        alpha=alpha,
        delta=delta,
        n_calibration=int(conf.size),
        method=method,
        n_groups=n_groups,
        design_effect=None if n_groups is None else round(float(deff[g]), 4),
    )


def _share_weights(wrong: npt.NDArray[np.int64], share: float) -> tuple[float, float]:
    """(w_wrong, w_right) that re-weight a sample to ``share`` unanswerable queries."""
    pi_cal = float(wrong.sum()) / wrong.size
    return share / pi_cal, (1.0 - share) / (1.0 - pi_cal)


def walk_at_share(
    conf: FloatArray,
    wrong: npt.NDArray[np.int64],
    group_index: npt.NDArray[np.intp] | None,
    share: float,
    alpha: float,
    delta: float,
) -> tuple[int, FloatArray, npt.NDArray[np.int64], FloatArray]:
    """The walk's stop (-1: none), the bounds, answered counts and design effects at ``share``."""
    weights = _share_weights(wrong, share)
    upper, n_answered, deff = risk_upper_bounds(conf, wrong, group_index, delta, weights=weights)
    n_right = int(wrong.size - wrong.sum())
    g = fixed_sequence_walk(
        upper, n_answered, n_right, alpha, delta=delta, down_weight=weights[0] / weights[1]
    )
    return g, upper, n_answered, deff


class KindCounts:
    """A sample of label-pure kinds of query, re-weighted kind by kind without a pass
    over its rows (:mod:`.near_miss` tabulates 380 mixes of three kinds).

    Each kind's answered count per grid threshold and group is taken once;
    :meth:`bounds` is then :func:`~ragsift.confidence.conformal.risk_upper_bounds`
    with every query weighing its kind's weight. The binomial size is the
    variance-matched size of the weighted ratio R = S_wrong / S,
    ``S / ((1 - R) v + R w_right)`` with ``v`` the weighted mean weight of the
    wrong answers (``sum w^2 / sum w`` over them; over every wrong query where none
    is answered). With one weight for every wrong kind it is ADR 013's
    ``(sum w)^2 / (w_wrong * w_right * n)``.

    Args:
        conf: the confidences.
        kind: each query's kind, 0 .. len(wrong) - 1.
        wrong: whether each kind answers without relevant context; the right kinds
            must be given one weight.
        group_index: dense group numbers (the grouped bound), or None.
    """

    def __init__(
        self,
        conf: FloatArray,
        kind: npt.NDArray[np.intp],
        wrong: tuple[bool, ...],
        group_index: npt.NDArray[np.intp] | None,
    ) -> None:
        self.wrong = np.asarray(wrong, dtype=bool)
        group = np.zeros(conf.size, np.intp) if group_index is None else group_index
        n_groups = max(int(group.max(initial=-1)) + 1, 1)
        # Without groups the queries are independent: one column of totals, and the
        # per-question bound (``single``).
        self.single = group_index is None or int(np.bincount(group).max(initial=0)) <= 1
        order = np.argsort(-conf, kind="stable")
        self.n_answered = np.searchsorted(-conf[order], -_GRID, side="right").astype(np.int64)
        #: counts[c, g, k]: queries of kind c in group k answered at grid threshold g.
        self.counts = np.zeros((len(wrong), _GRID.size, n_groups))
        answered = conf[None, :] >= _GRID[:, None]
        for c in range(len(wrong)):
            mine = kind == c
            for g_idx in range(_GRID.size):
                self.counts[c, g_idx] = np.bincount(
                    group[mine & answered[g_idx]], minlength=n_groups
                )
        self.sizes = np.bincount(kind, minlength=len(wrong)).astype(np.float64)

    def bounds(
        self, weights: tuple[float, ...], delta: float
    ) -> tuple[FloatArray, npt.NDArray[np.int64]]:
        """Per grid threshold: the risk's upper bound and the answered count."""
        w = np.asarray(weights, dtype=np.float64)
        per_group_n = np.tensordot(w, self.counts, axes=1)
        per_group_e = np.tensordot(w * self.wrong, self.counts, axes=1)
        total_w = per_group_n.sum(axis=1)
        errors_w = per_group_e.sum(axis=1)
        squares_w = np.tensordot(w * w * self.wrong, self.counts.sum(axis=2), axes=1)
        wrong_mass = float((w * self.sizes)[self.wrong].sum())
        every_wrong = (
            float((w * w * self.sizes)[self.wrong].sum()) / wrong_mass if wrong_mass else 1.0
        )
        right = w[~self.wrong]
        w_right = float(right[0]) if right.size else 1.0
        answered_wrong = errors_w > 0
        v = np.where(
            answered_wrong, squares_w / np.where(answered_wrong, errors_w, 1.0), every_wrong
        )
        safe = np.where(total_w > 0, total_w, 1.0)
        risk = errors_w / safe
        n = np.where(total_w > 0, total_w / ((1.0 - risk) * v + risk * w_right), 0.0)
        upper, _ = design_effect_bound(
            per_group_n, per_group_e, n, self.n_answered, delta, single=self.single
        )
        return upper, self.n_answered
