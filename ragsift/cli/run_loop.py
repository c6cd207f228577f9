"""Running a command's coroutine: its result kept aside, and SIGTERM read as Ctrl-C is.

SIGTERM (a job scheduler, ``kill``, ``timeout``) ended a command at once: exit 143,
no word, its shards not flushed nor its files closed, where Ctrl-C cancels the work,
which says what it kept (``ingest``: "interrupted: ...") and closes everything on its
way out. Here SIGTERM cancels the work the same way, and the command exits 143.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["EXIT_TERMINATED", "run"]

T = TypeVar("T")

#: 128 + SIGTERM, as a shell reports a command that signal stopped
EXIT_TERMINATED = 143


def run(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)`` without formatting its result. On the way out, Python
    3.11's runner looks up the SIGINT handler (a partial naming the finished task) and
    ``signal.getsignal`` builds an error text it then drops from ``repr(task)``, which
    prints the whole result: 13 s of an 80 s SQuAD fit went to printing arrays of a
    retrieval run twice. The result is kept aside, so the task's own is ``None``."""
    kept: list[T] = []
    terminated: list[bool] = []

    async def keep() -> None:
        task = asyncio.current_task()
        assert task is not None  # inside asyncio.run

        def terminate() -> None:
            terminated.append(True)
            task.cancel()

        # not in the main thread: no handler; a command that serves sets its own on top
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
        kept.append(await work)

    try:
        asyncio.run(keep())
    except asyncio.CancelledError:
        if terminated:
            raise SystemExit(EXIT_TERMINATED) from None
        raise
    return kept[0]
