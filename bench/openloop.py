"""Open-loop latency through Kafka: what a user waits at a given offered rate.

For 1, then 2 ``ragsift worker retrieval`` processes (bench/streaming.py
starts them on one seeded, indexed shard): first the maximum, from a backlog
sent all at once (queries/s from the first send to the last result); then
queries offered at fixed rates — 25%, 50% and 80% of that maximum, and
1,000 q/s when it is below the maximum — for ``--seconds`` each, on a
schedule that never waits for answers. Each latency runs from the query's
*scheduled* send time to the moment its result is read (bench/latency.py: no
coordinated omission; 1%-precision log histogram), reported as p50/p95/p99/max
per rate with the rate actually achieved and any results lost. Every query
is distinct (no cache hits). Hashing embedder, vectors precomputed, as in
bench/streaming.py. Progress on stderr; one JSON object on the last line of
stdout; never asserts on time.

    python bench/openloop.py [--chunks 10000] [--backlog 5000] [--seconds 15]
                             [--workers 1,2] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from latency import LatencyBook, OpenLoop, fixed_rate
from pipeline import engine_qps
from quick import parse_args
from streaming import (
    EMBEDDER_KIND,
    WORKER_BATCH,
    Shard,
    collect,
    encode_events,
    measure_backlog,
    prepare_shard,
    query_producer,
    results_consumer,
    start_workers,
    stop_workers,
)

from ragsift.settings import EmbedderSettings, Settings

#: Offered rates as fractions of the measured maximum (issue 17).
FRACTIONS = (0.25, 0.5, 0.8)
#: The absolute rate a platform team asked about, offered when below the maximum.
ABSOLUTE_RATE = 1000.0
#: How long results may trail the last scheduled send before they count as lost.
DRAIN_S = 30.0
#: Warm-up queries per worker set (first batches pay imports, JIT-free but cold caches).
WARM_UP = 200
#: Sizes the query pool: well above the ~800-1,000 q/s measured on two cores.
MAX_EXPECTED_QPS = 2500.0
QUICK = {"chunks": 2000, "backlog": 1000, "seconds": 3.0}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def planned_rates(max_qps: float) -> list[float]:
    """The rates to offer: fractions of the maximum, and ABSOLUTE_RATE if reachable."""
    rates = [round(f * max_qps, 1) for f in FRACTIONS]
    if max_qps > ABSOLUTE_RATE:
        rates.append(ABSOLUTE_RATE)
    return rates


async def offer_at(
    settings: Settings,
    prefix: str,
    payloads: list[tuple[str, bytes]],
    rate: float,
    clients: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Offer ``payloads`` at ``rate`` per second; latency figures from the schedule.

    ``clients`` may carry ``"consumer"`` and ``"producer"`` option overrides for
    the load generator's own Kafka clients (bench/floor.py varies them).
    """
    clients = clients or {}
    consumer = await results_consumer(settings, prefix, **clients.get("consumer", {}))
    producer = await query_producer(settings, **clients.get("producer", {}))
    book = LatencyBook()
    loop = OpenLoop(book)
    topic = f"{prefix}.queries.v1"

    async def send(i: int) -> None:
        query_id, payload = payloads[i]
        # send() only appends to the producer's batch; delivery is not awaited.
        await producer.send(topic, payload, key=query_id.encode())

    offsets = fixed_rate(rate, len(payloads))
    collecting = asyncio.create_task(
        collect(consumer, book, len(payloads), offsets[-1] + DRAIN_S if offsets else DRAIN_S)
    )
    start = time.perf_counter()
    await loop.offer([query_id for query_id, _ in payloads], offsets, send)
    offered_s = time.perf_counter() - start
    await producer.flush()
    await collecting
    await producer.stop()
    await consumer.stop()
    figures: dict[str, Any] = {
        "offered_qps": rate,
        "achieved_send_qps": round(len(payloads) / offered_s, 1) if offered_s > 0 else None,
        "queries": len(payloads),
        "lost": book.outstanding,
        "duplicates": book.duplicates,
        "max_send_lag_ms": round(loop.max_send_lag_s * 1000, 1),
    }
    if book.histogram.count:
        figures.update(book.histogram.summary_ms())
    return figures


async def one_worker_set(
    settings: Settings, shard: Shard, workdir: Path, workers: int, backlog: int, seconds: float
) -> dict[str, Any]:
    """Maximum from a backlog, then each planned rate, on one set of worker processes."""
    prefix, procs = await start_workers(settings, shard, workdir, workers)
    used = WARM_UP  # the warm-up's queries are not asked again (no cache hits)

    def take(n: int) -> list[tuple[str, bytes]]:
        nonlocal used
        if used + n > len(shard.texts):
            raise ValueError(f"query pool of {len(shard.texts)} is too small for this run")
        events = shard.events(prefix, used, n)
        used += n
        return encode_events(events)

    try:
        _log("warming up…")
        await measure_backlog(settings, prefix, shard.events(f"{prefix}-warm", 0, WARM_UP))
        _log(f"maximum: a backlog of {backlog} queries…")
        maximum = await measure_backlog(settings, prefix, shard.events(prefix, used, backlog))
        used += backlog
        rates = []
        for rate in planned_rates(maximum["queries_per_s"]):
            count = max(1, round(rate * seconds))
            _log(f"offering {rate} q/s for {seconds} s ({count} queries)…")
            rates.append(await offer_at(settings, prefix, take(count), rate))
    finally:
        stop_workers(procs)
    return {"max": maximum, "rates": rates}


async def run(
    chunks: int, backlog: int, seconds: float, workers: list[int], embedder: str
) -> dict[str, Any]:
    """Every worker count's maximum and open-loop figures."""
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    # Enough distinct queries for the warm-up, the backlog and every rate at a generous maximum.
    per_set = (
        WARM_UP + backlog + round(seconds * (sum(FRACTIONS) * MAX_EXPECTED_QPS + ABSOLUTE_RATE))
    )
    pool = len(workers) * per_set
    out: dict[str, Any] = {
        "benchmark": "openloop",
        "embedder": embedder,
        "embedding_in_path": embedder != EMBEDDER_KIND,
        "chunks": chunks,
        "backlog": backlog,
        "seconds_per_rate": seconds,
        "histogram_relative_error": 0.01,
    }
    with tempfile.TemporaryDirectory() as tmp:
        shard = await prepare_shard(Path(tmp), chunks, pool, embedder)
        if shard.vectors is not None:
            # The ceiling, on the same shard and the same kind of queries, in this run.
            out["engine_qps"] = round(
                engine_qps(
                    shard.template / "qdrant" / "default",
                    shard.events("engine", 0, backlog),
                    WORKER_BATCH,
                    settings.confidence.default_k,
                ),
                1,
            )
        # Each worker set reads its own part of the pool, so no query repeats (no cache hits).
        for n, count in enumerate(workers):
            part = shard.part(n, len(workers))
            figures = await one_worker_set(settings, part, Path(tmp), count, backlog, seconds)
            if "engine_qps" in out:
                figures["max_over_engine"] = round(
                    figures["max"]["queries_per_s"] / out["engine_qps"], 3
                )
            out[f"workers_{count}"] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--backlog", type=int, default=5_000, help="queries for the maximum")
    parser.add_argument("--seconds", type=float, default=15.0, help="per offered rate")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument(
        "--embedder",
        choices=["hashing", "onnx"],
        default=EMBEDDER_KIND,
        help="onnx: the shard is indexed with the model and queries go as text (model in path)",
    )
    args = parse_args(parser, QUICK)
    workers = [int(w) for w in args.workers.split(",")]
    figures = asyncio.run(run(args.chunks, args.backlog, args.seconds, workers, args.embedder))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
