"""Re-fit a tenant's calibration from its own relevance labels (feedback, X2).

The base artifact's model is kept: only its *probability map* moves. With
``z = b + w . x`` the base model's logit for a labelled query, the re-fit learns
``p = sigmoid(a + t * z)`` (an intercept ``a`` and an inverse temperature
``t >= 0``, Platt scaling on the base logit) on every label. The result is an
ordinary artifact (coefficients ``t * w``, intercept ``a + t * b``: still
monotone), so every scorer reads it unchanged.

**The threshold is certified on every label too** (ADR 022). With ``t > 0`` the
re-map keeps the base's order, so a bar on the re-mapped confidence answers the
queries whose base logit is above some point. The conformal walk
(:mod:`.conformal`) therefore runs on the base logits' ranks among the labelled
queries (their empirical distribution: it reads no label, and unlike the base's
confidence it does not crowd the queries of an overconfident base into the top
bin of the grid), over all the labels; each bar it certifies (the threshold and
the mix table's) becomes the lowest re-mapped confidence among the queries it
answers. Before, the labels were split in two halves, one for the re-map and
one for the walk, so the walk saw half the evidence. With ``t = 0`` the
re-mapped confidence is one number for every query: the walk then runs on it,
over all the labels, and answers everything or nothing.

**Labels on answered results only** (ADR 022). When every label says its result
was answered, the labels cover only the top of the ranking, as when users rate
the answers they were shown: a re-map fit on them is biased, and no bar below
the one they were answered at has any evidence. Such a re-fit keeps the base's
probability map and only *raises* its bar: the walk runs on the base's own
confidences over the labels (a random sample of answered results is one of the
traffic above the bar), and the new threshold is the higher of that and the
base's. Its mix and near-miss tables are the base's, floored at that threshold
(ADR 038). A mix of answered and refused results gets the full re-fit above;
its re-map moves the confidence off the base's near-miss table's scale, so the
table is carried onto the new one (:mod:`.refit_near_miss`, ADR 039).

Pure and deterministic: labels are ordered by a hash of the query id, so the
same labels give the same artifact (and version) in any arrival order.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence._scipy import beta_ppf
from ragsift.confidence.artifact import CalibrationArtifact, ConformalSpec, DataSummary
from ragsift.confidence.calibration import fit_logistic, predict_logistic
from ragsift.confidence.conformal import (
    DEFAULT_ALPHA,
    DEFAULT_DELTA,
    conformal_threshold,
    fewest_to_certify,
    risk_upper_bounds,
)
from ragsift.confidence.dense_only import fill_dense_only
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import feature_matrix
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.refit_near_miss import carried_near_miss
from ragsift.confidence.scorers import CalibratedScorer
from ragsift.confidence.signals import reported_signal_matrix

__all__ = [
    "MIN_REFIT_LABELS",
    "LabelledResult",
    "RefitKind",
    "describe_refit",
    "labels_show_wrong_answers",
    "refit_calibration",
    "refit_kind",
    "withheld_because",
]

# Enough labels for a two-parameter fit and a conformal walk (conformal.py starts
# where half the positives are answered, and no fewer than 22 at alpha = delta = 0.1):
# below 40, a re-fit is noise.
MIN_REFIT_LABELS: Final = 40
#: How a feedback re-fit was made (the prefix of its conformal method): a re-map and
#: a new threshold, or (every label on an answered result) the base's map, bar raised.
RefitKind = Literal["feedback-remap", "feedback-raise"]
# Confidence is reported to this many decimals (scorers.py); the re-fit matches it.
_DECIMALS: Final = 4
_REMAP: Final[RefitKind] = "feedback-remap"
_RAISE: Final[RefitKind] = "feedback-raise"


@dataclass(frozen=True, slots=True)
class LabelledResult:
    """One scored result and the label a user gave it.

    Attributes:
        query_id: the query the result answered.
        signals: the result's confidence signals (``breakdown.signals``; missing = NaN).
        kept: whether the result kept any hit (no kept hit: confidence 0, as scored).
        relevant: the label: the kept context held the answer.
        answered: whether the result was answered (D1), None where not known.
        dense_only: whether its query was searched dense-only: its missing agreement is
            imputed as the base's dense-only fit says (ADR 028).
    """

    query_id: str
    signals: Mapping[str, float]
    kept: bool
    relevant: bool
    answered: bool | None = None
    dense_only: bool = False

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
            ids, or labels all of one kind where some result was refused (nothing
            to re-map on).
    """
    if len(labels) < MIN_REFIT_LABELS:
        raise ConfidenceError(
            f"a re-fit needs at least {MIN_REFIT_LABELS} labels, got {len(labels)}"
        )
    if len({r.query_id for r in labels}) != len(labels):
        raise ConfidenceError("labels must have one entry per query id")
    ordered = sorted(labels, key=lambda r: _order(r.query_id))
    y = np.array([1.0 if r.relevant else 0.0 for r in ordered])
    if all(r.answered for r in ordered):  # nothing is re-mapped: one kind of label will do
        served = CalibratedScorer(base).score_reported(
            [r.signals for r in ordered],
            [int(r.kept) for r in ordered],
            [r.dense_only for r in ordered],
        )
        return _raise_only(base, served, y, scope, fitted_at, alpha, delta)
    if y.min() == y.max():
        raise ConfidenceError("labels are all relevant or all not relevant: nothing to re-map on")
    reported = reported_signal_matrix([r.signals for r in ordered])
    dense = np.array([r.dense_only for r in ordered])
    x = feature_matrix(fill_dense_only(reported, dense, base.dense_only), base.features)
    z = x @ base.coef_array + base.intercept
    kept = np.array([r.kept for r in ordered])
    (temperature,), shift = fit_logistic(z[:, None], y, nonnegative=[True])
    t, a = float(temperature), float(shift)
    coefficients = tuple(float(c) * t for c in base.coefficients)
    intercept = a + t * base.intercept
    conf = _reported(predict_logistic(x, np.array(coefficients), intercept), kept)
    scored = _ranks(z, kept) if t > 0 else conf  # t = 0: one confidence for every query

    def carried(bar: float) -> float:
        """A bar on ``scored`` as the re-mapped confidence that answers the same queries."""
        if t == 0:
            return bar
        answered = conf[scored >= bar]
        return float(answered.min()) if answered.size else 1.0

    cert = conformal_threshold(scored, y, alpha=alpha, delta=delta)
    if cert.feasible:
        cert = dataclasses.replace(cert, threshold=carried(cert.threshold))
    mix = fit_mix_table(scored, y, alpha=alpha, delta=delta)
    if mix is not None:
        # The bars carried over (1.0 there is also "none certified at this share":
        # kept); the histograms, which the mix estimate reads the traffic's
        # re-mapped confidences against, of the re-mapped confidences.
        mapped = fit_mix_table(conf, y, alpha=alpha, delta=delta)
        assert mapped is not None  # the same labels: both kinds present
        bars = tuple(bar if bar >= 1.0 else carried(bar) for bar in mix.thresholds)
        mix = mapped.model_copy(update={"thresholds": bars})
    # The base's near-miss table on the re-map's scale, raising past the near misses
    # the labelled traffic held (ADR 039).
    near = (
        carried_near_miss(base.conformal.near_miss, base.remap, t, a, cert.threshold, conf)
        if cert.feasible
        else None
    )
    if near is not None:  # binned on the base's scale: a scope's reading carries over (ADR 040)
        near = near.model_copy(update={"binned_on": _base_scale(base)})
    spec = ConformalSpec.certified(cert, method=f"{_REMAP}+{cert.method}", mix=mix, near_miss=near)
    data = DataSummary(
        source=f"feedback:{scope}",
        n_examples=len(ordered),
        positive_rate=float(y.mean()),
        n_fit=len(ordered),
        n_conformal=len(ordered),
        # Provenance: what was re-fit, on how many labels, when, and the re-map found.
        notes=(
            f"re-fit of {base.version} on {len(ordered)} feedback labels at "
            f"{fitted_at.isoformat()}; temperature {t:.6g}, shift {a:.6g}; threshold"
            f" certified on the base logits' ranks and carried over"
        ),
    )
    # Validated anew (not model_copy): the version is the new content's hash.
    # Not the base's provenance either: this one was made from labels (data says how).
    # Nor its probe re-map (ADR 015), which was fit to its coefficients, not these.
    # Its score alignment (ADR 024) stays: the labelled results' signals were read
    # on the aligned scale, and so must the scope's next queries be.
    fields = base.model_dump(exclude={"version", "conformal", "data", "provenance", "remap"})
    fields.update(coefficients=coefficients, intercept=intercept, conformal=spec, data=data)
    return CalibrationArtifact.model_validate(fields)


def describe_refit(before: CalibrationArtifact, after: CalibrationArtifact) -> str:
    """What a re-fit did, in words: the answer threshold before and after, and why."""
    labels = after.data.n_examples
    if not after.conformal.feasible:
        return (
            f"no answer threshold is certified on {labels} labels, and the answered results"
            " among them were wrong more often than alpha allows: the scope's queries are refused"
            " until more labels certify one. Labels users chose to give (thumbs-downs,"
            " complaints) read as more risk than there is: send them as reported"
            " (sampled: false), which keeps them out of re-fits"
        )
    was = f"{before.conformal.threshold:.2f}" if before.conformal.feasible else "none"
    said = f"answer threshold {was} -> {after.conformal.threshold:.2f} on {labels} labels"
    if refit_kind(after) == _RAISE:
        return f"{said} (every label on an answered result: the bar can only rise)"
    return said


def withheld_because(refit: CalibrationArtifact, labels: Sequence[LabelledResult]) -> str | None:
    """Why ``refit`` is not put in force (ADR 031), or None: it is.

    A re-fit that certifies a threshold is put in force. One that certifies none would
    refuse every query of its scope. That is the honest answer when the labels show
    the answers the scope was served are wrong more often than alpha; when they do
    not, the labels are merely too few to certify a bar (a few hundred labels on
    traffic that is mostly unanswerable hold a few dozen answers), and the
    calibration in force stays until more arrive. Whether the labels show wrong
    answers is :func:`labels_show_wrong_answers` (ADR 035)."""
    if refit.conformal.feasible:
        return None
    judged = [r for r in labels if r.answered]
    wrong = sum(not r.relevant for r in judged)
    alpha, delta = refit.conformal.alpha, refit.conformal.delta
    if labels_show_wrong_answers(wrong, len(judged), alpha, delta):
        return None
    if len(judged) < fewest_to_certify(alpha, delta) and wrong > alpha * len(judged):
        seen = (
            f" and {wrong} of the {len(judged)} answered results among them were wrong,"
            f" too few answers to show them wrong more often than {alpha:g} (ADR 035)"
        )
    else:
        seen = (
            f" and the answered results among them were wrong {wrong} of {len(judged)}"
            " times, within it"
        )
    return (
        f"{len(labels)} labels certify no answer threshold at risk <= {alpha:g},{seen}:"
        " too few labels, not too many wrong answers; the calibration in force stays"
        " until more labels certify a threshold"
    )


def labels_show_wrong_answers(wrong: int, answered: int, alpha: float, delta: float) -> bool:
    """Whether ``answered`` labelled answers, ``wrong`` of them wrong, show a scope's
    answers wrong more often than ``alpha`` (ADR 035): more than alpha of them were,
    and either they are as many as could certify alpha
    (:func:`~.conformal.fewest_to_certify`, 22 at alpha = delta = 0.1) or, fewer, their
    one-sided ``1 - delta`` Clopper-Pearson lower bound is over alpha. One wrong answer
    among two is over alpha, and shows nothing."""
    if answered == 0 or wrong <= alpha * answered:
        return False
    if answered >= fewest_to_certify(alpha, delta):
        return True
    lower = beta_ppf(delta, np.array([float(wrong)]), np.array([float(answered - wrong + 1)]))
    return float(lower[0]) > alpha


def _base_scale(base: CalibrationArtifact) -> str:
    """The version whose served confidence ``base`` serves on (ADR 040): its own, or,
    for a re-fit that kept its base's map, that base's."""
    near = base.conformal.near_miss
    return base.version if near is None else near.scales(base.version)[0]


def refit_kind(artifact: CalibrationArtifact) -> RefitKind | None:
    """How ``artifact`` was re-fit from feedback, or None when it was not."""
    prefix = artifact.conformal.method.partition("+")[0]
    return _REMAP if prefix == _REMAP else _RAISE if prefix == _RAISE else None


def _raise_only(
    base: CalibrationArtifact,
    conf: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    scope: str,
    fitted_at: datetime,
    alpha: float,
    delta: float,
) -> CalibrationArtifact:
    """The re-fit of labels on answered results only: the base's map (``conf``, the
    labelled results' confidences as the base serves them), a bar only raised."""
    cert = conformal_threshold(conf, y, alpha=alpha, delta=delta)
    floor = base.conformal.threshold if base.conformal.feasible else 1.0
    if cert.feasible and cert.threshold < floor:
        # The walk passed the base's bar if it started above it; either way the labels'
        # own bound there is what they say of it (the base's certificate still stands).
        upper, _, _ = risk_upper_bounds(conf, (y == 0).astype(np.int64), None, delta)
        cert = dataclasses.replace(
            cert,
            threshold=floor,
            coverage=float((conf >= floor).mean()),
            risk_upper_bound=float(upper[round(floor * 100)]),
        )
    mix = base.conformal.mix
    if mix is not None and cert.feasible:  # a declared share reads the table alone
        mix = mix.model_copy(
            update={"thresholds": tuple(max(t, cert.threshold) for t in mix.thresholds)}
        )
    # The base's map is kept, so its near-miss table still reads this scope's
    # confidences: kept, never under the new bar, the scope's bar still rises where
    # near misses show (ADR 021). Floored, it can lower nothing under the new bar.
    # Its bins are on the base's scale: a scope's reading carries over (ADR 040).
    near = base.conformal.near_miss
    if near is not None:
        near = near.model_copy(update={"binned_on": _base_scale(base)})
    if near is not None and cert.feasible:
        rows = tuple(tuple(max(t, cert.threshold) for t in row) for row in near.thresholds)
        near = near.model_copy(update={"thresholds": rows})
    spec = ConformalSpec.certified(cert, method=f"{_RAISE}+{cert.method}", mix=mix, near_miss=near)
    data = DataSummary(
        source=f"feedback:{scope}",
        n_examples=len(y),
        positive_rate=float(y.mean()),
        n_fit=0,
        n_conformal=len(y),
        notes=(
            f"re-fit of {base.version} on {len(y)} feedback labels at "
            f"{fitted_at.isoformat()}, every one on an answered result: the base's map"
            f" kept, its bar {floor:.2f} raised to no less than certified"
        ),
    )
    fields = base.model_dump(exclude={"version", "conformal", "data", "provenance"})
    fields.update(conformal=spec, data=data)
    return CalibrationArtifact.model_validate(fields)


def _reported(p: npt.NDArray[np.float64], kept: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Confidences as the engine reports them: clipped, rounded, 0 without a kept hit."""
    return np.where(kept, np.round(np.clip(p, 0.0, 1.0), _DECIMALS), 0.0)


def _ranks(z: npt.NDArray[np.float64], kept: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Each kept query's share of kept queries whose logit is at most its own (ties share
    one value), in (0, 1]; 0 without a kept hit (answered only at a bar of 0)."""
    out = np.zeros(z.shape, dtype=np.float64)
    held = z[kept]
    if held.size:
        out[kept] = np.searchsorted(np.sort(held), held, side="right") / held.size
    return out
