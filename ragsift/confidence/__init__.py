"""The confidence engine: pure functions over numpy arrays, no I/O beyond reading its artifact.

Start with :class:`ConfidenceEngine`::

    engine = ConfidenceEngine(ConfidenceConfig())
    result = engine.assess(HitScores(dense=[0.92, 0.45, 0.88, 0.35], metric="cosine"))
    result.confidence, result.status, result.kept_indices, result.to_dict()

Nothing here imports from ``retrieval``, ``streams``, ``workers`` or ``schemas``.
"""

from ragsift.confidence.adaptive import select_adaptive
from ragsift.confidence.answerability import REFUSAL_SENTENCE, Answerability
from ragsift.confidence.artifact import (
    CalibrationArtifact,
    ConformalSpec,
    DataSummary,
    LevelSpec,
    Provenance,
    load_calibration,
    load_default_calibration,
    save_calibration,
)
from ragsift.confidence.assessment import Assessment, BatchAssessment
from ragsift.confidence.calibration import fit_calibration, fit_similarity_threshold
from ragsift.confidence.config import (
    DEFAULT_EMBEDDER_ID,
    RESPONSE_QUALITY_POINTS,
    SOURCE_TYPE_POINTS,
    AdaptiveParams,
    AdvisoryThresholds,
    CompositeWeights,
    ConfidenceConfig,
    LevelThresholds,
    ScorerName,
    Selection,
    WeightedWeights,
)
from ragsift.confidence.conformal import ConformalResult, conformal_threshold
from ragsift.confidence.engine import ConfidenceEngine, ResponseQuality
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.confidence.features import DEFAULT_FEATURES, FEATURE_NAMES, feature_matrix
from ragsift.confidence.filtering import (
    DropReason,
    DropRule,
    StopReason,
    select_threshold,
    select_top_k,
)
from ragsift.confidence.guidance import (
    Disclaimer,
    Recommendation,
    disclaimer_for,
    recommendations_for,
)
from ragsift.confidence.hits import HitBatch, HitScores, entity_matrix
from ragsift.confidence.levels import (
    ADVISORY_FLAGS,
    REVIEW_LEVELS,
    STATUSES,
    AdvisoryFlag,
    ReviewLevel,
    Status,
)
from ragsift.confidence.metrics import (
    RefusalQuality,
    RiskCoverage,
    aurc,
    auroc,
    brier_score,
    ece_by_chance,
    expected_calibration_error,
    proportion_interval,
    refusal_quality,
    risk_coverage_curve,
)
from ragsift.confidence.normalize import (
    DenseMetric,
    Metric,
    NormalizationParams,
    normalize_scores,
)
from ragsift.confidence.scorers import (
    CalibratedScorer,
    CompositeScorer,
    MeanKeptScorer,
    Scorer,
    ScoringInputs,
    WeightedScorer,
    make_scorer,
)
from ragsift.confidence.signals import (
    SIGNAL_NAMES,
    Signals,
    compute_signal_matrix,
    compute_signals,
    prepare_batch,
)
from ragsift.confidence.strategies import TASK_STRATEGIES, TaskStrategy, strategy_for
from ragsift.confidence.validation import (
    ResponseValidation,
    UnsupportedFact,
    answer_source_similarity,
    is_refusal,
    unsupported_facts,
    validate_response,
)

__all__ = [
    "ADVISORY_FLAGS",
    "DEFAULT_EMBEDDER_ID",
    "DEFAULT_FEATURES",
    "FEATURE_NAMES",
    "REFUSAL_SENTENCE",
    "RESPONSE_QUALITY_POINTS",
    "REVIEW_LEVELS",
    "SIGNAL_NAMES",
    "SOURCE_TYPE_POINTS",
    "STATUSES",
    "TASK_STRATEGIES",
    "AdaptiveParams",
    "AdvisoryFlag",
    "AdvisoryThresholds",
    "Answerability",
    "Assessment",
    "BatchAssessment",
    "CalibratedScorer",
    "CalibrationArtifact",
    "CalibrationMismatchError",
    "CompositeScorer",
    "CompositeWeights",
    "ConfidenceConfig",
    "ConfidenceEngine",
    "ConfidenceError",
    "ConformalResult",
    "ConformalSpec",
    "DataSummary",
    "DenseMetric",
    "Disclaimer",
    "DropReason",
    "DropRule",
    "HitBatch",
    "HitScores",
    "LevelSpec",
    "LevelThresholds",
    "MeanKeptScorer",
    "Metric",
    "NormalizationParams",
    "Provenance",
    "Recommendation",
    "RefusalQuality",
    "ResponseQuality",
    "ResponseValidation",
    "ReviewLevel",
    "RiskCoverage",
    "Scorer",
    "ScorerName",
    "ScoringInputs",
    "Selection",
    "Signals",
    "Status",
    "StopReason",
    "TaskStrategy",
    "UnsupportedFact",
    "WeightedScorer",
    "WeightedWeights",
    "answer_source_similarity",
    "aurc",
    "auroc",
    "brier_score",
    "compute_signal_matrix",
    "compute_signals",
    "conformal_threshold",
    "disclaimer_for",
    "ece_by_chance",
    "entity_matrix",
    "expected_calibration_error",
    "feature_matrix",
    "fit_calibration",
    "fit_similarity_threshold",
    "is_refusal",
    "load_calibration",
    "load_default_calibration",
    "make_scorer",
    "normalize_scores",
    "prepare_batch",
    "proportion_interval",
    "recommendations_for",
    "refusal_quality",
    "risk_coverage_curve",
    "save_calibration",
    "select_adaptive",
    "select_threshold",
    "select_top_k",
    "strategy_for",
    "unsupported_facts",
    "validate_response",
]
