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
* **Histograms.** Each base bin is the logits between two points, which the
  re-fit serves between two others: the table keeps the base's histograms and
  records those points as its bins' ``edges``, and the scope's reading bins the
  served confidence at them (:class:`~.mix_monitor.MixMonitor`). So it reads the
  traffic as the base's table would, on the base's bins.
* **Trigger.** The base's bar assumed its sample's share of near misses. The
  re-fit's bar was certified on the scope's own labelled traffic, with whatever
  near misses it held, so the carried bar rises once the scope's reading shows
  more than that traffic held: the share the carried table reads in the labelled
  results' confidences, bounded from above for their number (:data:`HELD_UPPER_DROP`),
  in place of the base's sample share.
  Labels from traffic with fewer near misses than the base's sample (a corpus
  that answered its questions) make it more watchful than the base; labels from
  traffic with more make it less.

Read on the re-fit's own equal bins instead (each base bin's share spread evenly
over those it maps onto), a quarter of SQuAD's paragraphs left out read 0.06
near misses where the base's bins read 0.11 (ADR 039).
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
#: (about one standard error: half the chi-square(1) quantile at 0.68), and the bar
#: rises once the scope's reading clears that. A reading passes a labels' estimate
#: that came out low often enough to cost what the labels bought back: on reworded
#: questions, 200 labels (50 draws) answered a median 0.102 at the estimate, 0.165
#: at this bound, 0.168 with no table. With a quarter of SQuAD's paragraphs left
#: out after the labels, the estimate served risk 0.098, this bound 0.123, no
#: table 0.153 (ADR 039).
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

    grid = np.asarray(table.thresholds, dtype=np.float64)
    # Up to the 0.01 grid, never under the re-fit's bar; none certified stays none.
    up = np.clip(np.ceil(mapped(grid) * 100 - _ROUNDING) / 100, bar, 1.0) + 0.0  # not -0.0
    rows = tuple(tuple(map(float, row)) for row in np.where(grid >= 1.0, 1.0, up))
    ends = mapped(np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1))
    ends[0], ends[-1] = 0.0, 1.0
    edges = tuple(float(e) for e in ends)
    moved = table.model_copy(update={"thresholds": rows, "edges": edges})
    share = _held(moved, np.asarray(labelled, dtype=np.float64))
    return NearMissTable.model_validate({**moved.model_dump(), "near_miss_share": share})


def _held(table: NearMissTable, labelled: FloatArray) -> float:
    """The share of near misses the labelled results held, as the carried table reads
    their confidences on its bins, with a margin for their number: the one-sided 84%
    upper bound (:data:`HELD_UPPER_DROP`), at least 0.01."""
    loglik = near_miss_log_mixture(table) @ _histogram(labelled, table.edges)
    plausible = loglik >= loglik.max() - HELD_UPPER_DROP
    return max(float(_CANDIDATES[plausible, 1].max()), 0.01)
