"""A retrieval worker without Faust: a plain aiokafka batch loop behind the same handler.

Issue 17 asks what Faust costs per event against a plain loop, measured, not
estimated from a profile. This runs the worker's own retrieval handler and
batch router (``ragsift.streams.routing.BatchRouter``: decode, isolate, dead
letter, encode) between a plain ``AIOKafkaConsumer`` and ``AIOKafkaProducer``
built from the same settings:

1. ``getmany(max_records=RAGSIFT_LIMITS_BATCH_SIZE)`` hands over whatever is
   already fetched at once, and waits up to ``RAGSIFT_LIMITS_BATCH_TIMEOUT_S``
   only when nothing is (what ``AdaptiveStream`` does in the Faust worker);
2. the router handles the batch and hands its outputs to the producer;
3. the producer is flushed (at once for a partial batch, as the agents do);
4. offsets are committed after a flush, at most every ``COMMIT_INTERVAL_S``,
   so at-least-once holds as in ADR 004 (Faust also commits on a timer).

It is a bench runner, not a runtime: no web pages, no mix state saved, no
rebalance handling beyond aiokafka's. bench/floor.py and bench/levers.py run
it in place of ``ragsift worker retrieval`` (configuration ``plain_aiokafka``);
it takes the same arguments and prints the line they wait for.
``RAGSIFT_BENCH_BATCH_LOG=FILE`` writes a line per batch (``_BatchLog``).

    python bench/plainloop.py worker retrieval [--web-port N] [--loglevel L]
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from aiokafka import AIOKafkaProducer

from ragsift.gc_policy import settle as settle_gc
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.settings import Settings
from ragsift.streams import clients
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.topics import TOPICS
from ragsift.wiring import build_embedder, build_index, build_pipeline
from ragsift.workers.retrieval import RetrievalHandler

#: Offsets are committed at most this often, after a flush (Faust commits every 2.8 s).
COMMIT_INTERVAL_S = 1.0
#: What bench/streaming.py waits for in the worker's log before it sends.
READY_LINE = "[^Worker]: Ready (plain aiokafka loop)"


class _Sender:
    """The router's outputs straight to an aiokafka producer, by logical topic."""

    def __init__(self, producer: AIOKafkaProducer, prefix: str):
        self.producer = producer
        self.names = {name: spec.name(prefix) for name, spec in TOPICS.items()}

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.producer.send(self.names[topic], value, key=key)

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        delivery = await self.producer.send(self.names[topic], value, key=key)
        await asyncio.wait_for(delivery, timeout_s)


class _BatchLog:
    """One line per batch, when ``RAGSIFT_BENCH_BATCH_LOG`` names a file.

    Columns: monotonic start (s), records, processing ms, flush ms, and the
    age in ms of the batch's oldest query (its record timestamp) when it
    was taken up. The flush is timed to the moment the line is written.
    """

    def __init__(self, path: str):
        self.out = open(path, "w", buffering=1)  # noqa: SIM115 (open for the process's life)

    @classmethod
    def from_env(cls) -> _BatchLog | None:
        path = os.environ.get("RAGSIFT_BENCH_BATCH_LOG")
        return cls(path) if path else None

    def write(self, records: list[Any], taken: float, started: float, processed: float) -> None:
        waited_ms = taken * 1000 - min(r.timestamp for r in records)
        flushed = time.perf_counter()
        self.out.write(
            f"{started:.4f} {len(records)} {(processed - started) * 1000:.2f} "
            f"{(flushed - processed) * 1000:.2f} {waited_ms:.1f}\n"
        )


async def _flush_now(producer: AIOKafkaProducer) -> None:
    # ragsift.streams.agents.flush_now without Faust's wrapper around the producer.
    await producer._message_accumulator.flush_for_commit()


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Consume queries and publish results until ``stop`` is set."""
    kafka, limits = settings.kafka, settings.limits
    metrics = Metrics(
        max_tenants=settings.worker.metrics_max_tenants,
        max_collections=settings.worker.metrics_max_collections,
    )
    cache = RedisCache(settings.redis) if settings.cache.enabled else None
    pipeline = build_pipeline(
        settings,
        index=build_index(settings.qdrant, settings.data_dir),
        embedder=build_embedder(settings.embedder),
        metrics=metrics,
        cache=cache,
        source="/ragsift/worker/retrieval",
    )
    handler = RetrievalHandler(pipeline)
    options: dict[str, Any] = {
        "linger_ms": kafka.producer_linger_ms,
        "max_batch_size": kafka.producer_max_batch_bytes,
    }
    if kafka.producer_compression != "none":
        options["compression_type"] = kafka.producer_compression
    producer = clients.producer(kafka, **options)
    consumer = clients.consumer(
        kafka,
        TOPICS[handler.source].name(kafka.topic_prefix),
        group_id=kafka.app_id,
        auto_offset_reset="earliest",
        session_timeout_ms=int(kafka.session_timeout_s * 1000),
        heartbeat_interval_ms=int(kafka.session_timeout_s * 100),
    )
    await producer.start()
    await consumer.start()
    router = BatchRouter(
        handler,
        _Sender(producer, kafka.topic_prefix),
        metrics=metrics,
        deadline_s=limits.handler_deadline_s,
        max_original_bytes=limits.deadletter_max_original_bytes,
    )
    try:
        while not consumer.assignment():  # the group is joined in the background
            await asyncio.sleep(0.05)
            if stop.is_set():
                return
        print(READY_LINE, flush=True)
        settle_gc()

        timeout_ms = max(1, int(limits.batch_timeout_s * 1000))
        log = _BatchLog.from_env()
        committed = time.monotonic()
        while not stop.is_set():
            fetched = await consumer.getmany(timeout_ms=timeout_ms, max_records=limits.batch_size)
            records = [record for part in fetched.values() for record in part]
            if not records:
                continue
            taken, started = time.time(), time.perf_counter()
            await router.process(
                [
                    Received(
                        value=r.value,
                        key=r.key,
                        topic=r.topic,
                        partition=r.partition,
                        offset=r.offset,
                    )
                    for r in records
                ]
            )
            processed = time.perf_counter()
            if len(records) < limits.batch_size:
                await _flush_now(producer)
            else:
                await producer.flush()
            # Every position consumed so far has its outputs on the broker.
            if time.monotonic() - committed >= COMMIT_INTERVAL_S:
                await consumer.commit()
                committed = time.monotonic()
            if log is not None:
                log.write(records, taken, started, processed)
        await consumer.commit()
    finally:
        await consumer.stop()
        await producer.stop()
        await pipeline.close()
        if cache is not None:
            await cache.close()


def main() -> None:
    if sys.argv[1:3] != ["worker", "retrieval"]:
        sys.exit("usage: plainloop.py worker retrieval [--web-port N] [--loglevel L]")
    settings = Settings.from_env()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(settings, stop)

    asyncio.run(run())


if __name__ == "__main__":
    main()
