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
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from corpus import make_corpus, make_queries

from ragsift.embedded import EmbeddedRuntime
from ragsift.schemas import QueryEvent, RetrievalResult
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


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _env(prefix: str, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RAGSIFT_DATA_DIR": str(data_dir),
        "RAGSIFT_KAFKA_TOPIC_PREFIX": prefix,
        "RAGSIFT_KAFKA_APP_ID": prefix,
        "RAGSIFT_KAFKA_PARTITIONS": str(PARTITIONS),
        "RAGSIFT_REDIS_KEY_PREFIX": prefix,
        "RAGSIFT_LIMITS_BATCH_SIZE": "256",
        "RAGSIFT_EMBEDDER_KIND": EMBEDDER_KIND,
    }


def _start_worker(prefix: str, template: Path, workdir: Path, port: int) -> subprocess.Popen[bytes]:
    data = workdir / f"w{port}"
    shutil.copytree(template, data)
    log = (data / "worker.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragsift",
            "worker",
            "retrieval",
            "--web-port",
            str(port),
            "--loglevel",
            "info",
        ],
        env=_env(prefix, data),
        cwd=data,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "Worker]: Ready" not in (data / "worker.log").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            code = proc.poll()
            _stop([proc])
            tail = (data / "worker.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"worker not ready (exit code {code}):\n{tail}")
        time.sleep(0.25)
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


async def _measure(settings: Settings, prefix: str, events: list[QueryEvent]) -> dict[str, float]:
    codec = EventCodec(QueryEvent)
    results = EventCodec(RetrievalResult)
    bootstrap = settings.kafka.bootstrap_servers
    consumer = AIOKafkaConsumer(
        f"{prefix}.retrievals.v1",
        bootstrap_servers=bootstrap,
        auto_offset_reset="latest",
        group_id=f"{prefix}-bench-{uuid.uuid4().hex[:6]}",
    )
    await consumer.start()
    while not consumer.assignment():
        await consumer.getmany(timeout_ms=200)
    # "latest" is resolved lazily: pin every position now, or results produced
    # before the fetcher gets to it are skipped and the run waits forever.
    for tp in consumer.assignment():
        await consumer.position(tp)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    wanted = {e.query_id for e in events}
    sent_at: dict[str, float] = {}
    latencies: list[float] = []

    async def send_all() -> None:
        for e in events:
            fresh = e.model_copy(update={"created_at": datetime.now(UTC)})
            sent_at[e.query_id] = time.perf_counter()
            await producer.send(
                f"{prefix}.queries.v1", codec.encode(fresh), key=e.query_id.encode()
            )
        await producer.flush()

    start = time.perf_counter()
    sending = asyncio.create_task(send_all())
    deadline = time.monotonic() + 600
    while wanted and time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=100, max_records=5000)).values():
            now = time.perf_counter()
            for r in records:
                result = results.decode(r.value)
                if result.query_id in wanted:
                    wanted.discard(result.query_id)
                    latencies.append(now - sent_at[result.query_id])
    elapsed = time.perf_counter() - start
    await sending
    await producer.stop()
    await consumer.stop()
    return {
        "queries_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 1),
        "p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 1),
        "lost": len(wanted),
    }


async def run(chunks: int, n_queries: int) -> dict[str, object]:
    embedder = EmbedderSettings(kind=EMBEDDER_KIND)
    settings = Settings.from_env(embedder=embedder)
    out: dict[str, object] = {"benchmark": "streaming", "chunks": chunks, "queries": n_queries}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        template = workdir / "template"
        runtime = EmbeddedRuntime(Settings.from_env(data_dir=template, embedder=embedder))
        corpus = make_corpus(chunks)
        _log(f"indexing {chunks} chunks…")
        await runtime.ingest(TENANT, corpus)
        texts = make_queries(corpus, n_queries * 2)
        vectors = await runtime.embedder.embed(texts)
        embedder_id = runtime.embedder.embedder_id
        await runtime.close()
        for workers in (1, 2):
            prefix = f"bench-{uuid.uuid4().hex[:8]}"
            kafka = settings.kafka.model_copy(
                update={"topic_prefix": prefix, "partitions": PARTITIONS}
            )
            await ensure_topics(kafka)
            _log(f"starting {workers} worker process(es)…")
            procs = [
                _start_worker(prefix, template, workdir / prefix, _free_port())
                for _ in range(workers)
            ]
            try:
                offset = (workers - 1) * n_queries
                events = [
                    QueryEvent(
                        query_id=f"{prefix}-{i}",
                        tenant_id=TENANT,
                        query=texts[offset + i],
                        vector=vectors[offset + i].tolist(),
                        embedder_id=embedder_id,
                    )
                    for i in range(n_queries)
                ]
                warm = events[: min(200, n_queries // 10)]
                _log("warming up…")
                await _measure(settings, prefix, warm)
                timed = events[len(warm) :]
                _log(f"measuring {len(timed)} queries…")
                out[f"workers_{workers}"] = await _measure(settings, prefix, timed)
            finally:
                _stop(procs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=5_000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.chunks, args.queries))))


if __name__ == "__main__":
    main()
