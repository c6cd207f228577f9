"""Run ragsift's command line with cProfile on while a flag file exists (bench/stages.py).

    python bench/profiled.py FLAG OUT worker retrieval ...

The profiler is switched at the start of a batch: on when FLAG appears, off
(statistics written to OUT) at the first batch after it is removed. So the
profile covers the timed batches only, not start-up, model loading or warm-up.
It profiles the event loop's thread; work in other threads (the onnx model)
is not in it (bench/stages.py reads those threads' CPU from /proc).
"""

from __future__ import annotations

import cProfile
import sys
from collections.abc import Sequence
from pathlib import Path

from ragsift.cli import main
from ragsift.streams.routing import BatchRouter, Received

FLAG, OUT = Path(sys.argv[1]), Path(sys.argv[2])
_profiler = cProfile.Profile()
_on = False
_process = BatchRouter.process


async def _switched(self: BatchRouter, batch: Sequence[Received]) -> None:
    global _on
    if FLAG.exists() != _on:  # noqa: ASYNC240  # one stat per batch, in a bench-only hook
        if _on:
            _profiler.disable()
            _profiler.dump_stats(OUT)
        else:
            _profiler.enable()
        _on = not _on
    await _process(self, batch)


BatchRouter.process = _switched  # type: ignore[method-assign]  # the one hook, bench only
sys.argv = ["ragsift", *sys.argv[3:]]
main()
