"""Confidence engines built from settings: one per selection mode, plus keyword mode.

A calibration artifact is fit for one embedder and one score metric. Dense and
hybrid retrieval rank by the dense channel (cosine), so they use it; keyword-only
retrieval ranks by BM25, so those queries use the artifact's keyword model (ADR
029), or, with an artifact fit before it, the weighted scorer, and say so in the
result's breakdown. A reranker does not change that (ADR 048): where a query
is scored by a calibrated model, it is scored on its retrieved hits as without
the reranker, which then orders the kept hits. Only queries the weighted scorer
scores are reranked before scoring: they rank by the cross-encoder's score, with
the reranker's own hit bar (``RAGSIFT_RERANKER_THRESHOLD``) instead of the cosine
one (:meth:`EngineSet.engine` with ``reranked=True``).
"""

from __future__ import annotations

import dataclasses
import logging
from importlib import resources
from pathlib import Path
from typing import Final

from ragsift.confidence import (
    AdvisoryThresholds,
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    LevelThresholds,
    NormalizationParams,
    load_calibration,
)
from ragsift.confidence.features import READER_FEATURES, SWITCHED_FEATURES
from ragsift.confidence.registry import DEFAULT_REFRESH_S, CalibrationRegistry, CalibrationStore
from ragsift.errors import ConfigurationError
from ragsift.retrieval.search_plan import (
    RRF_K,
)
from ragsift.schemas import SearchMode, Selection
from ragsift.settings import ConfidenceSettings

__all__ = ["READER_SUFFIX", "EngineSet", "packaged_calibration_path"]

log = logging.getLogger(__name__)

ARTIFACTS = "ragsift.confidence.artifacts"
# The index fuses as Qdrant does, sum 1 / (RRF_K + rank) with rank from 0; the
# engine's RRF formula counts rank from 1, so its k is one less. With the paper's
# k = 60 every top hit's fused score normalized past 1 and was clipped to a tie,
# which left reranker_impact (a rank correlation with RRF) undefined.
RRF_NORMALIZATION = NormalizationParams(rrf_k=RRF_K - 1)
# A cross-encoder's own boundary: logit 0, i.e. sigmoid 0.5, is where it calls a
# passage as likely relevant as not.
DEFAULT_RERANK_THRESHOLD = 0.5
# Engines kept per (calibration version, selection, mode): each re-fit adds a few;
# past this many the cache starts over (a rebuild costs microseconds).
MAX_ENGINES: Final = 256


# The packaged artifact fit with the reader signals is named for its embedder plus this.
READER_SUFFIX = "+reader"


def packaged_calibration_path(embedder_id: str, *, reader: bool = False) -> Path | None:
    """The calibration artifact shipped for ``embedder_id``, if any.

    With ``reader``, the one fit with the reader signals (``<id>+reader.json``) when
    it exists, else the plain one: a pipeline that reads can score without reading.
    """
    names = [f"{embedder_id}{READER_SUFFIX}.json"] if reader else []
    for name in [*names, f"{embedder_id}.json"]:
        candidate = resources.files(ARTIFACTS) / name
        if candidate.is_file():
            return Path(str(candidate))
    return None


class EngineSet:
    """The engines a pipeline needs, all sharing one configuration.

    Args:
        settings: thresholds and scorer choice.
        embedder_id: the embedder producing dense scores; the calibration must match it.
        calibration: an artifact to use instead of the configured or packaged one.
        rerank_threshold: the A1 hit bar of reranked queries, on sigmoid(reranker logit).
        store: scoped calibrations (per collection, per tenant); each query is scored
            with the most specific one (:meth:`calibration_for`). None: the one artifact.
        refresh_s: how often the store is checked for new calibrations.

    Raises:
        ConfigurationError: the calibrated scorer is configured but no artifact exists
            for this embedder, or the artifact names another embedder or metric.
    """

    def __init__(
        self,
        settings: ConfidenceSettings,
        embedder_id: str,
        calibration: CalibrationArtifact | None = None,
        rerank_threshold: float = DEFAULT_RERANK_THRESHOLD,
        *,
        store: CalibrationStore | None = None,
        refresh_s: float = DEFAULT_REFRESH_S,
    ):
        if not 0.0 <= rerank_threshold <= 1.0:
            raise ConfigurationError(f"rerank_threshold must be in [0, 1], got {rerank_threshold}")
        self.rerank_threshold = rerank_threshold
        self.settings = settings
        self.embedder_id = embedder_id
        self._plain = ConfidenceConfig(
            scorer=settings.scorer,
            similarity_threshold=settings.similarity_threshold,
            min_results=settings.min_results,
            levels=LevelThresholds(
                high=settings.high_threshold,
                medium=settings.medium_threshold,
                low=settings.low_threshold,
            ),
            advisory=dataclasses.replace(
                AdvisoryThresholds(), advisory=settings.advisory_threshold
            ),
            embedder_id=embedder_id,
            metric="cosine",
            normalization=RRF_NORMALIZATION,
        )
        if settings.scorer == "calibrated" and calibration is None:
            calibration = self._load_calibration()
        self.calibration = calibration
        #: Scoped calibrations, when a store is configured and the calibrated scorer is on.
        self.registry = (
            CalibrationRegistry(calibration, store, refresh_s=refresh_s)
            if store is not None and calibration is not None and settings.scorer == "calibrated"
            else None
        )
        self._explicit_threshold = "similarity_threshold" in settings.model_fields_set
        #: The configuration of the default calibration's queries.
        self.base = self._config_for(calibration)
        self._engines: dict[tuple[str, Selection, bool, bool], ConfidenceEngine] = {}
        try:
            self.engine("threshold", "hybrid")  # fail at start-up, not on the first query
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc

    def _config_for(self, calibration: CalibrationArtifact | None) -> ConfidenceConfig:
        """The base configuration as a calibration sets it (hit threshold, documents needed)."""
        config = self._plain
        if self.settings.scorer != "calibrated":
            return config
        if (
            calibration is not None
            and calibration.similarity_threshold is not None
            and not self._explicit_threshold
        ):
            # Cosines of different embedders live on different scales: the fitted
            # bar replaces seed A's 0.70, unless the operator chose one.
            config = dataclasses.replace(
                config, similarity_threshold=calibration.similarity_threshold
            )
        if calibration is not None and calibration.alignment is not None:
            # A collection's scores are read on the fit corpus's scale (ADR 024).
            config = dataclasses.replace(
                config, normalization=calibration.normalization(config.normalization)
            )
        # The calibrated confidence already is P(the kept context holds the answer),
        # with a certified answer threshold; seed D's two-document rule would refuse
        # answers that one passage settles.
        return dataclasses.replace(config, min_documents=1)

    def calibration_for(self, tenant: str | None, collection: str) -> CalibrationArtifact | None:
        """The calibration a query of this tenant and collection is scored with.

        The most specific one in the store (tenant+collection, collection), else the
        default. A scoped artifact that needs reader signals this pipeline does not
        read would score imputed values: it is skipped (logged) for the default.
        """
        if self.registry is None:
            return self.calibration
        artifact = self.registry.resolve(tenant, collection)
        missing = READER_FEATURES.intersection(artifact.features) - self.reader_features
        if missing:
            # Counted as the registry's fallbacks are (it was only logged, on every query).
            if self.registry.on_fallback is not None:
                self.registry.on_fallback("reader_signals")
            log.warning(
                "calibration %s for %s/%s needs reader signals %s this pipeline does not read;"
                " using the default",
                artifact.version,
                tenant,
                collection,
                sorted(missing),
            )
            return self.calibration
        return artifact

    def scored_with(
        self, calibration: CalibrationArtifact | None, mode: SearchMode
    ) -> CalibrationArtifact | None:
        """The model a query of ``mode`` under ``calibration`` is scored with: its
        keyword model for a keyword-only query (ADR 029; None without one)."""
        if mode != "keyword" or calibration is None:
            return calibration
        return calibration.keyword_model()

    @property
    def calibration_version(self) -> str:
        """Version of the calibration in use ("none" for uncalibrated scorers)."""
        return self.calibration.version if self.calibration is not None else "none"

    @property
    def reader_features(self) -> frozenset[str]:
        """The reader signals the calibration uses: what the pipeline must read."""
        if self.calibration is None or self.settings.scorer != "calibrated":
            return frozenset()
        return READER_FEATURES.intersection(self.calibration.features)

    def _load_calibration(self) -> CalibrationArtifact:
        reader = self.settings.reader_signals == "on"
        path = self.settings.calibration_path or packaged_calibration_path(
            self.embedder_id, reader=reader
        )
        if path is None:
            raise ConfigurationError(
                f"no calibration artifact for embedder {self.embedder_id!r}: fit one with"
                " `ragsift calibrate` and set RAGSIFT_CONFIDENCE_CALIBRATION_PATH, or choose"
                " another scorer with RAGSIFT_CONFIDENCE_SCORER=weighted"
            )
        try:
            artifact = load_calibration(path, embedder_id=self.embedder_id, metric="cosine")
        except ValueError as exc:
            raise ConfigurationError(f"calibration {path}: {exc}") from exc
        except OSError as exc:  # a missing or unreadable file is a setting to fix, not a crash
            raise ConfigurationError(
                f"calibration {path}: cannot read it ({exc.strerror or exc});"
                " check RAGSIFT_CONFIDENCE_CALIBRATION_PATH"
            ) from exc
        needs = sorted(SWITCHED_FEATURES.intersection(artifact.features))
        if needs and not reader:
            raise ConfigurationError(
                f"calibration {path} uses the reader signal {needs}; set"
                " RAGSIFT_CONFIDENCE_READER_SIGNALS=on or use an artifact fit without them"
            )
        return artifact

    def scores_calibrated(
        self, selection: Selection, mode: SearchMode, calibration: CalibrationArtifact | None
    ) -> bool:
        """Whether a query of this selection and mode, not reranked, is scored by a
        calibrated model: then a reranker only orders its kept hits (ADR 048)."""
        engine = self.engine(selection, mode, calibration=calibration)
        return engine.config.scorer == "calibrated"

    def engine(
        self,
        selection: Selection,
        mode: SearchMode,
        *,
        reranked: bool = False,
        calibration: CalibrationArtifact | None = None,
    ) -> ConfidenceEngine:
        """The engine for a query's selection and search mode, reranked or not.

        ``calibration`` is the query's (from :meth:`calibration_for`); None: the default.
        """
        artifact = calibration if calibration is not None else self.calibration
        keyword = mode == "keyword"
        version = artifact.version if artifact is not None else "none"
        key = (version, selection, keyword, reranked)
        engine = self._engines.get(key)
        if engine is None:
            # Keyword-only queries have a model of their own where the artifact fits one
            # (ADR 029); re-ranked ones have none (their primary score is the reranker's).
            if keyword and not reranked and artifact is not None:
                artifact = artifact.keyword_model()
            config = dataclasses.replace(self._config_for(artifact), selection=selection)
            if reranked:
                config = dataclasses.replace(config, similarity_threshold=self.rerank_threshold)
            if (artifact is None or reranked) and config.scorer == "calibrated":
                config = dataclasses.replace(config, scorer="weighted")
            used = artifact if config.scorer == "calibrated" else None
            engine = ConfidenceEngine(config, calibration=used)
            if len(self._engines) >= MAX_ENGINES:
                self._engines.clear()
            self._engines[key] = engine
        return engine
