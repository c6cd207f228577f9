"""Scorers: turn signals into one confidence in [0, 1], all behind one interface.

* ``weighted`` (B2): seed B's seven slots and weights, each slot a component
  in [0, 1] that never falls when a hit score rises (seed B's gap and spread do
  fall when the runner-up improves, so their slots use monotone stand-ins):

  ======== ====== ===========================================================
  slot     weight component
  ======== ====== ===========================================================
  top      0.30   top_score
  gap      0.20   margin = clip((top_score - threshold) / (1 - threshold), 0, 1)
  consensus 0.15  consensus
  agreement 0.15  agreement (BM25 x dense)
  spread   0.10   support (mean of the top-3 scores)
  graph    0.05   entity_coverage
  diversity 0.05  1 - document_diversity (one focused source)
  ======== ====== ===========================================================

  Slots whose signal is unavailable drop out and the remaining weights are
  rescaled to sum to 1.
* ``mean-kept`` (A3): mean normalized score of the kept hits.
* ``composite`` (C1): 0.4 x mean-kept + 0.3 x source quality + 0.3 x response
  quality, clamped to [0, 1]; a missing input drops out (weights rescaled).
* ``calibrated`` (X1): sigmoid(b + w . features) with the artifact's
  parameters, a probability that the kept hits hold the relevant context.

Every scorer returns 0 for a query with no kept hits: there is no context to trust.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragsift.confidence._rows import row_sums
from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.calibration import predict_logistic
from ragsift.confidence.config import (
    CompositeWeights,
    ConfidenceConfig,
    ScorerName,
    WeightedWeights,
)
from ragsift.confidence.dense_only import fill_dense_only
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import feature_matrix
from ragsift.confidence.signals import SIGNAL_INDEX, reported_signal_matrix

__all__ = [
    "CalibratedScorer",
    "CompositeScorer",
    "MeanKeptScorer",
    "Scorer",
    "ScoringInputs",
    "WeightedScorer",
    "make_scorer",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ScoringInputs:
    """What a scorer may look at, for Q queries.

    Attributes:
        signals: (Q, n_signals) signal matrix.
        kept_mean: (Q,) mean normalized primary score of the kept hits (0 if none).
        kept_count: (Q,) number of kept hits.
        response_quality: (Q,) C1 response quality in [0, 1], NaN = unknown; or None.
        threshold: (Q,) similarity threshold each query was filtered at.
        dense_only: which queries were searched dense-only (no BM25 channel): one
            value for the batch, or (Q,); the calibrated scorer imputes their
            agreement as its artifact says (ADR 028).
    """

    signals: FloatArray
    kept_mean: FloatArray
    kept_count: npt.NDArray[np.int64]
    threshold: FloatArray
    response_quality: FloatArray | None = None
    dense_only: npt.NDArray[np.bool_] | bool = False


# Sums of decimal weights land a hair off the decimal they stand for
# (0.4 x 0.8 + 0.3 + 0.3 = 0.9200000000000002): rounding to 12 decimals puts a
# confidence meant to sit exactly on a level boundary on it, not just below.
_CONFIDENCE_DECIMALS = 12


@runtime_checkable
class Scorer(Protocol):
    """Maps scoring inputs of Q queries to Q confidences in [0, 1]."""

    @property
    def name(self) -> ScorerName:
        """The scorer's name as configured."""
        ...

    def score(self, inputs: ScoringInputs) -> FloatArray:
        """Confidence per query, in [0, 1]."""
        ...


def _available_mean(components: FloatArray, weights: FloatArray) -> FloatArray:
    """Per row, the weighted mean of the components that are not NaN (weights rescaled)."""
    present = ~np.isnan(components)
    w = np.where(present, weights, 0.0)
    return row_sums(np.where(present, components, 0.0) * w) / np.maximum(row_sums(w), 1e-12)


def _finish(conf: FloatArray, inputs: ScoringInputs) -> FloatArray:
    clipped = conf.clip(0.0, 1.0).round(_CONFIDENCE_DECIMALS)
    return np.where(inputs.kept_count > 0, clipped, 0.0)


class WeightedScorer:
    """Seed B's weighted formula over monotone slot components (see module docstring)."""

    def __init__(self, weights: WeightedWeights | None = None) -> None:
        self.weights = weights if weights is not None else WeightedWeights()
        self._w = np.asarray(self.weights.as_tuple())

    @property
    def name(self) -> ScorerName:
        """``weighted``."""
        return "weighted"

    def components(self, inputs: ScoringInputs) -> FloatArray:
        """(Q, 7) slot components, NaN where a slot's signal is unavailable."""
        s = inputs.signals
        top = s[:, SIGNAL_INDEX["top_score"]]
        t = inputs.threshold
        margin = ((top - t) / np.maximum(1.0 - t, 1e-9)).clip(0.0, 1.0)
        return np.stack(
            [
                top,
                margin,
                s[:, SIGNAL_INDEX["consensus"]],
                s[:, SIGNAL_INDEX["agreement"]],
                s[:, SIGNAL_INDEX["support"]],
                s[:, SIGNAL_INDEX["entity_coverage"]],
                1.0 - s[:, SIGNAL_INDEX["document_diversity"]],
            ],
            axis=1,
        )

    def score(self, inputs: ScoringInputs) -> FloatArray:
        """Weighted mean of the available components."""
        comp = self.components(inputs)
        return _finish(_available_mean(comp, self._w), inputs)


class MeanKeptScorer:
    """Seed A's confidence (A3): the mean normalized score of the kept hits."""

    @property
    def name(self) -> ScorerName:
        """``mean-kept``."""
        return "mean-kept"

    def score(self, inputs: ScoringInputs) -> FloatArray:
        """Mean kept score."""
        return _finish(inputs.kept_mean, inputs)


class CompositeScorer:
    """Seed C's composite (C1): retrieval, source and response quality, weighted 0.4/0.3/0.3."""

    def __init__(self, weights: CompositeWeights | None = None) -> None:
        self.weights = weights if weights is not None else CompositeWeights()
        self._w = np.array([self.weights.retrieval, self.weights.source, self.weights.response])

    @property
    def name(self) -> ScorerName:
        """``composite``."""
        return "composite"

    def score(self, inputs: ScoringInputs) -> FloatArray:
        """Weighted mean of the available qualities, clamped to [0, 1]."""
        q = inputs.kept_mean.shape[0]
        response = (
            inputs.response_quality if inputs.response_quality is not None else np.full(q, np.nan)
        )
        comp = np.stack(
            [inputs.kept_mean, inputs.signals[:, SIGNAL_INDEX["source_quality"]], response],
            axis=1,
        )
        return _finish(_available_mean(comp, self._w), inputs)


class CalibratedScorer:
    """The calibrated scorer (X1): a monotone logistic model from a calibration artifact."""

    def __init__(self, artifact: CalibrationArtifact) -> None:
        self.artifact = artifact
        self._coef = artifact.coef_array
        self._intercept = artifact.intercept
        self._features = artifact.features
        self._remap = artifact.remap
        self._dense_only = artifact.dense_only

    @property
    def name(self) -> ScorerName:
        """``calibrated``."""
        return "calibrated"

    def score_reported(
        self,
        reports: Sequence[Mapping[str, float]],
        kept: Sequence[int],
        dense_only: Sequence[bool] | None = None,
    ) -> FloatArray:
        """The probabilities :meth:`score` gave queries, from the signals their results
        report (``breakdown.signals``; :func:`reported_signal_matrix`), their numbers
        of kept hits and which were searched dense-only (None: none was)."""
        none = np.zeros(len(reports))  # the model reads neither the kept hits' mean nor the bar
        inputs = ScoringInputs(
            signals=reported_signal_matrix(reports),
            kept_mean=none,
            kept_count=np.asarray(kept, dtype=np.int64),
            threshold=none,
            dense_only=False if dense_only is None else np.asarray(dense_only, dtype=bool),
        )
        return self.score(inputs)

    def score(self, inputs: ScoringInputs) -> FloatArray:
        """Probability that the kept hits hold the relevant context."""
        signals = fill_dense_only(inputs.signals, inputs.dense_only, self._dense_only)
        x = feature_matrix(signals, self._features)
        probs = predict_logistic(x, self._coef, self._intercept)
        if self._remap is not None:
            probs = self._remap.apply(probs)
        return _finish(probs, inputs)


def make_scorer(
    name: ScorerName,
    config: ConfidenceConfig,
    artifact: CalibrationArtifact | None = None,
) -> Scorer:
    """Build the scorer called ``name`` from the configuration.

    Raises:
        ConfidenceError: unknown name, or ``calibrated`` without an artifact.
    """
    if name == "weighted":
        return WeightedScorer(config.weights)
    if name == "mean-kept":
        return MeanKeptScorer()
    if name == "composite":
        return CompositeScorer(config.composite_weights)
    if name == "calibrated":
        if artifact is None:
            raise ConfidenceError("the calibrated scorer needs a calibration artifact, got None")
        return CalibratedScorer(artifact)
    raise ConfidenceError(
        f"scorer must be weighted, mean-kept, composite or calibrated, got {name!r}"
    )
