"""``ServedBars``: a scope's served bar remembered while its inputs stay, never stale."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from ragsift.confidence.mix import MixReading, first_at_or_over
from ragsift.confidence.near_miss import NearMissReading
from ragsift.confidence.served import ServedBar, ServedBars, served_bar
from tests.unit.confidence.test_near_miss import _tables

SCOPE = ("acme", "docs")


def test_each_answer_is_served_bar_s_for_the_inputs_given() -> None:
    """Every case, then the same case with one input changed, then the case again:
    the memo answers as served_bar does, so no input is left out of what it compares."""
    (near_a, mix_a), (near_b, mix_b) = _tables(7), _tables(9)
    fields = [
        [SCOPE, ("acme", "other")],
        [0.5, 0.95],
        [(mix_a, near_a), (mix_b, near_b), (mix_b, near_a), (mix_a, None)],
        ["auto", "off", 0.3],
        [
            None,
            MixReading(0.6, 0.55, NearMissReading(0.3, 0.25, 0.5)),
            MixReading(0.05, 0.03, NearMissReading(0.02, 0.0, 0.05), upper=0.08),
            MixReading(0.4, 0.35, None),
        ],
        [True, False],
    ]
    memo = ServedBars()
    changed = 0

    def check(case: tuple[Any, ...]) -> ServedBar:
        scope, base, (mix, near), mode, reading, lower = case
        got = memo.get(scope, base, mix, near, mode, reading, lower=lower)
        assert got == served_bar(base, mix, near, mode, reading, lower=lower)
        return got

    for case in itertools.product(*fields):
        before = check(case)
        for i, values in enumerate(fields):
            for other in values:
                if other is not case[i]:
                    changed += check((*case[:i], other, *case[i + 1 :])) != before
                    assert check(case) == before
    assert changed > 1_000  # the changes above move the bar: the memo had to notice


def test_a_new_reading_is_read_even_when_it_equals_the_last() -> None:
    near, mix = _tables(7)
    memo = ServedBars()
    reading = MixReading(0.6, 0.55, NearMissReading(0.3, 0.25, 0.5))
    first = memo.get(SCOPE, 0.5, mix, near, "auto", reading)
    assert memo.get(SCOPE, 0.5, mix, near, "auto", reading) is first  # remembered
    again = MixReading(0.6, 0.55, NearMissReading(0.3, 0.25, 0.5))
    computed = memo.get(SCOPE, 0.5, mix, near, "auto", again)
    assert computed == first
    assert computed is not first  # computed for the new object, not matched by value


def test_a_scope_past_the_bound_takes_the_place_of_the_least_recently_asked() -> None:
    """Bounded, and not first come first kept: a cap that refused scopes past it left
    the first ones seen (long gone, or a flood of made-up tenant ids) remembered for
    good, and every later scope's bar was computed again on each of its queries."""
    near, mix = _tables(7)
    memo = ServedBars(max_scopes=2)
    for tenant in ("a", "b", "a", "c"):
        bar = memo.get((tenant, "docs"), 0.5, mix, near, "auto", None)
        assert bar == served_bar(0.5, mix, near, "auto", None)
    assert len(memo._last) == 2
    late = memo.get(("c", "docs"), 0.5, mix, near, "auto", None)
    assert memo.get(("c", "docs"), 0.5, mix, near, "auto", None) is late  # remembered
    assert memo.get(("a", "docs"), 0.5, mix, near, "auto", None) is not None
    assert set(memo._last) == {("a", "docs"), ("c", "docs")}  # b was asked least recently


@pytest.mark.parametrize("share", [0.0, 0.01, 0.0100000005, 0.5, 0.99, 1.0, 2.0, -1.0, np.nan])
def test_a_share_falls_where_numpy_would_put_it(share: float) -> None:
    shares = tuple(round(0.01 * i, 2) for i in range(1, 100))
    expected = int(np.searchsorted(np.asarray(shares), share - 1e-9, side="left"))
    assert first_at_or_over(shares, share) == expected
