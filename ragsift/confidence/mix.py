"""The answer threshold at another mix of answerable and unanswerable queries (label shift).

The conformal threshold (:mod:`.conformal`) certifies the selective risk

    R(t) = P(no relevant context | confidence >= t)

for queries drawn like its calibration sample, *in that sample's mix*. Risk is
a ratio, so it moves with the mix even when nothing else does: with
``pi`` the share of queries whose context cannot hold the answer,

    R_pi(t) = pi F(t) / (pi F(t) + (1 - pi) T(t)),

where F and T are the shares of unanswerable and answerable queries answered at
t. A threshold certified on SQuAD's 2 : 1 mix let half its answers through
without context when unanswerable questions outnumbered answerable ones forty
to one (docs/evaluation.md). Two things fix that here:

* **A threshold per mix** (:func:`fit_mix_table`, at fit time). The same
  fixed-sequence walk and design-effect bound as the conformal threshold, with
  the calibration queries re-weighted to the mix ``pi`` (unanswerable ones by
  ``pi / pi_cal``, answerable ones by ``(1 - pi) / (1 - pi_cal)``) and the
  binomial size taken as the weighted sample's effective one. At ``pi_cal``
  every weight is 1 and it is the conformal threshold exactly. The artifact
  stores the threshold for ``pi`` = 0.01 ... 0.99 (``conformal.mix``), made
  non-decreasing in ``pi``; 1.0 where no threshold is certified.
* **The mix of the traffic, without labels** (:func:`~.mix_estimate.estimate_unanswerable_share`).
  The artifact also stores the histograms of the calibrated confidence of
  its answerable and unanswerable calibration queries. Traffic's histogram is a
  mixture of the two; the maximum-likelihood share (Saerens et al., 2002, for
  label shift) is the estimate, and the likelihood-ratio interval gives its
  one-sided 95% lower bound. :class:`~.mix_monitor.MixMonitor` keeps a decayed histogram
  per (tenant, collection) and reads both once it holds ``min_samples``.

:func:`mix_threshold` decides how far ``auto`` (the default) raises the bar,
and it does only on evidence: when the share's *lower bound* exceeds the calibration's
share by more than :data:`DEAD_BAND`, the answer threshold becomes the one
certified at the next tabulated share above the estimate, if that is higher. A
young scope's wide interval keeps its bar where the calibration put it unless
its first queries already show a lopsided mix (thirty queries that all look
unanswerable do); the estimate, not the bound, sets how far it rises, because
the bound's bar fell short on SQuAD at 1 : 10 (risk 0.134 against 0.1). The
estimate assumes that the confidence of answerable and of unanswerable queries
is distributed as in the calibration sample, and the way that fails on a new
corpus (unanswerable queries scoring like answerable ones) makes the estimated
share too low, never too high. So the estimate alone never lowers the bar: that
takes its *upper* bound under the calibration's share by more than the band, and
the bar falls no further than the near-miss table's at the three-kind reading
(:func:`~ragsift.confidence.served.served_bar`, ADR 030, ADR 032). An operator who
knows the share can declare it (``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE``): then
its tabulated threshold is used, lower or higher. What this measured on data the
fit did not see is in docs/evaluation.md.

Where the bar moves, the confidence is reported at the same share
(:func:`at_share`: Bayes' rule for a change of prior; ADR 016).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Final, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragsift.confidence.conformal import _GRID, _group_index
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.reweight import walk_at_share

if TYPE_CHECKING:
    from ragsift.confidence.near_miss import NearMissReading

__all__ = [
    "DEAD_BAND",
    "HISTOGRAM_BINS",
    "MIX_SHARES",
    "MixReading",
    "MixTable",
    "at_share",
    "first_at_or_over",
    "fit_mix_table",
    "mix_threshold",
    "reported_share",
]

FloatArray = npt.NDArray[np.float64]

#: The tabulated shares of unanswerable queries: 0.01 ... 0.99.
MIX_SHARES: Final = tuple(round(0.01 * i, 2) for i in range(1, 100))
#: Bins of the confidence histograms (0.05 wide over [0, 1]).
HISTOGRAM_BINS: Final = 20
#: ``auto`` keeps the certified threshold while the estimated share is within this
#: of the calibration's: the estimate's own noise over a window of ~1,000 queries
#: (about +-0.03 on SQuAD halves) must not cost answers on traffic like the sample.
DEAD_BAND: Final = 0.05
#: Added to every bin of the class histograms: an empty bin must not make a
#: traffic query impossible under one class.
_SMOOTHING: Final = 0.5
UnanswerableShare = float | Literal["auto", "off"]
#: A finite number in [0, 1] (a threshold, a histogram share), and one in (0, 1).
_Unit = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
_OpenUnit = Annotated[float, Field(gt=0.0, lt=1.0, allow_inf_nan=False)]
#: A class size no calibration sample comes near; past it, the file was not fitted.
_MAX_CLASS_SIZE: Final = 10**9
_SHARE_SUM_TOLERANCE: Final = 0.01


class MixTable(BaseModel):
    """What the artifact stores to re-certify its threshold at another mix.

    Attributes:
        unanswerable_share: the calibration sample's share of unanswerable queries.
        shares: the tabulated shares (:data:`MIX_SHARES`).
        thresholds: the certified answer threshold at each share, non-decreasing;
            1.0 where none was certified (answer nothing).
        answerable, unanswerable: the calibration queries' confidence histograms
            (:data:`HISTOGRAM_BINS` bins over [0, 1]) as shares of their class.
        n_answerable, n_unanswerable: the class sizes behind them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    unanswerable_share: float = Field(gt=0, lt=1)
    shares: tuple[_OpenUnit, ...]
    thresholds: tuple[_Unit, ...]
    answerable: tuple[_Unit, ...]
    unanswerable: tuple[_Unit, ...]
    n_answerable: int = Field(gt=0, le=_MAX_CLASS_SIZE)
    n_unanswerable: int = Field(gt=0, le=_MAX_CLASS_SIZE)

    @model_validator(mode="after")
    def _check(self) -> MixTable:
        if len(self.thresholds) != len(self.shares) or not self.shares:
            raise ValueError("thresholds must give one value per share")
        if any(b <= a for a, b in zip(self.shares, self.shares[1:], strict=False)):
            raise ValueError("shares must be increasing")
        if any(b < a for a, b in zip(self.thresholds, self.thresholds[1:], strict=False)):
            raise ValueError("thresholds must not decrease with the share")
        check_histograms(self, ("answerable", "unanswerable"))
        return self

    def threshold_at(self, share: float) -> float:
        """The threshold certified at the first tabulated share >= ``share`` (1.0 past them)."""
        i = first_at_or_over(self.shares, share)
        return self.thresholds[i] if i < len(self.thresholds) else 1.0


def first_at_or_over(shares: Sequence[float], share: float) -> int:
    """Where ``share`` falls among sorted ``shares``: the first at or over it, within
    1e-9, as ``np.searchsorted`` puts it (NaN last). A table's handful of shares is
    searched on every query: bisecting them costs less than making them an array."""
    return bisect.bisect_left(shares, share - 1e-9) if share == share else len(shares)


def check_edges(edges: tuple[float, ...] | None) -> None:
    """``edges`` (None: equal bins) are a histogram's bins on the served confidence:
    :data:`HISTOGRAM_BINS` + 1 of them, rising from 0 to 1 (ADR 039).

    Raises:
        ValueError: they are not.
    """
    if edges is not None and (
        len(edges) != HISTOGRAM_BINS + 1
        or (edges[0], edges[-1]) != (0.0, 1.0)
        or any(b < a for a, b in itertools.pairwise(edges))
    ):
        raise ValueError(f"edges must be {HISTOGRAM_BINS + 1} values rising from 0 to 1")


def check_histograms(table: BaseModel, names: tuple[str, ...]) -> None:
    """Each named field of ``table`` is a class's confidence histogram: shares of
    :data:`HISTOGRAM_BINS` bins summing to 1 (within their 4-decimal rounding).

    Raises:
        ValueError: one that is not, by name.
    """
    for name in names:
        shares = getattr(table, name)
        if len(shares) != HISTOGRAM_BINS:
            raise ValueError(f"{name} must have {HISTOGRAM_BINS} bins")
        if abs(sum(shares) - 1.0) > _SHARE_SUM_TOLERANCE:
            raise ValueError(f"{name} must be shares of one class (sum 1), got {sum(shares)}")


def at_share(confidence: float, calibration_share: float, share: float) -> float:
    """A probability calibrated at ``calibration_share`` unanswerable, at ``share`` instead.

    Bayes' rule for a change of prior: ``w1 p / (w1 p + w0 (1 - p))`` with ``w1 = (1 -
    pi) / (1 - pi_cal)``, ``w0 = pi / pi_cal``. Monotone in ``p``, so a comparison with
    a bar mapped the same way keeps its outcome; 0 and 1 stay.

    Raises:
        ConfidenceError: a share outside (0, 1), or a confidence outside [0, 1].
    """
    if not (0.0 < calibration_share < 1.0 and 0.0 < share < 1.0):
        raise ConfidenceError(
            f"shares must be in (0, 1), got {calibration_share} (calibration) and {share}"
        )
    if not 0.0 <= confidence <= 1.0:
        raise ConfidenceError(f"confidence must be in [0, 1], got {confidence}")
    answerable = confidence * (1.0 - share) / (1.0 - calibration_share)
    unanswerable = (1.0 - confidence) * share / calibration_share
    return answerable / (answerable + unanswerable)


def reported_share(calibration_share: float, share: float) -> float | None:
    """The share a confidence is reported at once ``share`` moved its bar: within the
    table's (an estimate of 1.0 is reported at 0.99, as its bar is); None at the sample's."""
    share = min(max(share, MIX_SHARES[0]), MIX_SHARES[-1])
    return None if share == calibration_share else share


def _histogram(confidence: FloatArray, edges: tuple[float, ...] | None = None) -> FloatArray:
    """Counts of ``confidence`` in :data:`HISTOGRAM_BINS` equal bins over [0, 1], or in
    the bins between ``edges`` (:func:`check_edges`)."""
    if edges is None:
        bins = np.clip((np.nan_to_num(confidence) * HISTOGRAM_BINS).astype(np.int64), 0, None)
    else:
        bins = np.searchsorted(np.asarray(edges[1:-1]), np.nan_to_num(confidence), "right")
    return np.bincount(np.minimum(bins, HISTOGRAM_BINS - 1), minlength=HISTOGRAM_BINS).astype(
        np.float64
    )


def fit_mix_table(
    confidence: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    alpha: float,
    delta: float,
    groups: npt.ArrayLike | None = None,
) -> MixTable | None:
    """The certified threshold at every tabulated mix, from the conformal sample.

    Args:
        confidence, labels, alpha, delta, groups: as for
            :func:`~ragsift.confidence.conformal.conformal_threshold` (the same sample).

    Returns:
        None when the sample holds only one kind of query (no mix to re-weight).
    """
    conf = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(labels)
    wrong = (y == 0).astype(np.int64)
    n_wrong, n_right = int(wrong.sum()), int(wrong.size - wrong.sum())
    if n_wrong == 0 or n_right == 0:
        return None
    group_index = _group_index(groups, conf.shape)
    thresholds: list[float] = []
    for share in MIX_SHARES:
        g, _, _, _ = walk_at_share(conf, wrong, group_index, share, alpha, delta)
        thresholds.append(float(_GRID[g]) if g >= 0 else 1.0)
    # A higher share can only need a higher bar; the walk's noise must not say otherwise.
    monotone = np.maximum.accumulate(np.asarray(thresholds))
    return MixTable(
        unanswerable_share=round(n_wrong / wrong.size, 4),
        shares=MIX_SHARES,
        thresholds=tuple(float(t) for t in monotone),
        answerable=_shares(_histogram(conf[wrong == 0])),
        unanswerable=_shares(_histogram(conf[wrong == 1])),
        n_answerable=n_right,
        n_unanswerable=n_wrong,
    )


def _shares(counts: FloatArray) -> tuple[float, ...]:
    return tuple(round(float(v), 4) for v in counts / counts.sum())


def _smoothed(shares: tuple[float, ...], n: int) -> FloatArray:
    counts = np.asarray(shares, dtype=np.float64) * n + _SMOOTHING
    return np.asarray(counts / counts.sum(), dtype=np.float64)


def mix_threshold(
    base: float, table: MixTable | None, mode: UnanswerableShare, estimate: MixReading | None
) -> float:
    """The answer threshold for a scope (see module doc).

    Args:
        base: the certified (or configured) threshold.
        table: the artifact's mix table; None keeps ``base``.
        mode: ``"auto"`` (raise the bar to the estimate's when its lower bound shows
            a shift), ``"off"``, or a declared share.
        estimate: the scope's reading, None while too few queries were seen.
    """
    if table is None or mode == "off":
        return base
    if not isinstance(mode, str):
        return table.threshold_at(mode)
    if estimate is None:
        return base
    share, lower = estimate.raising()
    if lower <= table.unanswerable_share + DEAD_BAND:
        return base
    return max(base, table.threshold_at(share))


@dataclass(frozen=True, slots=True)
class MixReading:
    """An estimated share of unanswerable queries and its one-sided 95% lower bound;
    with a near-miss table, the three-kind reading too (:mod:`.near_miss`)."""

    share: float
    lower: float
    near_miss: NearMissReading | None = None
    #: The one-sided 95% upper bound (ADR 030); 1.0 where none was read.
    upper: float = 1.0
    #: False: only the near misses were read, from a histogram carried over a version
    #: change (ADR 040); share is the calibration's and the bounds 0 and 1, so the
    #: two-kind mix moves nothing.
    mixed: bool = True
    #: The share and its lower bound read on the queries at 0.05 and over
    #: (:data:`~.mix_estimate.ABOVE_BIN`), as the share of all queries they are worth
    #: in the calibration's terms (ADR 045): what the raise reads. None: not read
    #: (then the raise reads share and lower).
    above: tuple[float, float] | None = None

    def raising(self) -> tuple[float, float]:
        """The share the raise moves the bar to, and the lower bound that must clear
        the calibration's: read above :data:`~.mix_estimate.ABOVE_BIN` where that was read."""
        return self.above if self.above is not None else (self.share, self.lower)
