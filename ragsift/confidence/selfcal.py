"""Adjust a shipped calibration to one collection's score levels, from pseudo-labels.

Label-free self-calibration (``ragsift calibrate --collection``) scores queries the
collection can answer (pseudo-queries cut from its own chunks) and queries it
cannot (an out-of-domain question bank) with the *shipped* model. This module
keeps that model's coefficients — fit on real questions, they rank well on any
corpus — and re-fits only what moves with a corpus's score levels:

* a probability re-map ``p' = sigmoid(a * z + b)`` of the shipped logit ``z``
  (``a >= 0``: a temperature and an intercept shift; the model stays monotone in
  every hit score), fit on one part of the pseudo-labelled queries;
* the conformal answer threshold, certified on the other part.

The hit threshold is kept: pseudo-queries share words with their source chunk,
so their hits score above real questions' and a threshold fit on them would
drop real answers (docs/adr/008-label-free-self-calibration.md has the figures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.confidence.artifact import (
    CalibrationArtifact,
    ConformalSpec,
    DataSummary,
    Provenance,
)
from ragsift.confidence.calibration import fit_logistic
from ragsift.confidence.conformal import DEFAULT_DELTA, conformal_threshold
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import feature_matrix
from ragsift.confidence.mix import fit_mix_table
from ragsift.confidence.probes import (
    MIN_PROBES,
    InScopeSample,
    certify_with_probes,
    covered_groups,
    fit_probe_remap,
    near_miss_with_probes,
)

__all__ = [
    "MIN_NEGATIVES",
    "MIN_POSITIVES",
    "in_scope_of",
    "mark_uncertified",
    "recalibrate",
    "with_probes",
]

# Fewer pseudo-labelled queries than this on either side cannot support a re-map
# and a certificate (the conformal half gets about half of them).
MIN_POSITIVES: Final = 40
MIN_NEGATIVES: Final = 40
# Share of the pseudo-labelled queries that fit the re-map; the rest certify.
REMAP_FRACTION: Final = 0.5
# Ridge on the two re-map parameters: keeps the fit finite when the pseudo-labels
# separate perfectly (small collections), without moving it measurably otherwise.
REMAP_L2: Final = 1e-2


def _logit(artifact: CalibrationArtifact, signals: npt.NDArray[np.float64]) -> np.ndarray:
    x = feature_matrix(signals, artifact.features)
    return np.asarray(x @ artifact.coef_array + artifact.intercept, dtype=np.float64)


def recalibrate(
    base: CalibrationArtifact,
    signals: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    provenance: Provenance,
    alpha: float | None = None,
    delta: float = DEFAULT_DELTA,
    seed: int = 0,
    groups: Sequence[str] | None = None,
) -> CalibrationArtifact:
    """The shipped artifact ``base`` with its probability map and conformal threshold re-fit.

    Args:
        base: the artifact whose features, coefficients and hit threshold are kept.
        signals: (n, len(SIGNAL_NAMES)) signals of the pseudo-labelled queries, scored
            with ``base``'s hit threshold.
        labels: 1 when the query's source chunk is among the kept hits, else 0
            (always 0 for out-of-domain questions).
        provenance: recorded in the artifact; positive/negative counts are filled in.
        alpha: target risk (``base``'s when None).
        delta: allowed probability that the certificate is wrong.
        seed: seed of the re-map / certificate split.
        groups: the document each pseudo-query was cut from (its own id for a bank
            question): the certificate counts one document's queries' evidence once.

    Raises:
        ConfidenceError: too few positives or negatives, or mismatched inputs.
    """
    s = np.asarray(signals, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if s.ndim != 2 or y.shape != (s.shape[0],):
        raise ConfidenceError(
            f"signals (n, d) and labels (n,) must align, got {s.shape}, {y.shape}"
        )
    positives, negatives = int((y == 1).sum()), int((y == 0).sum())
    if positives < MIN_POSITIVES or negatives < MIN_NEGATIVES:
        raise ConfidenceError(
            f"self-calibration needs at least {MIN_POSITIVES} answerable and"
            f" {MIN_NEGATIVES} unanswerable pseudo-queries, got {positives} and {negatives}"
        )
    target = base.conformal.alpha if alpha is None else alpha
    z = _logit(base, s)
    # Stratified split: both halves keep the pseudo-labels' mix.
    rng = np.random.default_rng(seed)
    remap = np.zeros(y.size, dtype=bool)
    for cls in (0.0, 1.0):
        idx = rng.permutation(np.flatnonzero(y == cls))
        remap[idx[: round(idx.size * REMAP_FRACTION)]] = True
    coef, shift = fit_logistic(z[remap, None], y[remap], nonnegative=[True], l2=REMAP_L2)
    temperature = float(coef[0])
    probs = 1.0 / (1.0 + np.exp(-(temperature * z[~remap] + shift)))
    if groups is not None and len(groups) != y.size:
        raise ConfidenceError(f"groups must have one entry per query, got {len(groups)}")
    cert_groups = None if groups is None else np.asarray(groups, dtype=object)[~remap]
    cr = conformal_threshold(probs, y[~remap], alpha=target, delta=delta, groups=cert_groups)
    mix = fit_mix_table(probs, y[~remap], alpha=target, delta=delta, groups=cert_groups)
    data = base.model_dump(mode="json")
    data.update(
        version="",
        remap=None,  # this re-map replaces any other
        coefficients=[temperature * c for c in base.coefficients],
        intercept=temperature * base.intercept + shift,
        conformal=ConformalSpec.certified(
            cr, method=f"{cr.method} on pseudo-labels", mix=mix
        ).model_dump(mode="json"),
        data=DataSummary(
            source=f"self-calibration of {provenance.collection}",
            n_examples=int(y.size),
            positive_rate=float(y.mean()),
            n_fit=int(remap.sum()),
            n_conformal=int((~remap).sum()),
            notes=(
                f"{base.data.source} model (version {base.version}) re-mapped to this"
                " collection: pseudo-queries cut from its chunks (label 1 when the source"
                " chunk is kept) and out-of-domain questions (label 0)"
            ),
        ).model_dump(mode="json"),
        provenance=provenance.model_copy(
            update={
                "positives": positives,
                "negatives": negatives,
                "temperature": round(temperature, 6),
                "intercept_shift": round(float(shift), 6),
            }
        ).model_dump(mode="json"),
    )
    return CalibrationArtifact.model_validate(data)


def with_probes(
    base: CalibrationArtifact,
    probe_confidence: npt.ArrayLike,
    probe_groups: Sequence[str],
    *,
    provenance: Provenance,
    alpha: float | None = None,
    delta: float = DEFAULT_DELTA,
) -> CalibrationArtifact:
    """``base`` with its answer threshold re-certified on a collection's probe scores.

    The model and the hit threshold are kept. Its probability gets the
    collection's re-map (:class:`~.probes.ProbeRemap`: only ever lowered, after any
    score alignment ``base`` carries, ADR 024), and the
    conformal threshold and the mix table are certified in those terms on
    ``base``'s in-scope calibration rows with the probes as the out-of-scope class
    (:mod:`.probes`), never under ``base``'s own. The result may be infeasible
    (``conformal.feasible`` False: nothing is certified there).

    Raises:
        ConfidenceError: ``base`` keeps no in-scope sample (refit it with
            ``ragsift calibrate``), was re-mapped on probes already, or too few probes.
    """
    sample = in_scope_of(base)
    if base.remap is not None:
        raise ConfidenceError(unprobed_because(base) or "")
    target = base.conformal.alpha if alpha is None else alpha
    probes = np.asarray(probe_confidence, dtype=np.float64)
    groups = np.asarray(probe_groups, dtype=object)
    own = base.conformal
    covered = covered_groups(probes, groups, own.threshold if own.feasible else 1.0)
    if covered:
        keep = ~np.isin(groups.astype(str), covered)
        probes, groups = probes[keep], groups[keep]
        provenance = provenance.model_copy(
            update={"method": f"{provenance.method}; {left_out(covered)}"}
        )
        if probes.size < MIN_PROBES:
            raise ConfidenceError(
                f"the collection answers the probes about {', '.join(covered[:5])}: only"
                f" {probes.size} of the rest are left, under the {MIN_PROBES} needed; bring"
                " probes about other subjects (`calibrate --collection --probes FILE`)"
            )
    remap = fit_probe_remap(sample, probes) if probes.size >= MIN_PROBES else None
    cr, mix = certify_with_probes(
        sample,
        probes,
        groups,
        alpha=target,
        delta=delta,
        # Only ever raised: see certify_with_probes. A base certified at another alpha
        # (``calibrate --alpha``) is no floor for this one.
        floor=own.threshold if own.feasible and own.alpha == target else 0.0,
        floor_table=own.mix if own.alpha == target else None,
        remap=remap,
    )
    near = near_miss_with_probes(
        sample,
        probes,
        groups,
        alpha=target,
        delta=delta,
        floor_table=own.near_miss if own.alpha == target else None,
        remap=remap,
    )
    data = base.model_dump(mode="json")
    data.update(
        version="",
        remap=None if remap is None else remap.model_dump(mode="json"),
        conformal=ConformalSpec.certified(
            cr,
            method=f"{cr.method} on the collection's probes",
            mix=mix,
            in_scope=sample,
            near_miss=near,
        ).model_dump(mode="json"),
        provenance=provenance.model_copy(
            update={"positives": len(sample.relevant), "negatives": int(probes.size)}
        ).model_dump(mode="json"),
    )
    return CalibrationArtifact.model_validate(data)


def unprobed_because(base: CalibrationArtifact) -> str | None:
    """Why a collection's probes cannot re-certify ``base`` (None: they can).

    One rule for ``calibrate --collection``, re-probing after an ingest and
    ``eval --probes auto``.
    """
    if base.conformal.in_scope is None:
        return (
            f"calibration {base.version} keeps no in-scope sample to re-certify with;"
            " refit it with `ragsift calibrate --dataset ...`"
        )
    if base.remap is not None or base.alignment is not None:
        return (
            f"calibration {base.version} was re-certified on probes already; probe with the"
            f" calibration it was made from ({_made_from(base)})"
        )
    return None


def in_scope_of(base: CalibrationArtifact) -> InScopeSample:
    """``base``'s in-scope calibration rows, which :func:`with_probes` re-certifies with.

    Raises:
        ConfidenceError: ``base`` keeps none (fit before it did, or not from labels).
    """
    sample = base.conformal.in_scope
    if sample is None:
        raise ConfidenceError(
            f"calibration {base.version} keeps no in-scope sample to re-certify with;"
            " refit it with `ragsift calibrate --dataset ...`"
        )
    return sample


def _made_from(artifact: CalibrationArtifact) -> str:
    made = artifact.provenance
    return "its base" if made is None else f"version {made.base_version}"


#: How a probe calibration's provenance says which probe groups it left out.
LEFT_OUT: Final = "left out, as the collection answers them:"


def left_out(groups: Sequence[str]) -> str:
    """The provenance note for probe groups left out (:func:`~.probes.covered_groups`)."""
    shown = ", ".join(groups[:5]) + (f" and {len(groups) - 5} more" if len(groups) > 5 else "")
    return f"{LEFT_OUT} {shown}"


def left_out_of(artifact: CalibrationArtifact) -> str | None:
    """The note on probe groups a probe calibration left out, if it left any."""
    method = artifact.provenance.method if artifact.provenance is not None else ""
    at = method.find(LEFT_OUT)
    return None if at < 0 else method[at:]


def mark_uncertified(
    kept: CalibrationArtifact, provenance: Provenance, why: str
) -> CalibrationArtifact:
    """``kept`` as it is, but marked as not holding on ``provenance``'s collection.

    The collection's probes certified no answer threshold (ADR 015). ``kept`` (the
    scope's calibration, or the shipped one) stays in force there, so answers do
    not change; the mark makes every result of the scope say why its bar is not
    certified, and it is a calibration of its own (a new version, so cached results
    made before it are not served).
    """
    data = kept.model_dump(mode="json")
    marked = provenance.model_copy(update={"uncertified": why})
    data.update(version="", provenance=marked.model_dump(mode="json"))
    return CalibrationArtifact.model_validate(data)
