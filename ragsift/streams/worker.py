"""A streaming worker process: a Faust app hosting one or more handlers.

Assembling the worker sits here, in the streaming runtime, above the handlers
it hosts (``ragsift.workers``): handlers never import Faust or this package
(docs/adr/009-worker-assembly-in-streams.md).

``ragsift worker retrieval`` (or ``indexer``, ``audit``, or several at once)
builds the handlers from settings, attaches one agent per handler, and serves
``/metrics``, ``/healthz`` and ``/readyz`` (and nothing else) on the worker's
web host and port; ``/readyz`` is 503 while rebalancing or while any agent is
not consuming (crashed, restarting or stopped). Several
handlers in one process share one index: that is how an embedded (Qdrant
Edge) shard is both written and searched; with a Qdrant server any split works.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import faust
from faust.exceptions import ConsumerNotStarted
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ragsift.confidence.mix_state import MixStateStore
from ragsift.errors import ConfigurationError
from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import RedisFeedbackStore
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.settings import Settings
from ragsift.streams.agents import AgentHealth, attach_handler
from ragsift.streams.app import create_app
from ragsift.wiring import (
    MIX_SAVE_INTERVAL_S,
    build_calibration_registry,
    build_embedder,
    build_index,
    build_mix_state,
    build_pipeline,
    build_report_handler,
    build_reprober,
    restore_mix,
    save_mix,
)
from ragsift.workers.audit import build_audit_handler
from ragsift.workers.base import Handler
from ragsift.workers.calibration import FeedbackHandler, FeedbackLoop, ResultJoinHandler
from ragsift.workers.decision import DecisionHandler
from ragsift.workers.indexer import IndexerHandler
from ragsift.workers.retrieval import RetrievalHandler

__all__ = ["WORKER_NAMES", "WorkerName", "build_worker", "readiness"]

WorkerName = Literal["retrieval", "indexer", "audit", "decision", "report", "calibration"]
WORKER_NAMES: tuple[WorkerName, ...] = (
    "retrieval",
    "indexer",
    "audit",
    "decision",
    "report",
    "calibration",
)


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
    unknown = sorted(set(names) - set(WORKER_NAMES))
    if unknown or not names:
        raise ConfigurationError(f"workers must be among {WORKER_NAMES}, got {list(names)}")
    metrics = Metrics(
        max_tenants=settings.worker.metrics_max_tenants,
        max_collections=settings.worker.metrics_max_collections,
    )
    handlers: list[Handler[Any]] = []
    pipeline: RetrievalPipeline | None = None
    mix_state: MixStateStore | None = None
    if "retrieval" in names or "indexer" in names:
        embedder = build_embedder(settings.embedder)
        index = build_index(settings.qdrant, settings.data_dir)
        cache = RedisCache(settings.redis) if settings.cache.enabled else None
        if "retrieval" in names:
            pipeline = build_pipeline(
                settings,
                index=index,
                embedder=embedder,
                metrics=metrics,
                cache=cache,
                source="/ragsift/worker/retrieval",
            )
            handlers.append(RetrievalHandler(pipeline))
            mix_state = build_mix_state(settings)
            restore_mix(pipeline, mix_state)
        if "indexer" in names:
            reprober = build_reprober(settings, index, embedder, metrics)
            handlers.append(IndexerHandler(Indexer(index, embedder, cache=cache), reprober))
    if "audit" in names:
        audit = audit_dir or settings.data_dir / "audit"
        handlers.append(build_audit_handler(settings.audit, audit, metrics))
    if "decision" in names:
        handlers.append(DecisionHandler(settings.guardrails, metrics))
    if "report" in names:
        handlers.append(build_report_handler(settings, metrics))
    if "calibration" in names:
        handlers.extend(build_calibration_handlers(settings, metrics))
    # The app id is the consumer group: an explicit RAGSIFT_KAFKA_APP_ID is used as is
    # (deployments name one group per worker kind, and KEDA scales on its lag).
    app_id = settings.kafka.app_id
    if "app_id" not in settings.kafka.model_fields_set:
        app_id = f"{app_id}-{'-'.join(sorted(names))}"
    app = create_app(
        settings.kafka,
        app_id=app_id,
        web_port=web_port,
        web_host=web_host or settings.worker.web_host,
    )
    if mix_state is not None and pipeline is not None:
        _keep_mix(app, pipeline, mix_state)
    health = AgentHealth()
    for handler in handlers:
        attach_handler(
            app,
            handler,
            prefix=settings.kafka.topic_prefix,
            metrics=metrics,
            batch_size=settings.limits.batch_size,
            within_s=settings.limits.batch_timeout_s,
            deadline_s=settings.limits.handler_deadline_s,
            max_original_bytes=settings.limits.deadletter_max_original_bytes,
            health=health,
        )
    _add_pages(app, metrics, health, handlers)
    return app, metrics


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


def build_calibration_handlers(settings: Settings, metrics: Metrics) -> list[Handler[Any]]:
    """The feedback re-fit: one handler joins results, one applies labels (X2).

    Labels and results live in Redis (shared by replicas); the re-fit calibrations
    go to the configured calibration store (``RAGSIFT_CALIBRATION_STORE=redis`` for
    workers on several hosts).
    """
    embedder_id = build_embedder(settings.embedder).embedder_id
    loop = FeedbackLoop(
        RedisFeedbackStore(settings.redis),
        build_calibration_registry(settings, embedder_id),
        settings.feedback,
        metrics,
    )
    return [ResultJoinHandler(loop), FeedbackHandler(loop)]


def readiness(
    app: faust.App, health: AgentHealth, handlers: Sequence[Handler[Any]] = ()
) -> dict[str, Any]:
    """What /readyz reports: ready once consuming, no agent down or stalled, no rebalance on.

    A handler that waits for a backing store instead of dropping (the audit sink on
    a full disk) says so with a true ``stalled`` attribute.
    """
    # Faust marks an agent's service crashed (mode's Service.crashed); its actors'
    # crashes (an exception out of the agent loop) show in AgentHealth, which
    # the loop itself keeps, until Faust's supervisor has restarted it.
    down = set(health.not_running())
    down.update(name for name, agent in app.agents.items() if agent.crashed)
    try:
        assigned: int | None = len(app.consumer.assignment())
    except ConsumerNotStarted:  # the page is up before the consumer is
        assigned = None
    rebalancing = bool(app.rebalancing)
    stalled = sorted(h.name for h in handlers if getattr(h, "stalled", False))
    return {
        "ready": not down and not stalled and not rebalancing and assigned is not None,
        "rebalancing": rebalancing,
        "agents_down": sorted(down),
        "handlers_stalled": stalled,
        "assigned_partitions": assigned,
    }


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
