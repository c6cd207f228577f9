"""The bar a scope is served at: the mix's and the near misses' readings combined.

:func:`served_bar` takes the certified threshold, the two-kind mix table
(:mod:`.mix`, ADR 013) and the three-kind near-miss table (:mod:`.near_miss`,
ADR 021) with a scope's reading of both, and gives the bar its queries face and
the share their confidence is reported at: raised where the traffic shows more
unanswerable questions or near misses than the sample held, lowered where it is
clearly more answerable (:func:`lowered_to`, ADR 030, ADR 032), never under even
evidence (:func:`even_evidence`, ADR 046).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ragsift.confidence.mix import (
    DEAD_BAND,
    MixReading,
    MixTable,
    UnanswerableShare,
    mix_threshold,
)
from ragsift.confidence.near_miss import NearMissTable, near_miss_threshold
from ragsift.lru import Recent

__all__ = ["ServedBar", "ServedBars", "even_evidence", "lowered_to", "served_bar"]


@dataclass(frozen=True, slots=True)
class ServedBar:
    """A scope's answer threshold (``bar``), the part of it the out-of-scope mix set
    (``mixed``), and the share of unanswerable queries its confidence is reported
    at (``reported_at``; None: the calibration's own)."""

    bar: float
    mixed: float
    reported_at: float | None = None
    #: Where even evidence stopped a lowered bar (ADR 046): the bar the mix and the
    #: near misses would have lowered it to. None: it did not stop one.
    stopped_from: float | None = None


def served_bar(
    base: float,
    table: MixTable,
    near: NearMissTable | None,
    mode: UnanswerableShare,
    estimate: MixReading | None,
    *,
    lower: bool = True,
) -> ServedBar:
    """A scope's answer threshold, and the share its confidence is reported at.

    The bar is :func:`~ragsift.confidence.mix.mix_threshold`, raised to the
    near-miss bar where the reading calls for one (``auto`` only: a declared
    share declares the out-of-scope mix alone). Only the out-of-scope mix moves
    the share the confidence is reported at (ADR 016). With ``lower``, a scope
    whose traffic is clearly more answerable than the sample's (:func:`lowered_to`)
    has its bar lowered by what the table certifies that share moves it, never under
    the near-miss table's bar at the reading's shares (ADR 032), and is reported at
    that share (ADR 030).
    """
    mixed = mix_threshold(base, table, mode, estimate)
    moved: float | None = None
    if mixed != base:  # by a declared share, or by an estimate ("auto")
        moved = mode if not isinstance(mode, str) else (estimate.raising()[0] if estimate else None)
    if near is None or mode != "auto" or estimate is None:
        return ServedBar(mixed, mixed, moved)
    raised = near_miss_threshold(near, estimate.near_miss)
    if raised is not None or mixed != base:
        return ServedBar(mixed if raised is None else max(mixed, raised), mixed, moved)
    share = lowered_to(table, estimate) if lower else None
    if share is None:
        return ServedBar(base, base)
    # Lowered by as much as the table says the mix moves the bar, never more: where
    # the certified bar is stricter than the table at the sample's share (a
    # collection's probes re-certified it), that margin stays. The table reads a
    # share at the next tabulated one up, so its bar there may be above the
    # certified one: the drop is measured from the lower of the two.
    at_sample = min(base, table.threshold_at(table.unanswerable_share))
    bar = base - max(at_sample - table.threshold_at(share), 0.0)
    # The two-kind table counts near misses as answerable: never under the bar the
    # three-kind one certifies at the near misses (and off-topic queries) read (ADR 032).
    reading = estimate.near_miss
    assert reading is not None  # lowered_to lowers only with one
    bar = max(bar, near.threshold_at(reading.share, reading.out_of_scope))
    # Never under even evidence (ADR 046): a query answered at a lowered bar still has
    # evidence of its own for an answer, a likelihood ratio of 1 or more.
    even = even_evidence(table)
    if max(bar, even) >= base:
        return ServedBar(base, base)
    if even > bar:
        return ServedBar(even, even, share, stopped_from=bar)
    return ServedBar(bar, bar, share)


def even_evidence(table: MixTable) -> float:
    """The confidence, in the calibration's terms, at which a query's own evidence is
    even (likelihood ratio 1): the sample's answerable share, 0.25 for the shipped
    calibrations' 0.75 unanswerable. The lowest a lowered bar goes (ADR 046).

    Where the traffic reads almost all answerable, the table certifies answering
    everything (under α unanswerable, even all of them answered keep the risk under α),
    and the Bayes map reports a query the calibration put at 0.06 at 0.91. That holds
    only while the reading does. Retrieval misses that score like answers read as
    answerable (a FAQ asked only its own questions read 0.00 unanswerable where 10–14%
    of answers lacked their context), and an off-topic question on a mature scope was
    answered "HIGH" on the strength of the questions before it.
    """
    return 1.0 - table.unanswerable_share


def lowered_to(table: MixTable, estimate: MixReading) -> float | None:
    """The share a scope's bar is lowered to and its confidence reported at (ADR 030):
    the estimate's upper bound, where that is more than :data:`~.mix.DEAD_BAND` under
    the sample's share and a three-kind reading exists. None otherwise.

    Near misses score like answers and pull the two-kind estimate down; the upper
    bound, not the estimate, is the least the traffic's evidence allows, and
    :func:`served_bar` keeps the bar at or over the near-miss table's at the reading."""
    if estimate.near_miss is None or estimate.upper >= table.unanswerable_share - DEAD_BAND:
        return None
    return estimate.upper


#: Scopes whose last served bar is remembered (as many as a mix monitor keeps); past
#: it, the scope asked least recently is forgotten (its next query computes it).
MAX_REMEMBERED: Final = 10_000


class ServedBars:
    """:func:`served_bar` per scope, computed again only when its inputs change.

    A scope's reading is refreshed every :data:`~.mix_monitor.REFRESH_EVERY` (16)
    queries once it is mature (every query before) and returned as the same object
    in between, so the queries in between asked the same question with the same
    answer. Inputs are compared by
    identity (the tables, the reading) and value (the rest); the entry holds them, so
    an identity cannot be reused by another object while it is remembered.

    Raises:
        ValueError: ``max_scopes`` < 1.
    """

    def __init__(self, max_scopes: int = MAX_REMEMBERED) -> None:
        self.max_scopes = max_scopes
        self._last: Recent[tuple[str, str], tuple[tuple[object, ...], ServedBar]] = Recent(
            max_scopes
        )

    def get(
        self,
        scope: tuple[str, str],
        base: float,
        table: MixTable,
        near: NearMissTable | None,
        mode: UnanswerableShare,
        estimate: MixReading | None,
        *,
        lower: bool = True,
    ) -> ServedBar:
        """The scope's served bar: the one remembered while its inputs are unchanged."""
        inputs = (base, table, near, mode, estimate, lower)
        last = self._last.get(scope)
        if last is not None and all(
            a is b or (type(a) in (float, bool, str) and a == b)
            for a, b in zip(last[0], inputs, strict=True)
        ):
            return last[1]
        served = served_bar(base, table, near, mode, estimate, lower=lower)
        self._last.put(scope, (inputs, served))
        return served
