"""A command's coroutine under SIGTERM: cancelled as by Ctrl-C, cleaned up, exit 143."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from ragsift.cli.run_loop import EXIT_TERMINATED, run


def test_sigterm_cancels_the_work_which_cleans_up_and_the_command_exits_143() -> None:
    # SIGTERM ended `ragsift ingest` at once: exit 143, no word, nothing closed.
    cleaned: list[str] = []
    before = signal.getsignal(signal.SIGTERM)

    async def work() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cleaned.append("told the user")
            raise
        finally:
            cleaned.append("closed")

    with pytest.raises(SystemExit) as ended:
        run(work())
    assert ended.value.code == EXIT_TERMINATED
    assert cleaned == ["told the user", "closed"]
    assert signal.getsignal(signal.SIGTERM) == before  # the handler left with the loop


def test_the_result_comes_back_as_it_was() -> None:
    async def work() -> list[int]:
        return [1, 2, 3]

    assert run(work()) == [1, 2, 3]
