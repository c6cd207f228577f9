"""Where a worker's CPU goes, per stage: decode, embed, search, score, encode, produce.

Runs one ``ragsift worker retrieval`` under bench/profiled.py (cProfile,
switched on for the timed batches only), sends a backlog of queries, and
splits the worker's time into stages by the cumulative time of the function
that does each (``STAGES``). The profile covers the event loop's thread;
what other threads burn is read from /proc over the same window and reported
by name: Qdrant Edge's search pool (``edge-search-*``), and the rest (Faust's
aiokafka consumer thread; the onnx model's pool).
Fractions are of the worker's busy time (event-loop time minus the time it
waited in ``epoll``, plus the other threads' CPU). cProfile slows
Python code more than native code, so the Python stages are overstated by a
few points; the ranking is what to read. Progress on stderr; one JSON object
on the last line of stdout; never asserts on time.

    python bench/stages.py [--chunks 10000] [--queries 3000] [--embedder hashing|onnx] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from quick import parse_args
from streaming import (
    EMBEDDER_KIND,
    measure_backlog,
    prepare_shard,
    start_workers,
    stop_workers,
)

from ragsift.settings import EmbedderSettings, Settings

BENCH = Path(__file__).resolve().parent
#: stage → (file suffix, function name) whose cumulative time is the stage's.
#: None of these calls another, so their times add up.
STAGES: dict[str, list[tuple[str, str]]] = {
    "decode": [("ragsift/streams/codec.py", "decode")],
    "cache (Redis look-up and store)": [
        ("ragsift/retrieval/pipeline_cache.py", "lookup"),
        ("ragsift/retrieval/pipeline_cache.py", "store"),
    ],
    "embed": [("ragsift/retrieval/pipeline.py", "_embed")],
    "search (Qdrant Edge + fusion)": [("ragsift/retrieval/pipeline.py", "_search_collection")],
    "rerank": [("ragsift/retrieval/pipeline.py", "_rerank")],
    "read (reader signals)": [("ragsift/retrieval/pipeline.py", "_read")],
    "score (confidence, result)": [("ragsift/retrieval/pipeline.py", "_score")],
    "finish (guardrails, evidence)": [("ragsift/retrieval/pipeline.py", "_finish")],
    "encode": [("ragsift/streams/codec.py", "encode")],
    # Either runtime's hand-off (ADR 018): the plain sender's, or the Faust agents'.
    "produce (hand to the producer)": [
        ("ragsift/streams/plain.py", "send"),
        ("ragsift/streams/agents.py", "send"),
    ],
}
#: Totals the stages above sit inside, to name what is left.
ROUTER = ("ragsift/streams/routing.py", "process")
HANDLER = ("ragsift/workers/retrieval.py", "handle_batch")
#: The event loop waiting for I/O: not work.
IDLE = ("~", "<method 'poll' of 'select.epoll' objects>")
WARM_UP = 300
QUICK = {"chunks": 2000, "queries": 1000}
_TICKS = os.sysconf("SC_CLK_TCK")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cumulative(stats: dict[Any, Any], where: tuple[str, str]) -> float:
    """Cumulative seconds of the functions named ``where`` (file suffix, function name)."""
    suffix, name = where
    return sum(
        row[3] for (path, _, func), row in stats.items() if path.endswith(suffix) and func == name
    )


#: Exclusive (own) time by where the code lives: Faust's own per-event cost is
#: faust + mode; the Kafka client's is aiokafka plus the socket writes.
PACKAGES: tuple[tuple[str, str], ...] = (
    ("/faust/", "faust + mode (the framework)"),
    ("/mode/", "faust + mode (the framework)"),
    ("/aiokafka/", "aiokafka (Kafka client, Python)"),
    ("<method 'send' of '_socket.socket' objects>", "socket writes (produce requests)"),
    ("/asyncio/", "asyncio (event loop)"),
    ("EdgeShard", "Qdrant Edge (native)"),
    ("pydantic", "pydantic (validate, serialize)"),
    ("/ragsift/", "ragsift (Python)"),
)


def by_package(stats: dict[Any, Any], busy: float) -> dict[str, float]:
    """Fraction of busy time spent in each package's own code (first match in PACKAGES)."""
    seconds: dict[str, float] = {}
    for (path, _, func), row in stats.items():
        if (path, func) == IDLE:
            continue
        where = f"{path}:{func}"
        name = next((n for needle, n in PACKAGES if needle in where), "other")
        seconds[name] = seconds.get(name, 0.0) + row[2]
    return {n: round(s / busy, 3) for n, s in sorted(seconds.items(), key=lambda kv: -kv[1])}


def stage_table(profile: Path, other_threads: dict[str, float]) -> dict[str, Any]:
    """Seconds and fraction of busy time per stage, from a cProfile dump and the CPU
    seconds of the worker's other threads by kind (:func:`_other_threads_s`)."""
    other_threads_s = sum(other_threads.values())
    stats: dict[Any, Any] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in stats.values())  # every function's own time
    idle = sum(row[2] for (path, _, func), row in stats.items() if (path, func) == IDLE)
    busy = total - idle + other_threads_s
    seconds = {stage: sum(cumulative(stats, w) for w in where) for stage, where in STAGES.items()}
    router, handler = cumulative(stats, ROUTER), cumulative(stats, HANDLER)
    in_pipeline = sum(
        seconds[s]
        for s in seconds
        if s not in ("decode", "encode", "produce (hand to the producer)")
    )
    seconds["pipeline, other (admission, batching, metrics)"] = max(0.0, handler - in_pipeline)
    seconds["router, other (dead-letter checks, counting)"] = max(
        0.0,
        router
        - handler
        - seconds["decode"]
        - seconds["encode"]
        - seconds["produce (hand to the producer)"],
    )
    seconds["runtime + Kafka client (consume, flush, commit, event loop)"] = max(
        0.0, total - idle - router
    )
    for kind, cpu_s in other_threads.items():
        if cpu_s:
            seconds[kind] = cpu_s
    return {
        "busy_s": round(busy, 3),
        "own_time_by_package": by_package(stats, busy),
        "stages": {
            stage: {"seconds": round(s, 3), "fraction": round(s / busy, 3)}
            for stage, s in sorted(seconds.items(), key=lambda kv: -kv[1])
        },
    }


#: Thread names (``/proc/PID/task/TID/comm``) of Qdrant Edge's search pool: the
#: native search runs there while the event loop waits in ``query_batch``, so its
#: CPU and the ``search`` stage's wall time overlap.
EDGE_THREADS = "edge-search"
EDGE_KIND = "Qdrant Edge search threads (native; overlaps the search stage)"
OTHER_KIND = "other threads (the onnx model, executor; under Faust its consumer thread)"


def _thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """Name and CPU seconds (user + system) of each thread of ``pid``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        name, rest = (task / "stat").read_text().split(" (", 1)[1].rsplit(")", 1)
        fields = rest.split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / _TICKS)
    return out


def _other_threads_s(
    pid: int, before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds each kind of thread but the event loop's burnt between two readings."""
    out = {EDGE_KIND: 0.0, OTHER_KIND: 0.0}
    for tid, (name, cpu) in after.items():
        if tid != pid:
            kind = EDGE_KIND if name.startswith(EDGE_THREADS) else OTHER_KIND
            out[kind] += cpu - before.get(tid, (name, 0.0))[1]
    return out


async def run(chunks: int, queries: int, embedder: str, save: Path | None) -> dict[str, Any]:
    """Profile one worker over a backlog of ``queries``."""
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shard = await prepare_shard(workdir, chunks, WARM_UP + queries + 1, embedder)
        flag, out = workdir / "profiling", workdir / "worker.prof"
        runner = (str(BENCH / "profiled.py"), str(flag), str(out))
        prefix, procs = await start_workers(settings, shard, workdir, 1, runner)
        try:
            await measure_backlog(settings, prefix, shard.events(f"{prefix}-warm", 0, WARM_UP))
            pid = procs[0].pid
            flag.touch()
            before = _thread_cpu_s(pid)
            _log(f"profiling {queries} queries…")
            timed = await measure_backlog(settings, prefix, shard.events(prefix, WARM_UP, queries))
            after = _thread_cpu_s(pid)
            flag.unlink()
            # One more query: its batch switches the profiler off and writes the file.
            await measure_backlog(
                settings, prefix, shard.events(f"{prefix}-end", WARM_UP + queries, 1)
            )
            # The profile was written before that query's batch ran, so before its result.
            if not out.exists():
                raise RuntimeError(f"the worker wrote no profile to {out}")
        finally:
            stop_workers(procs)
        table = stage_table(out, _other_threads_s(pid, before, after))
        if save is not None:
            shutil.copyfile(out, save)
    return {
        "benchmark": "profile",
        "embedder": embedder,
        "chunks": chunks,
        "queries": queries,
        "queries_per_s_under_profiler": timed["queries_per_s"],
        **table,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=3_000)
    parser.add_argument("--embedder", choices=["hashing", "onnx"], default=EMBEDDER_KIND)
    parser.add_argument("--save", type=Path, help="keep the cProfile dump at this path")
    args = parse_args(parser, QUICK)
    print(json.dumps(asyncio.run(run(args.chunks, args.queries, args.embedder, args.save))))


if __name__ == "__main__":
    main()
