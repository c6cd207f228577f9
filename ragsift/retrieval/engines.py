"""Confidence engines built from settings: one per selection mode, plus keyword mode.

A calibration artifact is fit for one embedder and one score metric. Dense and
hybrid retrieval rank by the dense channel (cosine), so they use it; keyword-only
retrieval ranks by BM25, which the artifact does not cover, so those queries
use the weighted scorer and say so in the result's breakdown. Reranked queries
rank by the cross-encoder's score; an artifact fit on cosines does not cover
it either, so they too use the weighted scorer, with the reranker's own hit bar
(``RAGSIFT_RERANKER_THRESHOLD``) instead of the cosine one.
"""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

from ragsift.confidence import (
    AdvisoryThresholds,
    CalibrationArtifact,
    ConfidenceConfig,
    ConfidenceEngine,
    LevelThresholds,
    NormalizationParams,
    load_calibration,
)
from ragsift.confidence.features import READER_FEATURES
from ragsift.errors import ConfigurationError
from ragsift.retrieval.index import RRF_K
from ragsift.schemas import SearchMode, Selection
from ragsift.settings import ConfidenceSettings

__all__ = ["READER_SUFFIX", "EngineSet", "packaged_calibration_path"]

ARTIFACTS = "ragsift.confidence.artifacts"
# The index fuses as Qdrant does, sum 1 / (RRF_K + rank) with rank from 0; the
# engine's RRF formula counts rank from 1, so its k is one less. With the paper's
# k = 60 every top hit's fused score normalized past 1 and was clipped to a tie,
# which left reranker_impact (a rank correlation with RRF) undefined.
RRF_NORMALIZATION = NormalizationParams(rrf_k=RRF_K - 1)
# A cross-encoder's own boundary: logit 0, i.e. sigmoid 0.5, is where it calls a
# passage as likely relevant as not.
DEFAULT_RERANK_THRESHOLD = 0.5


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
    ):
        if not 0.0 <= rerank_threshold <= 1.0:
            raise ConfigurationError(f"rerank_threshold must be in [0, 1], got {rerank_threshold}")
        self.rerank_threshold = rerank_threshold
        self.settings = settings
        self.embedder_id = embedder_id
        self.base = ConfidenceConfig(
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
        explicit = "similarity_threshold" in settings.model_fields_set
        if (
            settings.scorer == "calibrated"
            and calibration is not None
            and calibration.similarity_threshold is not None
            and not explicit
        ):
            # Cosines of different embedders live on different scales: the fitted
            # bar replaces seed A's 0.70, unless the operator chose one.
            self.base = dataclasses.replace(
                self.base, similarity_threshold=calibration.similarity_threshold
            )
        if settings.scorer == "calibrated":
            # The calibrated confidence already is P(the kept context holds the answer),
            # with a certified answer threshold; seed D's two-document rule would refuse
            # answers that one passage settles.
            self.base = dataclasses.replace(self.base, min_documents=1)
        self._engines: dict[tuple[str, bool, bool], ConfidenceEngine] = {}
        try:
            self.engine("threshold", "hybrid")  # fail at start-up, not on the first query
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from exc

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
        needs = sorted(READER_FEATURES.intersection(artifact.features))
        if needs and not reader:
            raise ConfigurationError(
                f"calibration {path} uses the reader signals {needs}; set"
                " RAGSIFT_CONFIDENCE_READER_SIGNALS=on or use an artifact fit without them"
            )
        return artifact

    def engine(
        self, selection: Selection, mode: SearchMode, *, reranked: bool = False
    ) -> ConfidenceEngine:
        """The engine for a query's selection mode and search mode, reranked or not."""
        keyword = mode == "keyword"
        key = (selection, keyword, reranked)
        engine = self._engines.get(key)
        if engine is None:
            config = dataclasses.replace(self.base, selection=selection)
            if reranked:
                config = dataclasses.replace(config, similarity_threshold=self.rerank_threshold)
            if (keyword or reranked) and config.scorer == "calibrated":
                config = dataclasses.replace(config, scorer="weighted")
            calibration = self.calibration if config.scorer == "calibrated" else None
            engine = ConfidenceEngine(config, calibration=calibration)
            self._engines[key] = engine
        return engine
