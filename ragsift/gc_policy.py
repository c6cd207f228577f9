"""The cyclic garbage collector's settings for a long-running ragsift process.

A worker calls :func:`settle` once its start-up is done; the benches that time
the pipeline call it where the worker would, so they measure what it runs.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "settle"]

#: Net container allocations between two young-generation collections (CPython's
#: default is 700). A batch of queries keeps its results, hits and payloads alive
#: until it is answered (at a threshold of 20,000 a collection still ran about once
#: per batch of 256), and reference counting frees them all: the pipeline makes no
#: cyclic garbage. At 700 the collector ran ~470 times per 2,000 queries, each time
#: rescanning the batch in flight: 7-11% of the embedded pipeline's wall time at a
#: batch of 256, 4-6% at 64 (bench/pipeline.py's set-up), and a full collection
#: afterwards found nothing to free. At 50,000 it did not run in 2,000 queries; a
#: process that does make cycles (an error's traceback) has them collected later.
YOUNG_THRESHOLD: Final = 50_000


def settle() -> None:
    """Start-up is done: freeze what exists, and collect young objects rarely.

    What exists now (the app, the index, the engines, modules) lives as long as
    the process: frozen, the collector's full collections no longer rescan it.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
