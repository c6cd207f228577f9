"""Re-certify the answer threshold on one collection's own out-of-scope tail (probes).

The conformal threshold certifies the selective risk for queries drawn like its
calibration sample, *over the calibration corpus*. How often a question the
corpus cannot answer still scores high is a property of the corpus, not of the
question: short chunks, a dense vocabulary or a large collection give off-topic
questions closer matches. On SQuAD split into two-sentence chunks, the
threshold certified on whole paragraphs let 19.5% of answers through without
relevant context (α = 0.1; docs/evaluation.md).

Measuring that tail needs no labels: questions known not to be about the
collection (*probes*: the bundled bank is real questions about Wikipedia
articles) are searched in it as the pipeline searches, and scored with the
shipped model. Nothing is known about how the collection's answerable questions
score without labels, so that half of the evidence stays the calibration's:
the artifact keeps its conformal sample's in-scope rows (:class:`InScopeSample`:
confidence, whether the relevant context was kept, and the article it was asked
about). The re-certified sample is those rows plus the probes, in place of the
calibration's out-of-scope questions, re-weighted to the calibration's share of
unanswerable queries (:func:`~ragsift.confidence.reweight.certify_at_share`: the
same walk and grouped bound; each probe article is a group). The mix table is
refit on the same sample, so a scope's mix is estimated against the
collection's own out-of-scope histogram.

It assumes the probes are out of scope. A probe the collection does answer
counts as a wrong answer, which raises the bar (fewer answers, never more
risk); a bank about the collection's own subject must be replaced
(``--probes``). It assumes answerable questions score on the collection as on
the calibration corpus; where they score higher (short chunks), the bar is
conservative.
"""

from __future__ import annotations

from typing import Annotated, Final

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragsift.confidence.conformal import ConformalResult
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.mix import MixTable, fit_mix_table
from ragsift.confidence.near_miss import NearMissTable, fit_near_miss_table
from ragsift.confidence.reweight import certify_at_share

__all__ = [
    "MIN_PROBES",
    "InScopeSample",
    "ProbeRemap",
    "certify_with_probes",
    "covered_groups",
    "fit_probe_remap",
    "in_scope_sample",
    "near_miss_with_probes",
]

#: Fewer probes than this say too little about a collection's out-of-scope tail.
MIN_PROBES: Final = 200
#: Rows an in-scope sample may hold; past it, the file was not fitted.
_MAX_ROWS: Final = 1_000_000
#: Decimals a stored confidence keeps (the threshold grid is 0.01 apart).
_DECIMALS: Final = 4
#: A probe group (article) is taken to be about the collection's own subject when
#: more than this share of its questions clear the shipped bar: on SQuAD, an
#: off-topic article's questions cleared it at most 14% of the time.
COVERED_SHARE: Final = 0.5
#: Smaller groups are never judged so: a few questions say too little.
MIN_GROUP: Final = 10
#: Knots a re-map may hold; past it, the file was not fitted.
_MAX_KNOTS: Final = 10_000

_Unit = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class InScopeSample(BaseModel):
    """The in-scope rows of a calibration's conformal sample.

    Attributes:
        confidence: each in-scope calibration question's calibrated confidence.
        relevant: whether its kept hits held the relevant context.
        groups: the article (document) it was asked about, numbered 0..k-1.
        n_out_of_scope: out-of-scope questions in the same conformal sample.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    confidence: tuple[_Unit, ...]
    relevant: tuple[bool, ...]
    groups: tuple[Annotated[int, Field(ge=0, lt=_MAX_ROWS)], ...]
    n_out_of_scope: int = Field(ge=0, le=_MAX_ROWS)

    @model_validator(mode="after")
    def _check(self) -> InScopeSample:
        n = len(self.confidence)
        if not 0 < n <= _MAX_ROWS:
            raise ValueError(f"confidence must hold 1 to {_MAX_ROWS} rows, got {n}")
        if len(self.relevant) != n or len(self.groups) != n:
            raise ValueError("confidence, relevant and groups must have one entry per row")
        return self

    @property
    def unanswerable_share(self) -> float:
        """The conformal sample's share of queries without relevant context."""
        wrong = self.n_out_of_scope + sum(not r for r in self.relevant)
        return wrong / (self.n_out_of_scope + len(self.relevant))


class ProbeRemap(BaseModel):
    """A collection's re-map of the calibrated probability, fit on its probes (ADR 015).

    ``p' = min(p, interp(p, x, y))``: the isotonic fit of "the relevant context
    was kept" on the calibration's in-scope rows and the collection's probes
    (weighted as the calibration's out-of-scope questions), interpolated
    between its blocks, and never above the shipped probability. Where
    questions the collection cannot answer score higher than on the
    calibration corpus (short chunks), their confidence comes down with them;
    where they score lower, the re-map raises nothing: the collection's score
    alignment (ADR 024, :mod:`.alignment`) does that before it, on the same probes,
    and only past what corpus size alone moves. Non-decreasing in
    ``p``, so the confidence stays monotone in every hit score.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    x: tuple[_Unit, ...]
    y: tuple[_Unit, ...]

    @model_validator(mode="after")
    def _check(self) -> ProbeRemap:
        if not 1 <= len(self.x) <= _MAX_KNOTS or len(self.y) != len(self.x):
            raise ValueError(f"x and y must hold the same 1 to {_MAX_KNOTS} knots")
        if any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("x must be strictly increasing")
        if any(b < a for a, b in zip(self.y, self.y[1:], strict=False)):
            raise ValueError("y must be non-decreasing")
        return self

    def apply(self, p: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The re-mapped probabilities (NaN stays NaN)."""
        probs = np.asarray(p, dtype=np.float64)
        return np.minimum(probs, np.interp(probs, self.x, self.y))

    def describe(self, marks: tuple[float, ...] = (0.5, 0.7, 0.9)) -> str:
        """What it does to a few confidences, in words."""
        moved = (f"{p:.1f} -> {v:.2f}" for p, v in zip(marks, self.apply(marks), strict=True))
        return "confidence re-mapped on the probes: " + ", ".join(moved)


def covered_groups(
    probe_confidence: npt.ArrayLike, probe_groups: npt.ArrayLike, bar: float
) -> list[str]:
    """The probe groups the collection seems to answer, to leave out (sorted).

    A bank is only as good as its assumption that the collection does not
    answer it; a Wikipedia-wide collection holds the bank's own articles. A
    group of :data:`MIN_GROUP` or more probes of which more than
    :data:`COVERED_SHARE` clear ``bar`` (the shipped answer threshold) scores like
    answerable questions, not like off-topic ones. Left in, it would lower every
    confidence and raise the bar for questions the collection does answer.
    """
    conf = np.nan_to_num(np.asarray(probe_confidence, dtype=np.float64), nan=0.0)
    groups = np.asarray(probe_groups, dtype=object)
    names, index = np.unique(groups.astype(str), return_inverse=True)
    size = np.bincount(index, minlength=names.size)
    cleared = np.bincount(index, weights=(conf >= bar).astype(np.float64), minlength=names.size)
    covered = (size >= MIN_GROUP) & (cleared > COVERED_SHARE * size)
    return [str(n) for n in names[covered]]


def fit_probe_remap(sample: InScopeSample, probe_confidence: npt.ArrayLike) -> ProbeRemap:
    """The re-map of :class:`ProbeRemap` for ``sample`` and a collection's probe scores."""
    from sklearn.isotonic import IsotonicRegression

    probes = np.nan_to_num(np.asarray(probe_confidence, dtype=np.float64), nan=0.0)
    conf = np.concatenate([np.asarray(sample.confidence, dtype=np.float64), probes])
    labels = np.concatenate([np.asarray(sample.relevant, dtype=np.float64), np.zeros(probes.size)])
    weights = np.concatenate(
        [np.ones(len(sample.confidence)), np.full(probes.size, sample.n_out_of_scope / probes.size)]
    )
    fitted = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True).fit(
        conf, labels, sample_weight=weights
    )
    # Knots at each block's weighted mean confidence, valued at the block's fit.
    block = fitted.predict(conf)
    values, inverse = np.unique(block, return_inverse=True)
    mass = np.bincount(inverse, weights=weights)
    centres = np.bincount(inverse, weights=weights * conf) / mass
    x = np.round(centres, _DECIMALS)
    keep = np.concatenate([[True], np.diff(x) > 0])  # rounding may merge two blocks
    return ProbeRemap(
        x=tuple(float(v) for v in x[keep]),
        y=tuple(round(float(v), _DECIMALS) for v in values[keep]),
    )


def in_scope_sample(
    confidence: npt.ArrayLike,
    labels: npt.ArrayLike,
    in_scope: npt.ArrayLike,
    groups: npt.ArrayLike | None,
) -> InScopeSample | None:
    """The sample to store from a conformal sample (None without in-scope rows)."""
    conf = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(labels)
    mask = np.asarray(in_scope, dtype=bool)
    if mask.shape != conf.shape or y.shape != conf.shape:
        raise ConfidenceError("in_scope must mark every row of the conformal sample")
    if not mask.any():
        return None
    if groups is None:
        numbers = np.arange(int(mask.sum()))
    else:
        _, numbers = np.unique(np.asarray(groups)[mask], return_inverse=True)
    return InScopeSample(
        confidence=tuple(round(float(c), _DECIMALS) for c in conf[mask]),
        relevant=tuple(bool(v) for v in y[mask] != 0),
        groups=tuple(int(g) for g in numbers),
        n_out_of_scope=int((~mask).sum()),
    )


def certify_with_probes(
    sample: InScopeSample,
    probe_confidence: npt.ArrayLike,
    probe_groups: npt.ArrayLike,
    *,
    alpha: float,
    delta: float,
    floor: float = 0.0,
    floor_table: MixTable | None = None,
    remap: ProbeRemap | None = None,
) -> tuple[ConformalResult, MixTable | None]:
    """The threshold certified on ``sample`` with the probes as the out-of-scope class.

    Args:
        sample: the calibration's in-scope rows (its artifact's ``conformal.in_scope``).
        probe_confidence: each probe's confidence on the collection (NaN: nothing
            found, which no threshold answers).
        probe_groups: the article (or any group) each probe was drawn from.
        alpha, delta: the certificate's risk and failure probability.
        floor, floor_table: the calibration's own certified threshold and mix table:
            the result is never under them (the table at any share). Probes are
            questions about other subjects; they cannot vouch for a lower bar
            against questions near the collection's own, which the calibration's
            out-of-scope half stood for.
        remap: the collection's re-map of the probability: the sample, the probes
            and the floors are certified in its terms (a floor of 1.0, answer
            nothing, stays 1.0).

    Returns:
        The certificate at the calibration's share of unanswerable queries, and
        the mix table refit on the same sample (its share set to the calibration's).

    Raises:
        ConfidenceError: fewer than :data:`MIN_PROBES` probes, or mismatched groups.
    """
    conf, labels, groups = _with_probes(sample, probe_confidence, probe_groups)
    if remap is not None:
        conf = remap.apply(conf)
        floor = _mapped(remap, floor)
        if floor_table is not None:
            mapped = tuple(_mapped(remap, t) for t in floor_table.thresholds)
            floor_table = floor_table.model_copy(update={"thresholds": mapped})
    share = sample.unanswerable_share
    table = fit_mix_table(conf, labels, alpha=alpha, delta=delta, groups=groups)
    result = certify_at_share(
        conf, labels, share=share, alpha=alpha, delta=delta, groups=groups, floor=floor
    )
    if table is not None:
        thresholds = table.thresholds
        if floor_table is not None and floor_table.shares == table.shares:
            thresholds = tuple(map(max, thresholds, floor_table.thresholds))
        table = table.model_copy(
            update={"unanswerable_share": round(share, 4), "thresholds": thresholds}
        )
    return result, table


def near_miss_with_probes(
    sample: InScopeSample,
    probe_confidence: npt.ArrayLike,
    probe_groups: npt.ArrayLike,
    *,
    alpha: float,
    delta: float,
    floor_table: NearMissTable | None = None,
    remap: ProbeRemap | None = None,
) -> NearMissTable | None:
    """The near-miss table (:mod:`.near_miss`) of the sample with the probes as its
    out-of-scope kind, as :func:`certify_with_probes` certifies; never under
    ``floor_table`` (the calibration's own, in the re-map's terms). Its sample
    shares are the calibration's, whose near-miss share the bar moves from."""
    conf, labels, groups = _with_probes(sample, probe_confidence, probe_groups)
    if remap is not None:
        conf = remap.apply(conf)
        if floor_table is not None:
            rows = tuple(tuple(_mapped(remap, t) for t in row) for row in floor_table.thresholds)
            floor_table = floor_table.model_copy(update={"thresholds": rows})
    inside = np.arange(conf.size) < len(sample.relevant)
    table = fit_near_miss_table(conf, labels, inside, alpha=alpha, delta=delta, groups=groups)
    if table is None:
        return None
    total = len(sample.relevant) + sample.n_out_of_scope
    near = sum(not r for r in sample.relevant) / total
    return table.floored(floor_table).model_copy(
        update={
            "near_miss_share": round(near, 4),
            "out_of_scope_share": round(sample.n_out_of_scope / total, 4),
        }
    )


def _with_probes(
    sample: InScopeSample, probe_confidence: npt.ArrayLike, probe_groups: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.object_]]:
    """The sample's in-scope rows followed by the probes: confidence, label, group.

    Raises:
        ConfidenceError: fewer than :data:`MIN_PROBES` probes, or mismatched groups.
    """
    probes = np.nan_to_num(np.asarray(probe_confidence, dtype=np.float64), nan=0.0)
    probe_group = np.asarray(probe_groups, dtype=object)
    if probes.ndim != 1 or probe_group.shape != probes.shape:
        raise ConfidenceError("probe confidences and groups must be 1-D and equal length")
    if probes.size < MIN_PROBES:
        raise ConfidenceError(
            f"need at least {MIN_PROBES} probe questions to measure the collection's"
            f" out-of-scope scores, got {probes.size}"
        )
    conf = np.concatenate([np.asarray(sample.confidence, dtype=np.float64), probes])
    labels = np.concatenate([np.asarray(sample.relevant, dtype=np.float64), np.zeros(probes.size)])
    groups = np.concatenate(
        [
            np.asarray([f"in:{g}" for g in sample.groups], dtype=object),
            np.asarray([f"probe:{g}" for g in probe_group], dtype=object),
        ]
    )
    return conf, labels, groups


def _mapped(remap: ProbeRemap, threshold: float) -> float:
    """A threshold in the re-map's terms, rounded up to the grid (1.0: answer nothing)."""
    if threshold >= 1.0:
        return 1.0
    return float(np.ceil(float(remap.apply([threshold])[0]) * 100 - 1e-9) / 100)
