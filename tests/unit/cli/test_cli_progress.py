"""Progress off a terminal: lines a log file can show, not bars it would swallow."""

from __future__ import annotations

import io

from rich.console import Console

from ragsift.cli.progress import _ProgressLines


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(every_s: float = 10.0) -> tuple[_ProgressLines, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, width=200, markup=False)
    return _ProgressLines(console, clock=clock, every_s=every_s), out, clock


def test_a_line_at_the_start_each_tenth_and_the_end() -> None:
    tick, out, clock = _lines()
    for done in range(0, 1001):
        clock.now += 0.001
        tick("index", done, 1000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "index: 0/1,000 (0%)"
    assert lines[1:10] == [f"index: {n * 100:,}/1,000 ({n * 10}%)" for n in range(1, 10)]
    assert lines[10] == "index: 1,000/1,000 (100%), done in 1.0 s"
    assert len(lines) == 11


def test_a_slow_stage_gets_a_line_every_interval_between_tenths() -> None:
    tick, out, clock = _lines(every_s=10.0)
    tick("query", 0, 1000)
    for done in (1, 2, 3):  # under a tenth each time, 11 s apart
        clock.now += 11.0
        tick("query", done, 1000)
    clock.now += 1.0
    tick("query", 4, 1000)  # 1 s after the last line: nothing
    assert out.getvalue().splitlines() == [
        "query: 0/1,000 (0%)",
        "query: 1/1,000 (0%)",
        "query: 2/1,000 (0%)",
        "query: 3/1,000 (0%)",
    ]


def test_stages_are_followed_apart_and_end_once() -> None:
    tick, out, clock = _lines()
    tick("index", 5, 5)
    tick("search", 0, 2)
    clock.now += 2.0
    tick("search", 2, 2)
    tick("search", 2, 2)  # reported again after its end: nothing more
    tick("index", 5, 5)
    assert out.getvalue().splitlines() == [
        "index: 5/5 (100%)",
        "search: 0/2 (0%)",
        "search: 2/2 (100%), done in 2.0 s",
    ]


def test_an_empty_stage_is_one_line_without_a_share() -> None:
    tick, out, _ = _lines()
    tick("probe", 0, 0)
    tick("probe", 0, 0)
    assert out.getvalue().splitlines() == ["probe: 0/0"]
