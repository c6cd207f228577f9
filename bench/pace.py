"""What sets one worker's pace under a backlog: its batches' work, their flushes, or waiting.

Runs one ``ragsift worker retrieval`` under bench/paced.py (each batch's
start, end of processing and end of the producer flush after it, and its
size, logged), sends a backlog of queries (bench/streaming.py), and splits
the worker's wall time over the backlog into

- **process**: decode, the pipeline, encode and hand-off to the producer;
- **flush**: waiting for the broker to acknowledge the batch's outputs
  (aiokafka's ``flush``; the producer's linger is inside it);
- **between batches**: from a flush's end to the next batch's start: the
  agent acknowledging the batch and waiting for the next (fetches, Faust's
  stream machinery, and the event loop's other tasks: offset commits, the
  consumer's fetcher, the web server).

Beside it: the batch sizes actually taken, and the CPU over the same window
of the worker (all threads), of this process (the load generator: sending
the queries, reading the results) and of the whole machine, so a worker that
waits can be told from one that shares its cores. Progress on stderr; one
JSON object on the last line of stdout; never asserts on time.

    python bench/pace.py [--chunks 10000] [--queries 3000] [--quick] [--env NAME=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from quick import parse_args
from streaming import EMBEDDER_KIND, measure_backlog, prepare_shard, start_workers, stop_workers

from ragsift.settings import EmbedderSettings, Settings

BENCH = Path(__file__).resolve().parent
WARM_UP = 300
QUICK = {"chunks": 2000, "queries": 1000}
_TICKS = os.sysconf("SC_CLK_TCK")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of every thread of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _machine_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of every core so far, from /proc/stat."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / _TICKS, sum(ticks) / _TICKS


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def pace_table(lines: list[str], wall_s: float) -> dict[str, Any]:
    """Where the worker's wall time went, from bench/paced.py's batch lines."""
    rows = [tuple(float(v) for v in line.split()) for line in lines if line.strip()]
    if not rows:
        raise RuntimeError("the worker logged no batch")
    process = sum(row[1] - row[0] for row in rows)
    process_cpu = sum(row[4] for row in rows)
    sending = sum(row[5] for row in rows)
    flush = sum(row[2] - row[1] for row in rows)
    waits = [nxt[0] - row[2] for row, nxt in itertools.pairwise(rows)]
    between = sum(waits)
    span = rows[-1][2] - rows[0][0]
    sizes = [int(row[3]) for row in rows]
    # Each batch: its size, then ms processing, flushing, and waiting for the next.
    per_batch: list[list[float | None]] = [
        [row[3], _ms(row[1] - row[0]), _ms(row[2] - row[1]), _ms(wait)]
        for row, wait in zip(rows, [*waits, None], strict=True)
    ]
    return {
        "batches": len(rows),
        "batch_size": {
            "mean": round(statistics.fmean(sizes), 1),
            "median": statistics.median(sizes),
            "min": min(sizes),
            "max": max(sizes),
        },
        "span_s": round(span, 3),
        "wall_s": round(wall_s, 3),
        "share_of_span": {
            "process": round(process / span, 3),
            "process, of it handing outputs to the producer": round(sending / span, 3),
            "process, CPU of the worker during it": round(process_cpu / span, 3),
            "flush": round(flush / span, 3),
            "between batches": round(between / span, 3),
        },
        "ms_per_batch": {
            "process": round(process / len(rows) * 1000, 2),
            "flush": round(flush / len(rows) * 1000, 2),
            "between batches": round(between / max(1, len(rows) - 1) * 1000, 2),
        },
        "per_batch": per_batch,
    }


async def run(chunks: int, queries: int, env: dict[str, str]) -> dict[str, Any]:
    """One worker over a backlog of ``queries``: its pace table and the CPU beside it."""
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shard = await prepare_shard(workdir, chunks, WARM_UP + queries)
        log = workdir / "batches.log"
        runner = (str(BENCH / "paced.py"), str(log))
        prefix, procs = await start_workers(settings, shard, workdir, 1, runner, env)
        try:
            await measure_backlog(settings, prefix, shard.events(f"{prefix}-warm", 0, WARM_UP))
            log.write_text("")  # the warm-up's batches; the worker appends to it (O_APPEND)
            pid = procs[0].pid
            worker0, own0, (busy0, total0) = _process_cpu_s(pid), _own_cpu_s(), _machine_s()
            _log(f"timing {queries} queries…")
            timed = await measure_backlog(settings, prefix, shard.events(prefix, WARM_UP, queries))
            worker1, own1, (busy1, total1) = _process_cpu_s(pid), _own_cpu_s(), _machine_s()
            lines = log.read_text().splitlines()
        finally:
            stop_workers(procs)
    wall = queries / timed["queries_per_s"]
    return {
        "benchmark": "pace",
        "chunks": chunks,
        "queries": queries,
        "env": env,
        "queries_per_s": timed["queries_per_s"],
        **pace_table(lines, wall),
        "cpu_cores_busy": {
            "worker": round((worker1 - worker0) / wall, 2),
            "load generator": round((own1 - own0) / wall, 2),
            "machine": round((busy1 - busy0) / wall, 2),
            "machine cores": round((total1 - total0) / wall, 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable for the worker's environment (repeatable)",
    )
    args = parse_args(parser, QUICK)
    env = dict(item.split("=", 1) for item in args.env)
    print(json.dumps(asyncio.run(run(args.chunks, args.queries, env))))


if __name__ == "__main__":
    main()
