"""The plain runtime: a worker process whose handlers run on aiokafka clients, no Faust (ADR 018).

``ragsift worker NAMES --runtime plain`` (``RAGSIFT_WORKER_RUNTIME=plain``)
hosts the same handlers as the Faust worker (:mod:`ragsift.streams.assembly`)
with the same delivery contract (ADR 004), measured 1.16-1.32x the queries/s of
one Faust worker behind the same retrieval handler (docs/benchmarks.md):

- one :class:`~ragsift.streams.loop.BatchLoop` with one consumer in the
  worker's consumer group (the group id the Faust worker uses), subscribed to
  every hosted handler's source topic;
- one producer for every output, configured like Faust's (acks all, the
  linger, batch size and compression settings, and Faust's 20-minute request
  timeout, so a broker outage stalls the worker instead of failing sends);
- after each batch's flush, every output's delivery is checked: a batch with
  an output the broker did not take is not done, and runs again;
- ``/metrics``, ``/healthz`` and ``/readyz`` on the worker's web host and port,
  ``/readyz`` with the Faust worker's fields;
- the mix monitor's histograms saved every ``MIX_SAVE_INTERVAL_S`` and at stop.

SIGTERM or SIGINT stops it cleanly: each loop finishes its batch, flushes and
commits, the consumers leave the group, the mix state is saved. A batch a handler
holds for a store that does not answer (Redis, the audit disk) is given up
instead, uncommitted: it waited for the store, ignoring the signal, until the
orchestrator killed the process without leaving the group. Exactly-once
(``RAGSIFT_KAFKA_PROCESSING_GUARANTEE=exactly_once``) needs Faust's
transactions: the plain runtime refuses it.

A consumer group is driven by one runtime at a time: Faust's members use its
own partition assignor, and a plain member cannot join a group that has Faust
members (the broker answers ``InconsistentGroupProtocol``, and the worker
stops with an error naming the group). Switch a group's replicas together
(docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import InconsistentGroupProtocolError
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ragsift.errors import ConfigurationError, RagsiftError
from ragsift.gc_policy import settle as settle_gc
from ragsift.settings import Settings
from ragsift.streams import clients
from ragsift.streams.assembly import Assembly, readiness_state
from ragsift.streams.loop import BatchLoop
from ragsift.streams.routing import BatchRouter, agent_name
from ragsift.streams.topics import TOPICS, follows_of
from ragsift.wiring import MIX_SAVE_INTERVAL_S, save_mix

__all__ = ["LOG_LEVELS", "READY_LINE", "OutputsNotDeliveredError", "PlainWorker"]

log = logging.getLogger(__name__)

#: Logged once every consumer has its first assignment (the Faust worker logs
#: "[^Worker]: Ready"; tests and benches wait for "Worker]: Ready").
READY_LINE = "[ragsift.Worker]: Ready (runtime plain)"
#: Faust's producer_request_timeout: a batch is retried this long before it
#: expires, so a broker restart is waited out, not turned into failures.
PRODUCER_REQUEST_TIMEOUT_MS = 1_200_000
#: Faust's broker_max_poll_interval and broker_rebalance_timeout.
MAX_POLL_INTERVAL_MS = 1_000_000
REBALANCE_TIMEOUT_MS = 60_000


class OutputsNotDeliveredError(RagsiftError):
    """The broker did not take every output of a batch; the batch runs again."""

    stage = "emit"


class _Sender:
    """One loop's outputs to the shared producer, each delivery kept until its batch is flushed."""

    def __init__(self, producer: AIOKafkaProducer, prefix: str):
        self.producer = producer
        self.names = {name: spec.name(prefix) for name, spec in TOPICS.items()}
        self.deliveries: list[asyncio.Future[Any]] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.deliveries.append(await self.producer.send(self.names[topic], value, key=key))

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        delivery = await self.producer.send(self.names[topic], value, key=key)
        await asyncio.wait_for(delivery, timeout_s)

    async def flush(self, *, partial: bool) -> None:
        """Wait for every output sent since the last flush; raise if one was not taken."""
        accumulator = getattr(self.producer, "_message_accumulator", None)
        flush_now = getattr(accumulator, "flush_for_commit", None)
        if partial and flush_now is not None:
            # The batch is not full: nothing more is coming for these outputs,
            # so they go now instead of after the linger (streams.agents.flush_now).
            await flush_now()
        else:
            await self.producer.flush()
        deliveries, self.deliveries = self.deliveries, []
        if deliveries:
            await asyncio.wait(deliveries)
        failed = [
            "cancelled" if d.cancelled() else repr(d.exception())
            for d in deliveries
            if d.cancelled() or d.exception() is not None
        ]
        if failed:
            raise OutputsNotDeliveredError(
                f"{len(failed)} of {len(deliveries)} outputs not delivered: {failed[0]}"
            )


class PlainWorker:
    """An assembled worker driven by plain aiokafka clients (see the module docstring)."""

    def __init__(
        self,
        parts: Assembly,
        settings: Settings,
        *,
        web_port: int = 6066,
        web_host: str | None = None,
    ):
        kafka = settings.kafka
        if kafka.processing_guarantee != "at_least_once":
            raise ConfigurationError(
                "RAGSIFT_KAFKA_PROCESSING_GUARANTEE=exactly_once needs Kafka transactions:"
                " run this worker with --runtime faust"
            )
        self.parts = parts
        self.settings = settings
        self.web_port = web_port
        self.web_host = web_host or settings.worker.web_host
        self.loop: BatchLoop | None = None  # built in run(): aiokafka wants the running loop

    def _build(self) -> AIOKafkaProducer:
        """The producer and the batch loop, on the running event loop."""
        kafka, limits = self.settings.kafka, self.settings.limits
        options: dict[str, Any] = {
            "linger_ms": kafka.producer_linger_ms,
            "max_batch_size": kafka.producer_max_batch_bytes,
            "request_timeout_ms": PRODUCER_REQUEST_TIMEOUT_MS,
        }
        if kafka.producer_compression != "none":
            options["compression_type"] = kafka.producer_compression
        producer = clients.producer(kafka, **options)
        group_id = self.parts.group_id
        sender = _Sender(producer, kafka.topic_prefix)
        routers: dict[str, list[BatchRouter]] = {}
        for handler in self.parts.handlers:
            router = BatchRouter(
                handler,
                sender,
                metrics=self.parts.metrics,
                deadline_s=limits.handler_deadline_s,
                max_original_bytes=limits.deadletter_max_original_bytes,
            )
            routers.setdefault(TOPICS[handler.source].name(kafka.topic_prefix), []).append(router)
        consumer = clients.consumer(
            kafka,
            group_id=group_id,
            client_id=group_id,
            auto_offset_reset="earliest",
            session_timeout_ms=int(kafka.session_timeout_s * 1000),
            heartbeat_interval_ms=int(kafka.session_timeout_s * 100),
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
        )
        # A handler that reads after another topic (feedback after the results it
        # joins to) waits for it when this process consumes both.
        follows = follows_of(self.parts.handlers, kafka.topic_prefix)
        self.loop = BatchLoop(
            consumer,
            routers,
            sender.flush,
            batch_size=limits.batch_size,
            within_s=limits.batch_timeout_s,
            follows=follows,
            poison_after=self.settings.worker.poison_after_failures,
        )
        self.loop.subscribe()
        return producer

    def readiness(self) -> dict[str, Any]:
        """What /readyz reports (:func:`~ragsift.streams.assembly.readiness_state`)."""
        loop = self.loop
        if loop is None:  # not started: every agent is down
            down = [agent_name(h) for h in self.parts.handlers]
            return readiness_state(
                down=down, assigned=None, rebalancing=False, handlers=self.parts.handlers
            )
        return readiness_state(
            down=[] if loop.running else loop.names,
            assigned=loop.assigned,
            rebalancing=loop.rebalancing,
            handlers=self.parts.handlers,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then stop cleanly."""
        producer = self._build()
        pages = await self._start_pages()
        await producer.start()
        loop = self.loop
        assert loop is not None  # _build made it
        tasks: list[asyncio.Task[Any]] = []
        try:
            try:
                await loop.consumer.start()
            except InconsistentGroupProtocolError as exc:
                raise ConfigurationError(
                    f"consumer group {self.parts.group_id!r} has members of the other runtime"
                    " (Faust's assignor): stop them, or run this worker with --runtime faust"
                    " (docs/deployment.md, 'The runtime')"
                ) from exc
            tasks = [asyncio.create_task(loop.run(stop), name="ragsift.batches")]
            if self.parts.pipeline is not None and self.parts.mix_state is not None:
                tasks.append(asyncio.create_task(self._keep_mix(stop), name="ragsift.mix_state"))
            if self.parts.reprober is not None:  # scopes an upgrade left stale
                sweep = self.parts.reprober.sweep()
                tasks.append(asyncio.create_task(sweep, name="ragsift.reprobe_sweep"))
            await self._announce_ready(stop)
            await asyncio.gather(*tasks)
        finally:
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.consumer.stop()  # leaves the group: its partitions move at once
            await self._save_mix()
            await producer.stop()
            await self.parts.close()
            await pages.cleanup()

    async def _announce_ready(self, stop: asyncio.Event) -> None:
        """Say Ready once the consumer has joined the group (its assignment may be empty)."""
        assert self.loop is not None
        while not self.loop.joined.is_set():
            if stop.is_set():
                return
            await asyncio.sleep(0.05)
        # Start-up is done: freeze it, and keep the collector off the batches in
        # flight (ragsift.gc_policy has the figures).
        settle_gc()
        # Printed whatever the log level, as Faust prints its own.
        print(f"{READY_LINE}: {', '.join(self.parts.names)}", flush=True)

    async def _keep_mix(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), MIX_SAVE_INTERVAL_S)
            except TimeoutError:
                await self._save_mix()

    async def _save_mix(self) -> None:
        if self.parts.pipeline is not None and self.parts.mix_state is not None:
            await asyncio.to_thread(save_mix, self.parts.pipeline, self.parts.mix_state)

    async def _start_pages(self) -> web.AppRunner:
        registry = self.parts.metrics.registry

        async def metrics_page(request: web.Request) -> web.Response:
            return web.Response(
                body=generate_latest(registry),
                content_type=CONTENT_TYPE_LATEST.split(";")[0],
            )

        async def healthz(request: web.Request) -> web.Response:
            return web.json_response({"status": "ok"})

        async def readyz(request: web.Request) -> web.Response:
            state = self.readiness()
            return web.json_response(state, status=200 if state["ready"] else 503)

        app = web.Application()
        app.router.add_get("/metrics", metrics_page)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.web_host, self.web_port).start()
        return runner


def run_plain_worker(worker: PlainWorker, loglevel: str = "info") -> None:
    """Run ``worker`` in this process until SIGTERM or SIGINT."""
    logging.basicConfig(
        level=LOG_LEVELS.get(loglevel.lower(), logging.INFO),
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await worker.run(stop)

    asyncio.run(main())


#: the --loglevel names a worker takes (Faust's too), and the logging level of each
LOG_LEVELS = {
    "crit": logging.CRITICAL,
    "critical": logging.CRITICAL,
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}
