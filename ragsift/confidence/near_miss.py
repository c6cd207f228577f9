"""The answer threshold at another share of near misses, read from the traffic (ADR 021).

A **near miss** is a question on the collection's subjects whose answer the
kept hits do not hold: the corpus lacks it, or retrieval missed it. Its hits
are on topic, so it scores like an answer, and the mix table (:mod:`.mix`),
whose unanswerable class is mostly questions about other subjects, cannot see
it: the two-class estimate counts near misses as answerable. The shipped
calibrations assume a fixed share of them (ADR 020: one on-topic question in
ten has no answer in the corpus). Where a collection's traffic holds more,
that bar lets them through: with half of SQuAD's paragraphs left out, risk
0.256 against alpha = 0.1.

This module lets the bar follow the share that shows:

* **A threshold per (near-miss share, out-of-scope share)**, certified at fit
  time (:func:`fit_near_miss_table`). The conformal sample has three kinds of
  query: in-scope with the relevant context kept (answerable), in-scope
  without it (near misses: the fit's holes and retrieval's misses), and out of
  scope. Each kind is re-weighted to the tabulated shares and the same
  fixed-sequence walk and (grouped) bound run on the weighted risk, at the
  weighted sample's variance-matched size
  (:class:`~ragsift.confidence.reweight.KindCounts`). Thresholds are made
  non-decreasing in both shares; 1.0 where none is certified. Stored as
  ``conformal.near_miss`` with the three kinds' confidence histograms.
* **The shares from the traffic** (:func:`estimate_near_miss`): the
  maximum-likelihood mixture of the three histograms behind a scope's decayed
  histogram (the same one :class:`~.mix_monitor.MixMonitor` keeps), with the
  near-miss share's one-sided 97.5% profile-likelihood lower bound.
* **Raise only, on evidence** (:func:`near_miss_threshold`): when the lower
  bound exceeds the sample's own near-miss share (ADR 033; in a scope's first
  :data:`YOUNG_WEIGHT` queries, the estimate: ADR 037), the bar becomes the one
  certified at the estimated shares, if higher. Never lower: near misses that
  score like answers make the estimate low, and a low estimate must not lower it.
  The confidence is reported as before; a query refused only by this bar is told
  why (``near_miss_mix`` advice). With ``edges`` (a feedback re-fit's carried
  table, ADR 039) the reading bins the served confidence at them.
* **Lower, never under the near misses that show** (:func:`~.served.lowered_to`, ADR 030,
  ADR 032): a scope whose traffic is clearly more answerable than the sample has
  its bar lowered by the mix table and is reported at that share, but never under
  this table's bar at the near-miss and out-of-scope shares this reading estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator
from pydantic import SerializerFunctionWrapHandler as Dumper

from ragsift.confidence.conformal import _GRID, _group_index, fixed_sequence_walk
from ragsift.confidence.mix import (
    _MAX_CLASS_SIZE,
    _histogram,
    _shares,
    _smoothed,
    check_edges,
    check_histograms,
    first_at_or_over,
)
from ragsift.confidence.reweight import KindCounts

__all__ = [
    "MIN_NEAR_MISSES",
    "NEAR_MISS_LOWER_DROP",
    "NEAR_MISS_SHARES",
    "OUT_OF_SCOPE_SHARES",
    "YOUNG_WEIGHT",
    "NearMissReading",
    "NearMissTable",
    "estimate_near_miss",
    "fit_near_miss_table",
    "near_miss_log_mixture",
    "near_miss_threshold",
]

FloatArray = npt.NDArray[np.float64]

#: Tabulated shares of near misses among all queries: 0.02 ... 0.40 (a bar past
#: 0.40 answers nothing on any fit measured).
NEAR_MISS_SHARES: Final = tuple(round(0.02 * i, 2) for i in range(1, 21))
#: Tabulated shares of out-of-scope queries: 0 ... 0.95.
OUT_OF_SCOPE_SHARES: Final = tuple(round(0.05 * i, 2) for i in range(20))
#: The near-miss share's lower bound is one-sided 97.5% (half the chi-square(1)
#: quantile at 0.95): the bar moves once it is over the sample's share (ADR 033,
#: ADR 036). Readings are refreshed as a scope's queries come, from its 30th on.
#: Over 50 arrival orders of SQuAD with a third of its paragraphs left out, the
#: 99% bound cleared so late that 27 orders had risk over alpha + 0.03; at 97.5%, 3
#: did; at 95%, streams like the sample were raised by chance more often.
NEAR_MISS_LOWER_DROP: Final = 3.8415 / 2
#: A reading from fewer queries (decayed weight) than this is young: its bound is too
#: wide to clear the sample's share in time, so the bar rises on its estimate instead
#: (ADR 037). Over 50 arrival orders of SQuAD with half its paragraphs left out,
#: orders over alpha + 0.03 fell from 10 to 4; clean SQuAD's answers did not move.
YOUNG_WEIGHT: Final = 200.0
#: In-scope queries without relevant context a sample needs for a table: fewer
#: tell nothing about how near misses score.
MIN_NEAR_MISSES: Final = 20
#: Tabulated shares a stored table may hold along either axis; past it, the file was
#: not fitted (the fit writes 20 each).
_MAX_SHARES: Final = 100

_Unit = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
_Size = Annotated[int, Field(gt=0, le=_MAX_CLASS_SIZE)]


class NearMissTable(BaseModel):
    """What the artifact stores to raise its bar where near misses show.

    Attributes:
        near_miss_share, out_of_scope_share: the conformal sample's shares.
        near_miss_shares, out_of_scope_shares: the tabulated shares.
        thresholds: one row per near-miss share, one column per out-of-scope
            share; non-decreasing along both; 1.0 where none was certified.
        answerable, near_miss, out_of_scope: each kind's confidence histogram
            (:data:`~.mix.HISTOGRAM_BINS` bins over [0, 1]), as shares of the kind.
        n_answerable, n_near_miss, n_out_of_scope: the kinds' sizes.
        edges: where the histograms' bins start and end on the served confidence
            (ADR 039: a feedback re-map's images of the base's); None: equal bins.
        binned_on: the calibration version whose served confidence the histograms'
            bins are equal bins of (a feedback re-fit's base, ADR 040); None: this
            artifact's own. A scope's reading is carried across a version change
            when the bins are on the same scale (:class:`~.mix_monitor.MixMonitor`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    near_miss_share: float = Field(gt=0, lt=1)
    out_of_scope_share: float = Field(gt=0, lt=1)
    near_miss_shares: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field(
        max_length=_MAX_SHARES
    )
    out_of_scope_shares: tuple[Annotated[float, Field(ge=0, lt=1)], ...] = Field(
        max_length=_MAX_SHARES
    )
    thresholds: tuple[tuple[_Unit, ...], ...]
    answerable: tuple[_Unit, ...]
    near_miss: tuple[_Unit, ...]
    out_of_scope: tuple[_Unit, ...]
    n_answerable: _Size
    n_near_miss: _Size
    n_out_of_scope: _Size
    edges: tuple[_Unit, ...] | None = None
    binned_on: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,128}$")

    @model_validator(mode="after")
    def _check(self) -> NearMissTable:
        check_edges(self.edges)
        for name in ("near_miss_shares", "out_of_scope_shares"):
            shares = getattr(self, name)
            if not shares or (np.diff(shares) <= 0).any():
                raise ValueError(f"{name} must be increasing and not empty")
        if len(self.thresholds) != len(self.near_miss_shares) or any(
            len(row) != len(self.out_of_scope_shares) for row in self.thresholds
        ):
            raise ValueError(
                "thresholds must give one row per near-miss share, one value per column"
            )
        grid = np.asarray(self.thresholds)
        if (np.diff(grid, axis=0) < 0).any() or (np.diff(grid, axis=1) < 0).any():
            raise ValueError("thresholds must not decrease with either share")
        check_histograms(self, ("answerable", "near_miss", "out_of_scope"))
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: Dumper) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for name in ("edges", "binned_on"):  # unset: written (and hashed) as before ADR 039/040
            if out.get(name) is None:
                out.pop(name, None)
        return out

    def scales(self, version: str) -> tuple[str, str | None]:
        """Whose served confidence a scope's histograms are on, under calibration
        ``version`` holding this table (ADR 040): the equal-bin one's, and the one at
        ``edges`` (None: kept only with edges, and unknown without ``binned_on``)."""
        if self.edges is None:
            return self.binned_on or version, None
        return version, self.binned_on

    def threshold_at(self, near_miss: float, out_of_scope: float) -> float:
        """The threshold at the first tabulated shares >= these (1.0 past the near-miss ones)."""
        i = first_at_or_over(self.near_miss_shares, near_miss)
        if i >= len(self.near_miss_shares):
            return 1.0
        columns = self.out_of_scope_shares
        return self.thresholds[i][min(first_at_or_over(columns, out_of_scope), len(columns) - 1)]

    def floored(self, floor: NearMissTable | None) -> NearMissTable:
        """This table, never under ``floor``'s thresholds (a table on the same grid)."""
        if floor is None or (floor.near_miss_shares, floor.out_of_scope_shares) != (
            self.near_miss_shares,
            self.out_of_scope_shares,
        ):
            return self
        rows = tuple(
            tuple(map(max, mine, theirs))
            for mine, theirs in zip(self.thresholds, floor.thresholds, strict=True)
        )
        return self.model_copy(update={"thresholds": rows})


@dataclass(frozen=True, slots=True)
class NearMissReading:
    """A scope's estimated near-miss share, its one-sided 97.5% lower bound, and the
    out-of-scope share estimated with it. ``young``: read from fewer than
    :data:`YOUNG_WEIGHT` queries, so the bar rises on the estimate (ADR 037)."""

    share: float
    lower: float
    out_of_scope: float
    young: bool = False


def fit_near_miss_table(
    confidence: npt.ArrayLike,
    labels: npt.ArrayLike,
    in_scope: npt.ArrayLike,
    *,
    alpha: float,
    delta: float,
    groups: npt.ArrayLike | None = None,
) -> NearMissTable | None:
    """The certified threshold at every tabulated (near-miss, out-of-scope) share.

    Args:
        confidence, labels, alpha, delta, groups: the conformal sample, as for
            :func:`~ragsift.confidence.mix.fit_mix_table`.
        in_scope: whether each query was asked about the corpus's subjects.

    Returns:
        None when the sample lacks a kind: fewer than :data:`MIN_NEAR_MISSES`
        near misses, or no answerable or no out-of-scope query.
    """
    conf = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(labels) != 0
    inside = np.asarray(in_scope, dtype=bool)
    kinds = (right, inside & ~right, ~inside & ~right)
    sizes = [int(k.sum()) for k in kinds]
    if sizes[1] < MIN_NEAR_MISSES or sizes[0] == 0 or sizes[2] == 0:
        return None
    kind = np.select(kinds, [0, 1, 2]).astype(np.intp)
    counts = KindCounts(conf, kind, (False, True, True), _group_index(groups, conf.shape))
    sample = [n / conf.size for n in sizes]
    rows = []
    for near in NEAR_MISS_SHARES:
        row = []
        for out in OUT_OF_SCOPE_SHARES:
            answerable = 1.0 - near - out
            if answerable < 0.01:
                row.append(1.0)
                continue
            weights = tuple(s / c for s, c in zip((answerable, near, out), sample, strict=True))
            upper, n_answered = counts.bounds(weights, delta)
            down = max(weights[1], weights[2]) / weights[0]
            g = fixed_sequence_walk(
                upper, n_answered, sizes[0], alpha, delta=delta, down_weight=down
            )
            row.append(float(_GRID[g]) if g >= 0 else 1.0)
        rows.append(row)
    # A higher share of either kind can only need a higher bar.
    grid = np.maximum.accumulate(np.maximum.accumulate(np.asarray(rows), axis=0), axis=1)
    return NearMissTable(
        near_miss_share=round(sample[1], 4),
        out_of_scope_share=round(sample[2], 4),
        near_miss_shares=NEAR_MISS_SHARES,
        out_of_scope_shares=OUT_OF_SCOPE_SHARES,
        thresholds=tuple(tuple(float(t) for t in row) for row in grid),
        answerable=_shares(_histogram(conf[kinds[0]])),
        near_miss=_shares(_histogram(conf[kinds[1]])),
        out_of_scope=_shares(_histogram(conf[kinds[2]])),
        n_answerable=sizes[0],
        n_near_miss=sizes[1],
        n_out_of_scope=sizes[2],
    )


#: Candidate (answerable, near miss, out of scope) shares for the estimate: near
#: misses 0 ... 0.6 by 0.01, out of scope 0 ... 1 by 0.02.
_CANDIDATES: Final = np.asarray(
    [
        (1.0 - near - out, near, out)
        for near in np.round(np.arange(0.0, 0.605, 0.01), 2)
        for out in np.round(np.arange(0.0, 1.001, 0.02), 2)
        if near + out <= 1.0 + 1e-9
    ]
).clip(0.0, 1.0)


def near_miss_log_mixture(table: NearMissTable) -> FloatArray:
    """log P(bin | shares) for every candidate of :func:`estimate_near_miss` (rows)."""
    parts = np.stack(
        [
            _smoothed(table.answerable, table.n_answerable),
            _smoothed(table.near_miss, table.n_near_miss),
            _smoothed(table.out_of_scope, table.n_out_of_scope),
        ]
    )
    return np.asarray(np.log(_CANDIDATES @ parts), dtype=np.float64)


def estimate_near_miss(log_mixture: FloatArray, histogram: FloatArray) -> NearMissReading:
    """The maximum-likelihood shares behind ``histogram`` (counts in the table's bins).

    The lower bound is the least near-miss share whose profile likelihood (the
    best over out-of-scope shares) is within :data:`NEAR_MISS_LOWER_DROP` (one-sided
    97.5%) of the maximum. The reading is ``young`` while the histogram weighs less
    than :data:`YOUNG_WEIGHT`.
    """
    loglik = log_mixture @ histogram
    best = int(np.argmax(loglik))
    plausible = loglik >= loglik[best] - NEAR_MISS_LOWER_DROP
    return NearMissReading(
        share=float(_CANDIDATES[best, 1]),
        lower=float(_CANDIDATES[plausible, 1].min()),
        out_of_scope=float(_CANDIDATES[best, 2]),
        young=float(np.sum(histogram)) < YOUNG_WEIGHT,
    )


def near_miss_threshold(table: NearMissTable, reading: NearMissReading | None) -> float | None:
    """The bar the reading calls for, or None while it shows no more near misses than
    the sample held: its one-sided 97.5% lower bound at or under the sample's share,
    or, while the reading is young (ADR 037), its estimate."""
    if reading is None:
        return None
    evidence = reading.share if reading.young else reading.lower
    if evidence <= table.near_miss_share:
        return None
    return table.threshold_at(reading.share, reading.out_of_scope)
