"""Features of the calibrated scorer: which signals it may use and how gaps are filled.

The calibrated scorer is a logistic model over a few signals. To keep its
confidence monotone in every hit score (a better hit never lowers it), it may
only use signals that are either

* *score-monotone* (never fall when a hit score rises): ``top_score``,
  ``top_logit``, ``margin``, ``support``, ``consensus``, ``agreement``, and the
  reader signals ``sentence_match``, ``token_match`` and ``term_coverage`` (a hit that matches or
  covers the query better never lowers confidence) —
  their coefficients are constrained to be >= 0 when fitting; or
* *score-free* (do not depend on scores): ``entity_coverage``,
  ``source_quality``, ``document_diversity`` — any sign.

Contrast signals (``score_gap``, ``score_spread``, correlations) can fall when a
hit improves, so they are reported but never fed to the calibrated model.

Missing signals are imputed the same way at fit and at score time, so the
model stays calibrated for whatever channels the pipeline provides:
``agreement`` <- ``top_score`` (one retriever has nothing to disagree with),
``entity_coverage`` <- 1 (no entities asked, none missing),
``source_quality`` <- 1/3 (seed C's third-party quality),
``document_diversity`` <- 1, ``sentence_match`` <- ``top_score`` (an unread
chunk's own cosine stands for its best sentence), ``token_match`` <- ``top_score``
(likewise for its tokens), ``term_coverage`` <- 1 (a
query of stopwords only misses no term).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.signals import SIGNAL_INDEX

__all__ = [
    "DEFAULT_FEATURES",
    "FEATURE_NAMES",
    "READER_FEATURES",
    "SCORE_MONOTONE_FEATURES",
    "SWITCHED_FEATURES",
    "check_model",
    "feature_matrix",
    "validate_features",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]

SCORE_MONOTONE_FEATURES: frozenset[str] = frozenset(
    {
        "top_score",
        "top_logit",
        "margin",
        "support",
        "consensus",
        "agreement",
        "sentence_match",
        "term_coverage",
        "token_match",
    }
)
"""Features that never fall when a hit score rises: coefficients must be >= 0."""

_SCORE_FREE_FEATURES: frozenset[str] = frozenset(
    {"entity_coverage", "source_quality", "document_diversity"}
)

FEATURE_NAMES: tuple[str, ...] = tuple(sorted(SCORE_MONOTONE_FEATURES | _SCORE_FREE_FEATURES))
"""Every feature the calibrated scorer accepts."""

DEFAULT_FEATURES: tuple[str, ...] = ("top_score", "support", "consensus", "agreement")
"""The features ragsift fits by default."""

# Constant imputations (see module docstring); agreement is imputed from top_score instead.
_IMPUTE: dict[str, float] = {
    "entity_coverage": 1.0,
    "source_quality": 0.10 / 0.30,  # seed C: third-party points over the 0.3 share
    "document_diversity": 1.0,
    "term_coverage": 1.0,
}
# Imputed from top_score rather than a constant (see module docstring).
_IMPUTE_FROM_TOP = frozenset({"agreement", "sentence_match", "token_match"})
READER_FEATURES: frozenset[str] = frozenset({"sentence_match", "term_coverage", "token_match"})
"""Features the pipeline reads from the hits' text (:mod:`ragsift.retrieval.reader`)."""
SWITCHED_FEATURES: frozenset[str] = frozenset({"sentence_match", "token_match"})
"""Reader features read only with ``RAGSIFT_CONFIDENCE_READER_SIGNALS=on``: sentence
match embeds the hits' sentences at query time, token match runs the model over the top
hit. Term coverage costs a tokenization per chunk (cached) and is read whenever a
calibration uses it (ADR 020)."""
# Keeps logit(top) finite: scores within 1e-4 of 0 or 1 are treated as that bound.
_LOGIT_EPS = 1e-4
# A hit must clear the A1 threshold by this share of the remaining range to count as margin.
_MARGIN_THRESHOLD = 0.70
# Feature sets whose column plan is kept: an engine uses one, a refit a handful.
_PLAN_CACHE_SIZE = 32


def validate_features(features: Sequence[str]) -> tuple[str, ...]:
    """Check feature names; return them as a tuple.

    Raises:
        ConfidenceError: an unknown or repeated feature, or none at all.
    """
    feats = tuple(features)
    if not feats:
        raise ConfidenceError("features must name at least one feature, got none")
    unknown = [f for f in feats if f not in FEATURE_NAMES]
    if unknown:
        raise ConfidenceError(f"unknown features {unknown}; choose from {FEATURE_NAMES}")
    if len(set(feats)) != len(feats):
        raise ConfidenceError(f"features must not repeat, got {list(feats)}")
    return feats


def check_model(features: Sequence[str], coefficients: Sequence[float]) -> None:
    """Check a logistic model's features and coefficients as a model validator does.

    Raises:
        ValueError: an unknown, repeated or missing feature, one coefficient per feature
            not given, or a score-monotone feature's coefficient below 0.
    """
    try:
        validate_features(features)
    except ConfidenceError as exc:
        raise ValueError(str(exc)) from exc
    if len(coefficients) != len(features):
        raise ValueError(
            f"coefficients must match features: {len(coefficients)} vs {len(features)}"
        )
    for name, coef in zip(features, coefficients, strict=True):
        if name in SCORE_MONOTONE_FEATURES and coef < 0:
            raise ValueError(f"coefficient of {name!r} must be >= 0 (monotone), got {coef}")


@dataclass(frozen=True, slots=True)
class _Plan:
    """How to build one feature set's columns: which signal each reads and its fill."""

    columns: IntArray  # signal column per feature (top_score's for computed ones)
    from_top: BoolArray  # (F,) missing values take top_score, not a constant
    constants: FloatArray  # (F,) constant fill of the others
    logit: int | None  # column of top_logit, if asked for
    margin: int | None  # column of margin, if asked for


@lru_cache(maxsize=_PLAN_CACHE_SIZE)
def _plan(features: tuple[str, ...]) -> _Plan:
    # Depends only on the feature names, so it is built once per feature set: a
    # one-query batch would otherwise pay for a Python loop and a stack per call.
    top = SIGNAL_INDEX["top_score"]
    return _Plan(
        columns=np.array([SIGNAL_INDEX.get(f, top) for f in features], dtype=np.intp),
        from_top=np.array([f in _IMPUTE_FROM_TOP for f in features], dtype=bool),
        constants=np.array([_IMPUTE.get(f, 0.0) for f in features], dtype=np.float64),
        logit=features.index("top_logit") if "top_logit" in features else None,
        margin=features.index("margin") if "margin" in features else None,
    )


def feature_matrix(signals: FloatArray, features: Sequence[str]) -> FloatArray:
    """Columns of the calibrated model, from a signal matrix (Q x signals), gaps imputed.

    ``top_logit`` = log(t / (1 - t)) of the clipped top score; ``margin`` =
    clip((top - 0.70) / 0.30, 0, 1), how far the best hit clears seed A's bar.
    """
    plan = _plan(tuple(features))
    if not plan.columns.size:
        return np.zeros((signals.shape[0], 0))
    top = signals[:, SIGNAL_INDEX["top_score"]]
    x = signals[:, plan.columns]  # a copy: fancy indexing never returns a view
    missing = np.isnan(x)
    if missing.any():
        x = np.where(missing, np.where(plan.from_top, top[:, None], plan.constants), x)
    if plan.logit is not None:
        t = top.clip(_LOGIT_EPS, 1.0 - _LOGIT_EPS)
        x[:, plan.logit] = np.log(t / (1.0 - t))
    if plan.margin is not None:
        x[:, plan.margin] = ((top - _MARGIN_THRESHOLD) / (1.0 - _MARGIN_THRESHOLD)).clip(0.0, 1.0)
    return x
