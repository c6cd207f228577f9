"""End-to-end streaming throughput through the real Kafka broker and Redis.

Starts 1, then 2 ``ragsift worker retrieval`` processes (one consumer group)
over an embedded shard of 10,000 chunks, produces query events with
precomputed vectors (hashing embedder, pinned: see EMBEDDER_KIND), and
measures queries/s from the first send to the last result, and
produce-to-result latency (p50/p99) from each query's ``created_at`` to the
moment its result is read. Needs ``scripts/services up``
(``make bench`` does it). Progress on stderr; one JSON object on the last line
of stdout; never asserts on time.

    python bench/streaming.py [--chunks 10000] [--queries 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from corpus import make_corpus, make_queries
from latency import LatencyBook
from quick import parse_args

from ragsift.embedded import EmbeddedRuntime
from ragsift.schemas import QueryEvent
from ragsift.settings import EmbedderSettings, Settings
from ragsift.streams.admin import ensure_topics
from ragsift.streams.codec import EventCodec

TENANT = "bench"
REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 120
PARTITIONS = 8
#: Pinned, not the default (onnx): this bench measures Kafka, the workers and the
#: engine, and its corpus is made-up words; indexing 10,000 chunks and embedding
#: 10,000 queries with the onnx model would take minutes on two cores.
#: bench/pipeline.py --embedder onnx --embed-in-path measures the model in the path.
EMBEDDER_KIND = "hashing"
#: A backlog of 5,000 queries drains in seconds; ten minutes means something is stuck.
BACKLOG_DEADLINE_S = 600
RAGSIFT = ("-m", "ragsift")
#: The workers' batch (RAGSIFT_LIMITS_BATCH_SIZE): the bare engine is measured at it too.
WORKER_BATCH = 256


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _env(
    prefix: str, data_dir: Path, embedder_kind: str, extra: Mapping[str, str]
) -> dict[str, str]:
    # ``extra`` may name another checkout's code as PYTHONPATH (bench/floor.py --before).
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        **extra,
        "RAGSIFT_DATA_DIR": str(data_dir),
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_APP_ID": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": str(PARTITIONS),
        "RAGSIFT_REDIS_KEY_PREFIX": prefix,
        "RAGSIFT_LIMITS_BATCH_SIZE": str(WORKER_BATCH),
        "RAGSIFT_EMBEDDER_KIND": embedder_kind,
    }


def start_worker(
    prefix: str,
    shard: Shard,
    workdir: Path,
    port: int,
    runner: Sequence[str] = RAGSIFT,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A ``ragsift worker retrieval`` process on a copy of the shard, once it says Ready.

    ``runner`` is what runs ragsift's command line (bench/profiled.py wraps it in
    a profiler); ``env`` adds variables to the worker's environment (the
    producer settings bench/levers.py compares).
    """
    data = workdir / f"w{port}"
    shutil.copytree(shard.template, data)
    log = (data / "worker.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            *runner,
            "worker",
            "retrieval",
            "--web-port",
            str(port),
            "--loglevel",
            "info",
        ],
        env=_env(prefix, data, shard.embedder_kind, env or {}),
        cwd=data,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "Worker]: Ready" not in (data / "worker.log").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            code = proc.poll()
            stop_workers([proc])
            tail = (data / "worker.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"worker not ready (exit code {code}):\n{tail}")
        time.sleep(0.25)
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


async def results_consumer(settings: Settings, prefix: str, **options: Any) -> AIOKafkaConsumer:
    """A started consumer of the results topic, positioned at its end.

    ``options`` go to the consumer as they are (bench/floor.py varies them).
    """
    consumer = AIOKafkaConsumer(
        f"{prefix}.retrievals.v1",
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="latest",
        group_id=f"{prefix}-bench-{uuid.uuid4().hex[:6]}",
        **options,
    )
    await consumer.start()
    while not consumer.assignment():
        await consumer.getmany(timeout_ms=200)
    # "latest" is resolved lazily: pin every position now, or results produced
    # before the fetcher gets to it are skipped and the run waits forever.
    for tp in consumer.assignment():
        await consumer.position(tp)
    return consumer


async def query_producer(settings: Settings, **options: Any) -> AIOKafkaProducer:
    """A started producer for the query events, as a client would send them.

    ``options`` override the producer's (bench/floor.py varies them).
    """
    options = {"acks": "all", "linger_ms": 5, **options}
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, **options)
    await producer.start()
    return producer


def encode_events(events: list[QueryEvent]) -> list[tuple[str, bytes]]:
    """(query id, payload) per event, encoded before any clock starts."""
    codec = EventCodec(QueryEvent)
    now = datetime.now(UTC)
    return [(e.query_id, codec.encode(e.model_copy(update={"created_at": now}))) for e in events]


async def collect(
    consumer: AIOKafkaConsumer, book: LatencyBook, expected: int, deadline_s: float
) -> None:
    """Record each result's arrival until ``expected`` have arrived or time runs out.

    A result is recognised by its record key (the worker keys results by query
    id): decoding ~5.5 KB of JSON per result here would take CPU from the
    workers on the same two cores.
    """
    deadline = time.monotonic() + deadline_s
    while len(book.done) < expected and time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=100, max_records=5000)).values():
            now = time.perf_counter()
            for r in records:
                if r.key is not None:
                    book.arrived(r.key.decode(), now)


async def measure_backlog(
    settings: Settings, prefix: str, events: list[QueryEvent]
) -> dict[str, float]:
    """All ``events`` sent at once: queries/s from the first send to the last result.

    The latencies are queueing behind that backlog, not what a user waits at a
    given load: bench/openloop.py measures that.
    """
    payloads = encode_events(events)
    consumer = await results_consumer(settings, prefix)
    producer = await query_producer(settings)
    book = LatencyBook()
    topic = f"{prefix}.queries.v1"

    async def send_all() -> None:
        for query_id, payload in payloads:
            book.schedule(query_id, time.perf_counter())
            await producer.send(topic, payload, key=query_id.encode())
        await producer.flush()

    start = time.perf_counter()
    sending = asyncio.create_task(send_all())
    await asyncio.sleep(0)  # the first send is scheduled before collecting starts
    await collect(consumer, book, len(payloads), BACKLOG_DEADLINE_S)
    elapsed = time.perf_counter() - start
    await sending
    await producer.stop()
    await consumer.stop()
    return {
        "queries_per_s": round(book.histogram.count / elapsed, 1),
        "p50_ms": round(book.histogram.percentile(50) * 1000, 1),
        "p99_ms": round(book.histogram.percentile(99) * 1000, 1),
        "lost": len(payloads) - len(book.done),
    }


@dataclass(frozen=True)
class Shard:
    """An indexed embedded shard to copy into each worker, and the queries to ask it.

    With ``vectors`` the events carry them (embedding is the caller's cost);
    without (the onnx model), they carry text only and the worker embeds each
    batch.
    """

    template: Path
    texts: list[str]
    vectors: np.ndarray | None
    embedder_id: str
    embedder_kind: str = EMBEDDER_KIND

    def events(self, prefix: str, offset: int, n: int) -> list[QueryEvent]:
        """``n`` query events (ids under ``prefix``) from the ``offset``-th query on."""
        out = []
        for i in range(n):
            j = (offset + i) % len(self.texts)
            vector = None if self.vectors is None else self.vectors[j].tolist()
            out.append(
                QueryEvent(
                    query_id=f"{prefix}-{i}",
                    tenant_id=TENANT,
                    query=self.texts[j],
                    vector=vector,
                    embedder_id=self.embedder_id if vector is not None else None,
                )
            )
        return out

    def part(self, n: int, of: int) -> Shard:
        """The same shard with every ``of``-th query from the ``n``-th: disjoint query sets."""
        vectors = None if self.vectors is None else self.vectors[n::of]
        return replace(self, texts=self.texts[n::of], vectors=vectors)


async def prepare_shard(
    workdir: Path, chunks: int, n_queries: int, embedder_kind: str = EMBEDDER_KIND
) -> Shard:
    """Index the seeded corpus into ``workdir/template``; ``n_queries`` queries to ask.

    Hashing: the queries' vectors are computed here. onnx: they are left to the
    worker (the model in the path).
    """
    embedder = EmbedderSettings(kind=embedder_kind)
    template = workdir / "template"
    runtime = EmbeddedRuntime(Settings.from_env(data_dir=template, embedder=embedder))
    corpus = make_corpus(chunks)
    _log(f"indexing {chunks} chunks…")
    await runtime.ingest(TENANT, corpus)
    texts = make_queries(corpus, n_queries)
    vectors = await runtime.embedder.embed(texts) if embedder_kind == EMBEDDER_KIND else None
    embedder_id = runtime.embedder.embedder_id
    await runtime.close()
    return Shard(template, texts, vectors, embedder_id, embedder_kind)


async def start_workers(
    settings: Settings,
    shard: Shard,
    workdir: Path,
    workers: int,
    runner: Sequence[str] = RAGSIFT,
    env: Mapping[str, str] | None = None,
) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A fresh topic prefix with its topics, and ``workers`` ready worker processes on it."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    kafka = settings.kafka.model_copy(update={"topic_prefix": prefix, "partitions": PARTITIONS})
    await ensure_topics(kafka)
    _log(f"starting {workers} worker process(es)…")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(workers):
            procs.append(start_worker(prefix, shard, workdir / prefix, free_port(), runner, env))
    except BaseException:
        stop_workers(procs)
        raise
    return prefix, procs


async def run(chunks: int, n_queries: int) -> dict[str, object]:
    settings = Settings.from_env(embedder=EmbedderSettings(kind=EMBEDDER_KIND))
    out: dict[str, object] = {"benchmark": "streaming", "chunks": chunks, "queries": n_queries}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shard = await prepare_shard(workdir, chunks, n_queries * 2)
        for workers in (1, 2):
            prefix, procs = await start_workers(settings, shard, workdir, workers)
            try:
                events = shard.events(prefix, (workers - 1) * n_queries, n_queries)
                warm = events[: min(200, n_queries // 10)]
                _log("warming up…")
                await measure_backlog(settings, prefix, warm)
                timed = events[len(warm) :]
                _log(f"measuring {len(timed)} queries…")
                out[f"workers_{workers}"] = await measure_backlog(settings, prefix, timed)
            finally:
                stop_workers(procs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=5_000)
    args = parse_args(parser, {"chunks": 2000, "queries": 1000})
    print(json.dumps(asyncio.run(run(args.chunks, args.queries))))


if __name__ == "__main__":
    main()
