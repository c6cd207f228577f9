"""Progress on stderr for the commands' long stages: a bar on a terminal, plain lines
elsewhere (a log file, a pipe, a container's log)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from ragsift.cli.common import err_console

#: Without a terminal (a log file, a pipe, a container's log) progress is printed as
#: lines: a stage's first report, each tenth of the way, at least every this many
#: seconds while it moves, and its end.
PROGRESS_LINE_S = 10.0


@dataclass
class _Stage:
    started: float
    last_line: float
    tenths: int
    finished: bool


class _ProgressLines:
    """``progress(stage, done, total)`` as plain lines on ``console``, never more than needed.

    A rich bar draws nothing until it stops when its console is not a terminal,
    and a transient one not even then: an hour of indexing into a log file would
    show nothing at all.
    """

    def __init__(
        self,
        console: Console,
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = PROGRESS_LINE_S,
    ) -> None:
        self._console = console
        self._clock = clock
        self._every_s = every_s
        self._stages: dict[str, _Stage] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self._clock()
        tenths = 10 if total <= 0 else min(10, max(0, done) * 10 // total)
        finished = done >= total
        seen = self._stages.get(stage)
        if seen is None:
            seen = self._stages[stage] = _Stage(now, now, tenths, finished)
        elif seen.finished or not (
            finished or tenths > seen.tenths or now - seen.last_line >= self._every_s
        ):
            return
        else:
            seen.last_line, seen.tenths, seen.finished = now, tenths, finished
        share = f" ({done * 100 // total}%)" if total > 0 else ""
        took = f", done in {now - seen.started:.1f} s" if finished and now > seen.started else ""
        self._console.print(f"{stage}: {done:,}/{total:,}{share}{took}", highlight=False)


@contextmanager
def _stage_progress(*, transient: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(stage, done, total)`` callback on stderr.

    On a terminal, one bar per stage (gone when done unless not ``transient``);
    elsewhere plain lines (:class:`_ProgressLines`).
    """
    if not err_console.is_terminal:
        yield _ProgressLines(err_console)
        return
    from rich.progress import Progress

    with Progress(console=err_console, transient=transient) as bar:
        tasks: dict[str, Any] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        yield tick
