"""The latency floor, one knob at a time: configurations alternated in rounds, one worker.

At a low fixed rate (``--rate``, default 20 q/s: far below one worker's
maximum, so no queueing) each round runs the baseline and then every named
configuration (``CONFIGS``: the worker's environment and the load
generator's own Kafka client options), each on a fresh worker process on the
same indexed shard, with a warm-up, then ``--seconds`` of open-loop queries
(bench/openloop.py's ``offer_at``: latency from the scheduled send time).
Rounds repeat ``--rounds`` times, so a configuration and the baseline always
run side by side (A, B, A, B…) and drift on a shared machine falls on both:
the figures to quote are the medians over rounds and the median of the
per-round ratios to the baseline. Progress on stderr; one JSON object on the
last line of stdout; never asserts on time.

    python bench/floor.py [--configs batch_timeout_1ms,worker_linger_0] [--rounds 3]
                          [--rate 20] [--seconds 10] [--chunks 1000] [--before DIR]

``--before DIR`` runs the workers of every configuration but ``current`` on
the code of another checkout (``git worktree add DIR <commit>``): a change
against the commit before it, in the same window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from openloop import offer_at
from quick import parse_args
from streaming import (
    EMBEDDER_KIND,
    RAGSIFT,
    encode_events,
    measure_backlog,
    prepare_shard,
    start_workers,
    stop_workers,
)

from ragsift.settings import EmbedderSettings, Settings

#: name → {"worker": env, "consumer": results consumer options, "producer": query
#: producer options}. Each varies one knob from the
#: baseline (the defaults).
CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {},
    # The agent's take_events timer: how long a batch may wait to fill.
    "batch_timeout_1ms": {"worker": {"RAGSIFT_LIMITS_BATCH_TIMEOUT_S": "0.001"}},
    "batch_timeout_10ms": {"worker": {"RAGSIFT_LIMITS_BATCH_TIMEOUT_S": "0.01"}},
    # The worker's producer: linger before a batch of results goes out.
    "worker_linger_0": {"worker": {"RAGSIFT_KAFKA_PRODUCER_LINGER_MS": "0"}},
    # The load generator's consumer of results: how long the broker may hold a fetch.
    "bench_fetch_wait_10ms": {"consumer": {"fetch_max_wait_ms": 10}},
    # The load generator's producer of queries: its linger.
    "bench_linger_0": {"producer": {"linger_ms": 0}},
    # Qdrant Edge's search pool: its default is derived from the CPUs (8 threads on 2 cores).
    "edge_threads_1": {"worker": {"RAGSIFT_QDRANT_EDGE_SEARCH_THREADS": "1"}},
    "edge_threads_2": {"worker": {"RAGSIFT_QDRANT_EDGE_SEARCH_THREADS": "2"}},
    # The worker's runtime: aiokafka clients in a batch loop, or a Faust app (ADR 018).
    "runtime_plain": {"worker": {"RAGSIFT_WORKER_RUNTIME": "plain"}},
    "runtime_faust": {"worker": {"RAGSIFT_WORKER_RUNTIME": "faust"}},
    # This checkout's workers, defaults and all (with --before, every other runs the old code).
    "current": {},
}
WARM_UP = 100
QUICK = {"chunks": 500, "rounds": 1, "seconds": 3.0}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


async def run(
    chunks: int, rounds: int, rate: float, seconds: float, names: list[str], before: Path | None
) -> dict[str, Any]:
    """Every configuration's runs, their medians, and the median ratio to the baseline."""
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    order = ["baseline", *[n for n in names if n != "baseline"]]
    count = max(1, round(rate * seconds))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shard = await prepare_shard(workdir, chunks, (WARM_UP + count) * len(order) * rounds)
        slot = 0
        for round_ in range(rounds):
            for name in order:
                config = CONFIGS[name]
                part = shard.part(slot, len(order) * rounds)
                slot += 1
                env = dict(config.get("worker", {}))
                if before is not None and name != "current":
                    env["PYTHONPATH"] = str(before)
                prefix, procs = await start_workers(settings, part, workdir, 1, RAGSIFT, env)
                try:
                    await measure_backlog(settings, prefix, part.events(f"{prefix}-w", 0, WARM_UP))
                    _log(f"round {round_ + 1}, {name}: {rate} q/s for {seconds} s…")
                    payloads = encode_events(part.events(prefix, WARM_UP, count))
                    got = await offer_at(settings, prefix, payloads, rate, clients=config)
                finally:
                    stop_workers(procs)
                _log(f"  p50 {got.get('p50_ms')} ms, p99 {got.get('p99_ms')} ms")
                runs[name].append(got)
    summary: dict[str, Any] = {}
    for name, got in runs.items():
        answered = [g for g in got if "p50_ms" in g]
        figures: dict[str, Any] = {
            f"median_{p}": _median([g[p] for g in answered])
            for p in ("p50_ms", "p95_ms", "p99_ms", "max_ms")
        }
        if name != "baseline":
            # Round by round: each configuration against the baseline run just before it.
            for p in ("p50_ms", "p99_ms"):
                ratios = [g[p] / b[p] for g, b in zip(got, runs["baseline"], strict=True) if p in g]
                figures[f"median_ratio_{p}"] = round(statistics.median(ratios), 3)
        figures["lost"] = sum(g["lost"] for g in got)
        figures["runs"] = got
        summary[name] = figures
    return {
        "benchmark": "floor",
        "chunks": chunks,
        "rounds": rounds,
        "rate_qps": rate,
        "seconds_per_run": seconds,
        "before": str(before) if before else None,
        "configs": summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3, help="baseline + configurations, repeated")
    parser.add_argument("--rate", type=float, default=20.0, help="offered queries/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="per run")
    parser.add_argument("--configs", default="batch_timeout_1ms", help="comma-separated names")
    parser.add_argument("--before", type=Path, help="a checkout whose code the others run")
    args = parse_args(parser, QUICK)
    names = [n for n in args.configs.split(",") if n]
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configurations {unknown}; known: {sorted(CONFIGS)}")
    figures = asyncio.run(
        run(args.chunks, args.rounds, args.rate, args.seconds, names, args.before)
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
