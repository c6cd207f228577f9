"""Re-fit a tenant's calibration from its own relevance labels (feedback, X2).

The base artifact's model is kept: only its *probability map* moves. With
``z = b + w . x`` the base model's logit for a labelled query, the re-fit learns
``p = sigmoid(a + t * z)`` (an intercept ``a`` and an inverse temperature
``t >= 0``, Platt scaling on the base logit) on one half of the labels, then sets
a new conformal threshold (:mod:`.conformal`) on the other half, which the re-map
never saw. The result is an ordinary artifact (coefficients ``t * w``, intercept
``a + t * b``: still monotone), so every scorer reads it unchanged.

Pure and deterministic: labels are split and ordered by a hash of the query id,
so the same labels give the same artifact (and version) in any arrival order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import numpy as np

from ragsift.confidence.artifact import CalibrationArtifact, ConformalSpec, DataSummary
from ragsift.confidence.calibration import fit_logistic, predict_logistic
from ragsift.confidence.conformal import DEFAULT_ALPHA, DEFAULT_DELTA, conformal_threshold
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import feature_matrix
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.signals import reported_signal_matrix

__all__ = ["MIN_REFIT_LABELS", "LabelledResult", "refit_calibration"]

# Each half needs enough labels for a two-parameter fit and a conformal walk
# (conformal.py starts where >= min(100, n) queries are answered): below 40
# labels in all, a re-fit is noise.
MIN_REFIT_LABELS: Final = 40
# Confidence is reported to this many decimals (scorers.py); the re-fit matches it.
_DECIMALS: Final = 4


@dataclass(frozen=True, slots=True)
class LabelledResult:
    """One scored result and the label a user gave it.

    Attributes:
        query_id: the query the result answered.
        signals: the result's confidence signals (``breakdown.signals``; missing = NaN).
        kept: whether the result kept any hit (no kept hit: confidence 0, as scored).
        relevant: the label: the kept context held the answer.
    """

    query_id: str
    signals: Mapping[str, float]
    kept: bool
    relevant: bool

    @property
    def top_score(self) -> float:
        """The normalized score of the best hit (0 without hits)."""
        return float(self.signals.get("top_score", 0.0))


def _order(query_id: str) -> str:
    return hashlib.sha256(query_id.encode()).hexdigest()


def refit_calibration(
    base: CalibrationArtifact,
    labels: Sequence[LabelledResult],
    *,
    scope: str,
    fitted_at: datetime,
    alpha: float = DEFAULT_ALPHA,
    delta: float = DEFAULT_DELTA,
) -> CalibrationArtifact:
    """A new artifact: ``base`` re-mapped and re-thresholded on ``labels`` (see module doc).

    Args:
        base: the artifact the scope falls back to (collection or shipped default).
        labels: one per query id (duplicates are the caller's to remove).
        scope: what the artifact is for (``tenant/collection``), recorded in its data.
        fitted_at: recorded as provenance (changes the version: pass the same time to
            reproduce an artifact).
        alpha, delta: the conformal risk target.

    Raises:
        ConfidenceError: fewer than :data:`MIN_REFIT_LABELS` labels, duplicated query
            ids, or labels all of one kind (nothing to re-map on).
    """
    if len(labels) < MIN_REFIT_LABELS:
        raise ConfidenceError(
            f"a re-fit needs at least {MIN_REFIT_LABELS} labels, got {len(labels)}"
        )
    if len({r.query_id for r in labels}) != len(labels):
        raise ConfidenceError("labels must have one entry per query id")
    ordered = sorted(labels, key=lambda r: _order(r.query_id))
    y = np.array([1.0 if r.relevant else 0.0 for r in ordered])
    if y.min() == y.max():
        raise ConfidenceError("labels are all relevant or all not relevant: nothing to re-map on")
    x = feature_matrix(reported_signal_matrix([r.signals for r in ordered]), base.features)
    z = x @ base.coef_array + base.intercept
    kept = np.array([r.kept for r in ordered])
    # Alternate halves in hash order: both halves are random samples of the labels.
    fit_part = np.arange(len(ordered)) % 2 == 0
    (temperature,), shift = fit_logistic(z[fit_part, None], y[fit_part], nonnegative=[True])
    coefficients = tuple(float(c) * float(temperature) for c in base.coefficients)
    intercept = float(shift) + float(temperature) * base.intercept
    conf = np.round(
        np.clip(predict_logistic(x, np.array(coefficients), intercept), 0, 1), _DECIMALS
    )
    conf = np.where(kept, conf, 0.0)
    cert = conformal_threshold(conf[~fit_part], y[~fit_part], alpha=alpha, delta=delta)
    mix = fit_mix_table(conf[~fit_part], y[~fit_part], alpha=alpha, delta=delta)
    spec = ConformalSpec.certified(cert, method=f"feedback-remap+{cert.method}", mix=mix)
    data = DataSummary(
        source=f"feedback:{scope}",
        n_examples=len(ordered),
        positive_rate=float(y.mean()),
        n_fit=int(fit_part.sum()),
        n_conformal=int((~fit_part).sum()),
        # Provenance: what was re-fit, on how many labels, when, and the re-map found.
        notes=(
            f"re-fit of {base.version} on {len(ordered)} feedback labels at "
            f"{fitted_at.isoformat()}; temperature {float(temperature):.6g}, "
            f"shift {float(shift):.6g}"
        ),
    )
    # Validated anew (not model_copy): the version is the new content's hash.
    # Not the base's provenance either: this one was made from labels (data says how).
    # Nor its probe re-map (ADR 015), which was fit to its coefficients, not these.
    fields = base.model_dump(exclude={"version", "conformal", "data", "provenance", "remap"})
    fields.update(coefficients=coefficients, intercept=intercept, conformal=spec, data=data)
    return CalibrationArtifact.model_validate(fields)
