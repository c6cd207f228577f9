"""The base's near-miss table carried through a feedback re-map (ADR 039).

A full feedback re-fit (:func:`~.refit.refit_calibration`) re-maps the base's
probability: with ``z`` the base model's logit, the base serves
``R(sigmoid(z))`` (``R`` its collection's probe re-map, ADR 015, or nothing) and
the re-fit serves ``sigmoid(a + t * z)``. Labels cannot tell a near miss from an
off-topic question (both say "not relevant"), so the re-fit cannot fit a
near-miss table (ADR 021) of its own. Without one, a scope whose re-fit is in
force no longer raises its bar when near misses appear, for example after
documents are deleted.

Both maps are monotone in ``z``, so the base's table can be moved onto the
re-fit's scale:

* **Bars.** A base bar answers the queries whose base confidence is at least it,
  that is whose logit is at least some ``z*``; in the re-fit's terms that is
  ``sigmoid(a + t * z*)``, rounded up to the grid, and never under the re-fit's
  own bar (the labels certified that one; the table raises, it never lowers).
* **Histograms.** Each base bin is the logits between two points; its share goes
  to the re-fit's bins those logits map onto, spread evenly over the mapped
  interval.
* **Trigger.** The base's bar assumed its sample's share of near misses. The
  re-fit's bar was certified on the scope's own labelled traffic, with whatever
  near misses it held, so the carried bar rises once the scope's reading shows
  more than that traffic held: the share the carried table reads in the labelled
  results' confidences, bounded from above (:data:`HELD_UPPER_DROP`), in place of
  the base's sample share. Labels from traffic with fewer near misses than the
  base's sample (a corpus that answered its questions) make it more watchful
  than the base; labels from traffic with more make it less.

A scope whose reading is on the re-fit's scale reads fewer near misses than the
same traffic on the base's (the bins are the re-fit's, and a bin's share is
spread evenly over the re-fit's bins it maps onto): a quarter of SQuAD's
paragraphs left out read 0.06 there against 0.09 on the base's scale.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence.mix import HISTOGRAM_BINS, _histogram
from ragsift.confidence.near_miss import (
    _CANDIDATES,
    NearMissTable,
    near_miss_log_mixture,
)
from ragsift.confidence.probes import ProbeRemap

__all__ = ["HELD_UPPER_DROP", "carried_near_miss"]

FloatArray = npt.NDArray[np.float64]

#: Logits the maps are tabulated over: wider than any confidence the grid tells
#: apart (sigmoid(+-30) is 1e-13 from 0 or 1), fine enough that a base bin's edge
#: falls within 0.001 of a logit.
_LOGITS: Final = np.linspace(-30.0, 30.0, 60_001)
#: The labelled traffic's near-miss share is bounded from above at one-sided 84%
#: (about one standard error: half the chi-square(1) quantile at 0.68): the bar rises
#: once the scope's reading clears that. Ten draws of 500 labels from clean SQuAD,
#: served with a third of its paragraphs left out: at the labels' estimate 6 draws
#: had risk over alpha, at this bound 7, at the 97.5% bound 10 (with no table, 10);
#: on reworded questions labelled and served alike, the estimate cost 16% of the
#: answers to raises by chance, this bound 2%, the 97.5% bound none (ADR 039).
HELD_UPPER_DROP: Final = 0.5
#: Within this much of a 0.01 step (1e-6 of confidence), a carried bar is on the step:
#: interpolating between the tabulated logits errs by about 3e-8.
_ROUNDING: Final = 1e-4


def carried_near_miss(
    table: NearMissTable | None,
    remap: ProbeRemap | None,
    temperature: float,
    shift: float,
    bar: float,
    labelled: npt.ArrayLike,
) -> NearMissTable | None:
    """``table`` (the base's, on its served scale) on the re-fit's scale (module doc).

    Args:
        table: the base's near-miss table, or None (then None).
        remap: the base's probe re-map, or None.
        temperature, shift: the re-fit's ``t`` and ``a``. With ``t = 0`` every query
            gets one confidence and no table can read a mix in it: None.
        bar: the re-fit's certified threshold; every carried bar is at least it.
        labelled: the labelled results' confidences as the re-fit reports them.
    """
    if table is None or temperature <= 0.0:
        return None
    base = 1.0 / (1.0 + np.exp(-_LOGITS))
    if remap is not None:
        base = remap.apply(base)
    base = np.maximum.accumulate(base)  # non-decreasing already; exact ties kept

    def mapped(values: npt.ArrayLike) -> FloatArray:
        """The re-fit's confidence at the least logit whose base confidence reaches
        each value (interpolated between the tabulated logits); 1.0 where none does."""
        v = np.asarray(values, dtype=np.float64)
        i = np.searchsorted(base, v, side="left")
        out = np.ones(v.shape)
        inside = i < base.size
        j = i[inside]
        prev = np.maximum(j - 1, 0)
        rise = base[j] - base[prev]
        step = np.where(rise > 0, (v[inside] - base[prev]) / np.where(rise > 0, rise, 1.0), 1.0)
        z = _LOGITS[prev] + step * (_LOGITS[j] - _LOGITS[prev])
        out[inside] = 1.0 / (1.0 + np.exp(-(shift + temperature * z)))
        return out

    def carried(threshold: float) -> float:
        if threshold >= 1.0:
            return 1.0
        value = float(np.ceil(mapped([threshold])[0] * 100 - _ROUNDING) / 100)
        return min(max(value, bar), 1.0) + 0.0  # not -0.0

    rows = tuple(tuple(carried(t) for t in row) for row in table.thresholds)
    ends = mapped(np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1))
    ends[0], ends[-1] = 0.0, 1.0
    moved = table.model_copy(
        update={
            "thresholds": rows,
            "answerable": _rebinned(table.answerable, ends),
            "near_miss": _rebinned(table.near_miss, ends),
            "out_of_scope": _rebinned(table.out_of_scope, ends),
        }
    )
    share = _held(moved, np.asarray(labelled, dtype=np.float64))
    return NearMissTable.model_validate({**moved.model_dump(), "near_miss_share": share})


def _held(table: NearMissTable, labelled: FloatArray) -> float:
    """The near misses the labelled results held, with a margin for their number: the
    one-sided 84% upper bound of their share (profile likelihood, as the traffic's
    reading bounds its own from below), at least 0.01."""
    loglik = near_miss_log_mixture(table) @ _histogram(labelled)
    plausible = loglik >= loglik.max() - HELD_UPPER_DROP
    return max(float(_CANDIDATES[plausible, 1].max()), 0.01)


def _rebinned(shares: tuple[float, ...], ends: FloatArray) -> tuple[float, ...]:
    """Base bin ``k``'s share spread evenly over ``[ends[k], ends[k + 1])`` on the
    re-fit's scale, counted in its bins (a point interval goes to the bin holding it)."""
    out = np.zeros(HISTOGRAM_BINS)
    width = 1.0 / HISTOGRAM_BINS
    left = np.arange(HISTOGRAM_BINS) * width
    for share, lo, hi in zip(shares, ends[:-1], ends[1:], strict=True):
        if share == 0.0:
            continue
        if hi - lo <= 1e-12:
            out[min(int(lo / width), HISTOGRAM_BINS - 1)] += share
            continue
        overlap = np.clip(np.minimum(left + width, hi) - np.maximum(left, lo), 0.0, None)
        out += share * overlap / (hi - lo)
    return tuple(round(float(v), 4) for v in out / out.sum())
