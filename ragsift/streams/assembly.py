"""What a worker process hosts, built from settings, for either runtime.

``ragsift worker retrieval indexer ...`` names handlers; this builds them
(and the shared pieces they need: metrics, one index for an embedded shard
that is both written and searched, the mix monitor's store) without choosing
how they are driven. The Faust app (:mod:`ragsift.streams.worker`) and the
plain aiokafka loop (:mod:`ragsift.streams.plain`) both start from an
:class:`Assembly` (docs/adr/018-the-plain-loop-runtime.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsift.confidence.mix_state import MixStateStore
from ragsift.errors import ConfigurationError
from ragsift.evaluation.sweep import Reprober
from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import RedisFeedbackStore, unreadable_counter
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.retrieval.redis_replies import refusal_counter
from ragsift.settings import KafkaSettings, Settings
from ragsift.wiring import (
    CALIBRATIONS_DIR,
    build_calibration_registry,
    build_calibration_store,
    build_embedder,
    build_index,
    build_metrics,
    build_mix_state,
    build_pipeline,
    build_report_handler,
    build_reprober,
    restore_mix,
)
from ragsift.workers.audit import build_audit_handler
from ragsift.workers.base import Handler
from ragsift.workers.calibration import FeedbackHandler, FeedbackLoop, ResultJoinHandler
from ragsift.workers.decision import DecisionHandler
from ragsift.workers.indexer import IndexerHandler
from ragsift.workers.retrieval import RetrievalHandler

log = logging.getLogger(__name__)

DEFAULT_TOPIC_PREFIX = KafkaSettings.model_fields["topic_prefix"].default

__all__ = [
    "WORKER_NAMES",
    "Assembly",
    "WorkerName",
    "assemble",
    "build_calibration_handlers",
    "own_calibrations",
    "readiness_state",
    "shared_group_warning",
]

WorkerName = Literal["retrieval", "indexer", "audit", "decision", "report", "calibration"]
WORKER_NAMES: tuple[WorkerName, ...] = (
    "retrieval",
    "indexer",
    "audit",
    "decision",
    "report",
    "calibration",
)


@dataclass
class Assembly:
    """The handlers of one worker process and what they share.

    ``group_id`` is the consumer group: an explicit ``RAGSIFT_KAFKA_APP_ID`` as
    is (deployments name one group per worker kind, and KEDA scales on its
    lag), else the app id suffixed with the hosted names.
    """

    names: tuple[WorkerName, ...]
    handlers: list[Handler[Any]]
    metrics: Metrics
    group_id: str
    pipeline: RetrievalPipeline | None = None
    mix_state: MixStateStore | None = None
    cache: RedisCache | None = None
    #: The indexer's re-probing; the runtime starts its sweep of stale scopes.
    reprober: Reprober | None = None

    async def close(self) -> None:
        """Release the handlers, the pipeline and the cache connection."""
        for handler in self.handlers:
            await handler.close()
        if self.pipeline is not None:
            await self.pipeline.close()
        if self.cache is not None:
            await self.cache.close()


def assemble(
    names: Sequence[WorkerName], settings: Settings, *, audit_dir: Path | None = None
) -> Assembly:
    """Build the named handlers (see the module docstring); a bad name is a ConfigurationError."""
    unknown = sorted(set(names) - set(WORKER_NAMES))
    if unknown or not names:
        raise ConfigurationError(f"workers must be among {WORKER_NAMES}, got {list(names)}")
    metrics = build_metrics(settings)
    handlers: list[Handler[Any]] = []
    pipeline: RetrievalPipeline | None = None
    mix_state: MixStateStore | None = None
    cache: RedisCache | None = None
    reprober: Reprober | None = None
    calibrations = own_calibrations(names, settings)
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
                calibration_store=build_calibration_store(settings, calibrations),
            )
            handlers.append(RetrievalHandler(pipeline))
            mix_state = build_mix_state(settings, calibrations, metrics=metrics)
            restore_mix(pipeline, mix_state)
        if "indexer" in names:
            reprober = build_reprober(settings, index, embedder, metrics, calibrations)
            indexer = Indexer(index, embedder, cache=cache, metrics=metrics)
            languages = settings.confidence.language_checks == "on"
            handlers.append(IndexerHandler(indexer, reprober, languages=languages))
    if "audit" in names:
        audit = audit_dir or settings.data_dir / "audit"
        handlers.append(build_audit_handler(settings.audit, audit, metrics))
    if "decision" in names:
        label_share = settings.feedback.sample_share
        handlers.append(DecisionHandler(settings.guardrails, metrics, label_share=label_share))
    if "report" in names:
        handlers.append(build_report_handler(settings, metrics))
    if "calibration" in names:
        handlers.extend(build_calibration_handlers(settings, metrics, calibrations))
    group_id = settings.kafka.app_id
    if "app_id" not in settings.kafka.model_fields_set:
        group_id = f"{group_id}-{'-'.join(sorted(names))}"
    shared = shared_group_warning(group_id, settings.kafka.topic_prefix)
    if shared is not None:
        log.warning(shared)
    return Assembly(
        names=tuple(names),
        handlers=handlers,
        metrics=metrics,
        group_id=group_id,
        pipeline=pipeline,
        mix_state=mix_state,
        cache=cache,
        reprober=reprober,
    )


def shared_group_warning(group_id: str, topic_prefix: str) -> str | None:
    """Why a consumer group may be shared with another deployment, or None.

    Consumer groups are named by ``RAGSIFT_KAFKA_APP_ID``, not by the topic prefix.
    Two deployments on one cluster that differ only in their prefix (``staging``
    beside the default ``ragsift``) would join the same groups: each one's restarts
    would rebalance the other's workers. Renaming the groups of a running deployment
    would make them start over from the earliest retained offset, so this warns and
    changes nothing.
    """
    if topic_prefix == DEFAULT_TOPIC_PREFIX or topic_prefix in group_id:
        return None
    return (
        f"consumer group {group_id!r} does not name the topic prefix {topic_prefix!r}:"
        " another deployment on this cluster with the same RAGSIFT_KAFKA_APP_ID would"
        " share it (and rebalance with these workers); set RAGSIFT_KAFKA_APP_ID, e.g."
        f" {topic_prefix}-{group_id.split('-', 1)[-1]}"
    )


def own_calibrations(names: Sequence[WorkerName], settings: Settings) -> Path | None:
    """The calibrations folder a worker uses when none is configured: the data dir's,
    as the embedded runtime's, where the process hosts the retrieval agent that reads
    it (re-probes and re-fits then reach its queries). None for a worker without it:
    what it wrote there no retrieval worker would read, so it needs a configured store
    (``RAGSIFT_CALIBRATION_STORE=redis`` for workers on several hosts)."""
    return Path(settings.data_dir) / CALIBRATIONS_DIR if "retrieval" in names else None


def build_calibration_handlers(
    settings: Settings, metrics: Metrics, default_dir: Path | None = None
) -> list[Handler[Any]]:
    """The feedback re-fit: one handler joins results, one applies labels (X2).

    Labels and results live in Redis (shared by replicas); the re-fit calibrations
    go to the configured calibration store (``RAGSIFT_CALIBRATION_STORE=redis`` for
    workers on several hosts), else to ``default_dir`` (:func:`own_calibrations`).
    """
    embedder_id = build_embedder(settings.embedder).embedder_id
    loop = FeedbackLoop(
        RedisFeedbackStore(
            settings.redis,
            on_unreadable=unreadable_counter(metrics),
            on_refused=refusal_counter(metrics, "feedback"),
        ),
        build_calibration_registry(settings, embedder_id, default_dir, metrics=metrics),
        settings.feedback,
        metrics,
    )
    return [ResultJoinHandler(loop), FeedbackHandler(loop)]


def readiness_state(
    *,
    down: Sequence[str],
    assigned: int | None,
    rebalancing: bool,
    handlers: Sequence[Handler[Any]],
) -> dict[str, Any]:
    """What /readyz reports, in either runtime: ready once consuming (``assigned`` known),
    no agent down, no handler stalled, no rebalance on.

    A handler that waits for a backing store instead of dropping (the audit sink on
    a full disk) says so with a true ``stalled`` attribute.
    """
    stalled = sorted(h.name for h in handlers if getattr(h, "stalled", False))
    return {
        "ready": not down and not stalled and not rebalancing and assigned is not None,
        "rebalancing": rebalancing,
        "agents_down": sorted(down),
        "handlers_stalled": stalled,
        "assigned_partitions": assigned,
    }
