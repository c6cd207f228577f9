"""Producer levers, one worker, in one run: queries/s for each configuration on the same shard.

Each configuration (``LEVERS``: the worker's extra environment, e.g. its
RAGSIFT_KAFKA_PRODUCER_* variables or RAGSIFT_WORKER_RUNTIME) gets a fresh
worker process on the same indexed shard, a warm-up,
then a backlog of distinct queries; the baseline runs first and again last,
so drift on a shared machine shows as the gap between its two figures. The
bare engine runs the same queries on the same shard at the worker's batch
size, so every figure is also a ratio to the engine measured in this run.
Hashing embedder, vectors precomputed (bench/streaming.py). Progress on
stderr; one JSON object on the last line of stdout; never asserts on time.

    python bench/levers.py [--chunks 10000] [--queries 3000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline import engine_qps
from quick import parse_args
from streaming import (
    EMBEDDER_KIND,
    RAGSIFT,
    WORKER_BATCH,
    measure_backlog,
    prepare_shard,
    start_workers,
    stop_workers,
)

from ragsift.settings import EmbedderSettings, Settings

#: name → the worker's extra environment. Faust's defaults are linger 0 and 16 KiB batches.
LEVERS: dict[str, dict[str, str]] = {
    "baseline": {},
    "lz4": {"RAGSIFT_KAFKA_PRODUCER_COMPRESSION": "lz4"},
    "zstd": {"RAGSIFT_KAFKA_PRODUCER_COMPRESSION": "zstd"},
    "linger_5ms": {"RAGSIFT_KAFKA_PRODUCER_LINGER_MS": "5"},
    # Below the broker's default message.max.bytes (1 MiB + 12) with room for overhead.
    "batch_512kib": {"RAGSIFT_KAFKA_PRODUCER_MAX_BATCH_BYTES": "524288"},
    "batch_512kib_linger_5ms": {
        "RAGSIFT_KAFKA_PRODUCER_MAX_BATCH_BYTES": "524288",
        "RAGSIFT_KAFKA_PRODUCER_LINGER_MS": "5",
    },
    # Qdrant Edge's search pool (default derived from the CPUs: 8 threads on 2 cores).
    "edge_threads_1": {"RAGSIFT_QDRANT_EDGE_SEARCH_THREADS": "1"},
    "edge_threads_2": {"RAGSIFT_QDRANT_EDGE_SEARCH_THREADS": "2"},
    # The worker's runtime: aiokafka clients in a batch loop, or a Faust app (ADR 018).
    "runtime_plain": {"RAGSIFT_WORKER_RUNTIME": "plain"},
    "runtime_faust": {"RAGSIFT_WORKER_RUNTIME": "faust"},
    "lz4_batch_512kib_linger_5ms": {
        "RAGSIFT_KAFKA_PRODUCER_COMPRESSION": "lz4",
        "RAGSIFT_KAFKA_PRODUCER_MAX_BATCH_BYTES": "524288",
        "RAGSIFT_KAFKA_PRODUCER_LINGER_MS": "5",
    },
}
WARM_UP = 300
QUICK = {"chunks": 2000, "queries": 1000}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run(chunks: int, queries: int, names: list[str]) -> dict[str, Any]:
    """Each lever's backlog figures, the baseline first and last, and the engine's."""
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    order = ["baseline", *[n for n in names if n != "baseline"], "baseline"]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        per_run = WARM_UP + queries
        shard = await prepare_shard(workdir, chunks, per_run * len(order))
        figures: dict[str, Any] = {}
        for n, name in enumerate(order):
            part = shard.part(n, len(order))
            prefix, procs = await start_workers(settings, part, workdir, 1, RAGSIFT, LEVERS[name])
            try:
                await measure_backlog(settings, prefix, part.events(f"{prefix}-w", 0, WARM_UP))
                _log(f"{name}: {queries} queries…")
                got = await measure_backlog(settings, prefix, part.events(prefix, WARM_UP, queries))
            finally:
                stop_workers(procs)
            figures[f"{name}_again" if name in figures else name] = got
        timed = shard.events("engine", 0, queries)
        engine = engine_qps(
            shard.template / "qdrant" / "default",
            timed,
            WORKER_BATCH,
            settings.confidence.default_k,
        )
    for got in figures.values():
        got["over_engine"] = round(got["queries_per_s"] / engine, 3)
    return {
        "benchmark": "levers",
        "chunks": chunks,
        "queries": queries,
        "engine_qps": round(engine, 1),
        "levers": figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--levers", default=",".join(LEVERS), help="comma-separated names")
    args = parse_args(parser, QUICK)
    names = [n for n in args.levers.split(",") if n]
    unknown = sorted(set(names) - set(LEVERS))
    if unknown:
        parser.error(f"unknown levers {unknown}; known: {sorted(LEVERS)}")
    print(json.dumps(asyncio.run(run(args.chunks, args.queries, names))))


if __name__ == "__main__":
    main()
