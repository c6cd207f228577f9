"""Configuration of the confidence engine: named defaults from the seeds, checked once.

Every number here is a default the settings module can override; the comment
beside each names the prior design (seed A-E, see FEATURES.md) it comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.normalize import DENSE_METRICS, DenseMetric, NormalizationParams

__all__ = [
    "DEFAULT_EMBEDDER_ID",
    "RESPONSE_QUALITY_POINTS",
    "SIGNAL_DEPTH",
    "SOURCE_TYPE_POINTS",
    "AdaptiveParams",
    "AdvisoryThresholds",
    "CompositeWeights",
    "ConfidenceConfig",
    "LevelThresholds",
    "ScorerName",
    "Selection",
    "WeightedWeights",
]

ScorerName = Literal["weighted", "mean-kept", "composite", "calibrated"]
"""The scorers behind :class:`ragsift.confidence.scorers.Scorer`."""

Selection = Literal["threshold", "adaptive", "top_k"]
"""How kept hits are chosen: A1/A2 threshold filter, E1 adaptive k, or E4 fixed top-k."""

# The embedder id of ragsift's parameter-free deterministic offline embedder; the
# shipped default calibration names it, and `ragsift calibrate` overwrites it by refitting.
DEFAULT_EMBEDDER_ID = "offline"

# Seed A (A1): similarity threshold on kept hits.
DEFAULT_SIMILARITY_THRESHOLD = 0.70
# Seed A (A2): minimum results, and the 10% threshold relaxation used to reach them.
DEFAULT_MIN_RESULTS = 3
DEFAULT_RELAX_FRACTION = 0.10
# Seed A (A4) and seed B (B3): level boundaries.
DEFAULT_HIGH_THRESHOLD = 0.85
DEFAULT_MEDIUM_THRESHOLD = 0.70
DEFAULT_LOW_THRESHOLD = 0.50
# Seed C (C2): advisory flag boundaries; below the advisory threshold a result is advisory-only.
DEFAULT_ADVISORY_HIGH = 0.90
DEFAULT_ADVISORY_THRESHOLD = 0.70
DEFAULT_ADVISORY_LOW = 0.50
# Seed B (B1): a hit "agrees" when its normalized score exceeds 0.75.
DEFAULT_CONSENSUS_THRESHOLD = 0.75
# Seed B searches k=5; five agreeing hits count as full consensus.
DEFAULT_CONSENSUS_FULL_AT = 5
# Depth of the support signal: seed A's minimum of 3 results.
DEFAULT_SUPPORT_DEPTH = 3
#: Hits the confidence signals read per query, whatever k a query asks for: the k the
#: packaged calibrations were fit at (``ragsift.confidence.signals``, ADR 027).
SIGNAL_DEPTH: Final = 8
# Seed E (E1): similarity floor, confidence threshold, k range, similarity/coverage weights.
DEFAULT_SIMILARITY_FLOOR = 0.2
DEFAULT_ADAPTIVE_THRESHOLD = 0.7
DEFAULT_MIN_K = 1
DEFAULT_MAX_K = 8
DEFAULT_SIMILARITY_WEIGHT = 0.6
DEFAULT_COVERAGE_WEIGHT = 0.4
# Seed E (E4): fixed top-k keeps its "general" task default of 5.
DEFAULT_TOP_K = 5
# Seed D (D1): an answer needs at least 2 documents within the threshold.
DEFAULT_MIN_DOCUMENTS = 2

# Seed C (C1): points each source type adds to the composite (out of its 0.3 share).
SOURCE_TYPE_POINTS: Mapping[str, float] = MappingProxyType(
    {"government": 0.30, "regulatory": 0.25, "market_data": 0.20, "third_party": 0.10}
)
# Seed C (C1): points for the structure of the LLM response (out of its 0.3 share).
RESPONSE_QUALITY_POINTS: Mapping[str, float] = MappingProxyType(
    {"complete": 0.30, "missing_optional": 0.20, "missing_required": 0.10, "invalid": 0.0}
)
# The most either table gives: both are seed C's 0.3 share, so points / 0.3 is in [0, 1].
_C1_SHARE = 0.30


def _check_unit(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfidenceError(f"{name} must be in [0, 1], got {value}")


@dataclass(frozen=True, slots=True)
class LevelThresholds:
    """Confidence boundaries of the A4 statuses and B3 levels (high > medium > low)."""

    high: float = DEFAULT_HIGH_THRESHOLD
    medium: float = DEFAULT_MEDIUM_THRESHOLD
    low: float = DEFAULT_LOW_THRESHOLD

    def __post_init__(self) -> None:
        for name in ("high", "medium", "low"):
            _check_unit(name, getattr(self, name))
        if not self.high > self.medium > self.low:
            raise ConfidenceError(
                f"level thresholds must satisfy high > medium > low, got "
                f"{self.high} / {self.medium} / {self.low}"
            )


@dataclass(frozen=True, slots=True)
class AdvisoryThresholds:
    """C2 flag boundaries; ``advisory`` is the advisory-only threshold."""

    high: float = DEFAULT_ADVISORY_HIGH
    advisory: float = DEFAULT_ADVISORY_THRESHOLD
    low: float = DEFAULT_ADVISORY_LOW

    def __post_init__(self) -> None:
        for name in ("high", "advisory", "low"):
            _check_unit(name, getattr(self, name))
        if not self.high > self.advisory > self.low:
            raise ConfidenceError(
                f"advisory thresholds must satisfy high > advisory > low, got "
                f"{self.high} / {self.advisory} / {self.low}"
            )


@dataclass(frozen=True, slots=True)
class WeightedWeights:
    """Seed B's (B2) weights of its seven slots; they must sum to 1."""

    top: float = 0.30
    gap: float = 0.20
    consensus: float = 0.15
    agreement: float = 0.15
    spread: float = 0.10
    graph: float = 0.05
    diversity: float = 0.05

    def __post_init__(self) -> None:
        values = self.as_tuple()
        if any(v < 0 for v in values):
            raise ConfidenceError(f"weights must be >= 0, got {values}")
        if abs(sum(values) - 1.0) > 1e-6:
            raise ConfidenceError(f"weights must sum to 1, got {sum(values):.6f}")

    def as_tuple(self) -> tuple[float, ...]:
        """Weights in slot order: top, gap, consensus, agreement, spread, graph, diversity."""
        return (
            self.top,
            self.gap,
            self.consensus,
            self.agreement,
            self.spread,
            self.graph,
            self.diversity,
        )


@dataclass(frozen=True, slots=True)
class CompositeWeights:
    """Seed C's (C1) shares of retrieval, source and response quality; sum to 1."""

    retrieval: float = 0.4
    source: float = 0.3
    response: float = 0.3

    def __post_init__(self) -> None:
        values = (self.retrieval, self.source, self.response)
        if any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6:
            raise ConfidenceError(f"composite weights must be >= 0 and sum to 1, got {values}")


@dataclass(frozen=True, slots=True)
class AdaptiveParams:
    """Seed E's (E1) adaptive-k parameters."""

    floor: float = DEFAULT_SIMILARITY_FLOOR
    threshold: float = DEFAULT_ADAPTIVE_THRESHOLD
    min_k: int = DEFAULT_MIN_K
    max_k: int = DEFAULT_MAX_K
    similarity_weight: float = DEFAULT_SIMILARITY_WEIGHT
    coverage_weight: float = DEFAULT_COVERAGE_WEIGHT

    def __post_init__(self) -> None:
        _check_unit("floor", self.floor)
        _check_unit("threshold", self.threshold)
        if self.min_k < 1:
            raise ConfidenceError(f"min_k must be >= 1, got {self.min_k}")
        if self.max_k < self.min_k:
            raise ConfidenceError(f"max_k must be >= min_k ({self.min_k}), got {self.max_k}")
        total = self.similarity_weight + self.coverage_weight
        if self.similarity_weight < 0 or self.coverage_weight < 0 or abs(total - 1.0) > 1e-6:
            raise ConfidenceError(
                f"similarity_weight and coverage_weight must be >= 0 and sum to 1, got "
                f"{self.similarity_weight} + {self.coverage_weight}"
            )


def _default_source_quality() -> Mapping[str, float]:
    return MappingProxyType({k: v / _C1_SHARE for k, v in SOURCE_TYPE_POINTS.items()})


@dataclass(frozen=True, slots=True)
class ConfidenceConfig:
    """Everything the confidence engine needs, with the seeds' defaults.

    Args:
        scorer: which scorer produces the confidence (``calibrated`` by default, X1).
        selection: how kept hits are chosen (A1/A2 ``threshold``, E1 ``adaptive``, E4 ``top_k``).
        similarity_threshold: A1 threshold on normalized scores; overridable per query.
        min_results: A2 minimum number of kept hits, reached by relaxing the threshold.
        relax_fraction: A2 relaxation (0.10 means the threshold is multiplied by 0.9).
        levels: A4/B3 level boundaries.
        advisory: C2 flag boundaries.
        consensus_threshold: B1 score above which a hit counts toward consensus.
        consensus_full_at: number of agreeing hits that counts as full consensus.
        support_depth: how many top hits the support signal averages.
        weights: B2 weights of the weighted scorer.
        composite_weights: C1 shares of the composite scorer.
        source_quality: C1 source-type quality in [0, 1] (points / 0.3).
        unknown_source_quality: quality of a source type not in the table.
        adaptive: E1 parameters.
        top_k: E4 fixed k.
        min_documents: D1 documents needed within the threshold to answer.
        answer_threshold: confidence needed to answer; ``None`` means the calibrated
            artifact's conformal threshold for the calibrated scorer, else ``levels.low``.
        embedder_id: the embedder producing the dense scores (checked against calibration).
        metric: the dense score metric (checked against calibration).
        normalization: parameters of the per-channel formulas.
    """

    scorer: ScorerName = "calibrated"
    selection: Selection = "threshold"
    similarity_threshold: float = DEFAULT_SIMILARITY_THRESHOLD
    min_results: int = DEFAULT_MIN_RESULTS
    relax_fraction: float = DEFAULT_RELAX_FRACTION
    levels: LevelThresholds = field(default_factory=LevelThresholds)
    advisory: AdvisoryThresholds = field(default_factory=AdvisoryThresholds)
    consensus_threshold: float = DEFAULT_CONSENSUS_THRESHOLD
    consensus_full_at: int = DEFAULT_CONSENSUS_FULL_AT
    support_depth: int = DEFAULT_SUPPORT_DEPTH
    weights: WeightedWeights = field(default_factory=WeightedWeights)
    composite_weights: CompositeWeights = field(default_factory=CompositeWeights)
    source_quality: Mapping[str, float] = field(default_factory=_default_source_quality)
    unknown_source_quality: float = SOURCE_TYPE_POINTS["third_party"] / _C1_SHARE
    adaptive: AdaptiveParams = field(default_factory=AdaptiveParams)
    top_k: int = DEFAULT_TOP_K
    min_documents: int = DEFAULT_MIN_DOCUMENTS
    answer_threshold: float | None = None
    embedder_id: str = DEFAULT_EMBEDDER_ID
    metric: DenseMetric = "cosine"
    normalization: NormalizationParams = field(default_factory=NormalizationParams)

    def __post_init__(self) -> None:
        if self.scorer not in ("weighted", "mean-kept", "composite", "calibrated"):
            raise ConfidenceError(
                f"scorer must be weighted, mean-kept, composite or calibrated, got {self.scorer!r}"
            )
        if self.selection not in ("threshold", "adaptive", "top_k"):
            raise ConfidenceError(
                f"selection must be threshold, adaptive or top_k, got {self.selection!r}"
            )
        _check_unit("similarity_threshold", self.similarity_threshold)
        _check_unit("relax_fraction", self.relax_fraction)
        _check_unit("consensus_threshold", self.consensus_threshold)
        _check_unit("unknown_source_quality", self.unknown_source_quality)
        if self.answer_threshold is not None:
            _check_unit("answer_threshold", self.answer_threshold)
        for name in ("min_results", "min_documents"):
            if getattr(self, name) < 0:
                raise ConfidenceError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("consensus_full_at", "support_depth", "top_k"):
            if getattr(self, name) < 1:
                raise ConfidenceError(f"{name} must be > 0, got {getattr(self, name)}")
        for source_type, quality in self.source_quality.items():
            _check_unit(f"source_quality[{source_type!r}]", quality)
        if self.metric not in DENSE_METRICS:
            raise ConfidenceError(f"metric must be one of {DENSE_METRICS}, got {self.metric!r}")
        if not self.embedder_id:
            raise ConfidenceError("embedder_id must be a non-empty string, got ''")

    def source_quality_of(self, source_type: str) -> float:
        """C1 quality in [0, 1] of one source type (unknown types get the fallback)."""
        return self.source_quality.get(source_type, self.unknown_source_quality)
