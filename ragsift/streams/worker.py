"""The Faust runtime of a streaming worker: a Faust app hosting assembled handlers.

``ragsift worker NAMES --runtime faust`` (``RAGSIFT_WORKER_RUNTIME=faust``;
the default is the plain aiokafka loop, :mod:`ragsift.streams.plain`, ADR 018)
takes the handlers :func:`ragsift.streams.assembly.assemble` builds (ADR 009),
attaches one agent per handler, and serves ``/metrics``, ``/healthz`` and
``/readyz`` (and nothing else) on the worker's web host and port; ``/readyz``
is 503 while rebalancing or while any agent is not consuming (crashed,
restarting or stopped). SIGTERM stops it as Faust does, finishing and committing
the batches in flight, except a batch a handler holds for a store that does not
answer: that one is given up, uncommitted (:mod:`ragsift.streams.app`), as the
plain runtime does. Exactly-once (Kafka transactions) needs this runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import faust
from aiokafka import TopicPartition
from faust.exceptions import ConsumerNotStarted
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ragsift.confidence.mix_state import MixStateStore
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.settings import Settings
from ragsift.streams.agents import AgentHealth, attach_handler
from ragsift.streams.app import PagesOnlyApp, create_app
from ragsift.streams.assembly import (
    WORKER_NAMES,
    Assembly,
    WorkerName,
    assemble,
    readiness_state,
)
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.topics import TOPICS, follows_of
from ragsift.wiring import MIX_SAVE_INTERVAL_S, save_mix
from ragsift.workers.base import Handler

__all__ = ["WORKER_NAMES", "WorkerName", "build_worker", "faust_worker", "readiness"]


def build_worker(
    names: Sequence[WorkerName],
    settings: Settings,
    *,
    web_port: int = 6066,
    web_host: str | None = None,
    audit_dir: Path | None = None,
) -> tuple[faust.App, Metrics]:
    """A Faust app with an agent per named handler, and its metrics.

    ``web_host`` overrides ``settings.worker.web_host`` (``--web-host``).
    """
    parts = assemble(names, settings, audit_dir=audit_dir)
    return faust_worker(parts, settings, web_port=web_port, web_host=web_host), parts.metrics


def faust_worker(
    parts: Assembly, settings: Settings, *, web_port: int = 6066, web_host: str | None = None
) -> faust.App:
    """The Faust app driving an assembled worker's handlers."""
    app = create_app(
        settings.kafka,
        app_id=parts.group_id,
        web_port=web_port,
        web_host=web_host or settings.worker.web_host,
    )
    if parts.mix_state is not None and parts.pipeline is not None:
        _keep_mix(app, parts.pipeline, parts.mix_state)
    if parts.reprober is not None:  # scopes an upgrade left stale: probed in the background
        app.task(parts.reprober.sweep)
    health = AgentHealth()
    routers: dict[str, list[BatchRouter]] = {}
    for handler in parts.handlers:
        topic = TOPICS[handler.source].name(settings.kafka.topic_prefix)
        routers.setdefault(topic, []).append(
            attach_handler(
                app,
                handler,
                prefix=settings.kafka.topic_prefix,
                metrics=parts.metrics,
                batch_size=settings.limits.batch_size,
                within_s=settings.limits.batch_timeout_s,
                deadline_s=settings.limits.handler_deadline_s,
                max_original_bytes=settings.limits.deadletter_max_original_bytes,
                health=health,
                poison_after=settings.worker.poison_after_failures,
            )
        )
    _dead_letter_unreadable(app, routers)
    # Feedback is read after the results it joins to, as on the plain runtime; the
    # agents note what they handled only where a topic follows another.
    pages = cast(PagesOnlyApp, app)
    pages.follows = follows_of(parts.handlers, settings.kafka.topic_prefix)
    if pages.follows:
        pages.handled = {}
    _add_pages(app, parts.metrics, health, parts.handlers)
    return app


def _dead_letter_unreadable(app: faust.App, routers: Mapping[str, list[BatchRouter]]) -> None:
    """Dead-letter, on the app's loop, each span the consumer thread could not read and
    passed (:mod:`ragsift.streams.faust_read`), through its topic's routers."""

    async def dead_letter(tp: TopicPartition, error: Exception) -> None:
        first = getattr(error, "first", 0)  # an UnreadableRecordsError's first offset
        for router in routers.get(tp.topic, ()):
            await router.dead_letter(Received(None, None, tp.topic, tp.partition, first), error)

    cast(PagesOnlyApp, app).on_unreadable = dead_letter


def _keep_mix(app: faust.App, pipeline: RetrievalPipeline, store: MixStateStore) -> None:
    """Save the mix monitor's histograms every :data:`MIX_SAVE_INTERVAL_S` and at stop,
    so a restarted or added replica does not start every scope cold (ADR 013)."""

    async def save() -> None:
        await asyncio.to_thread(save_mix, pipeline, store)

    app.timer(interval=MIX_SAVE_INTERVAL_S, name="ragsift.mix_state")(save)

    async def at_stop(sender: Any, **kwargs: Any) -> None:
        await save()

    # mode's stub wants a positional-only sender; Faust calls it as at_stop(app, signal=...).
    app.on_before_shutdown.connect(at_stop)  # type: ignore[arg-type]


def readiness(
    app: faust.App, health: AgentHealth, handlers: Sequence[Handler[Any]] = ()
) -> dict[str, Any]:
    """What /readyz reports (:func:`~ragsift.streams.assembly.readiness_state`)."""
    # Faust marks an agent's service crashed (mode's Service.crashed); its actors'
    # crashes (an exception out of the agent loop) show in AgentHealth, which
    # the loop itself keeps, until Faust's supervisor has restarted it.
    down = set(health.not_running())
    down.update(name for name, agent in app.agents.items() if agent.crashed)
    try:
        assigned: int | None = len(app.consumer.assignment())
    except ConsumerNotStarted:  # the page is up before the consumer is
        assigned = None
    return readiness_state(
        down=sorted(down), assigned=assigned, rebalancing=bool(app.rebalancing), handlers=handlers
    )


def _add_pages(
    app: faust.App, metrics: Metrics, health: AgentHealth, handlers: Sequence[Handler[Any]]
) -> None:
    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        body = generate_latest(metrics.registry)
        return web.bytes(body, content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        return web.json({"status": "ok"})

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        state = readiness(app, health, handlers)
        return web.json(state, status=200 if state["ready"] else 503)
