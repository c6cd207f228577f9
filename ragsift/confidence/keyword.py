"""The calibrated model of keyword-only queries (ADR 029).

A query searched with ``mode: keyword`` ranks by BM25 alone: its primary score is
``bm25 / (bm25 + bm25_half)`` (:mod:`.normalize`), on another scale than the
cosine the artifact's model and hit bar were fit on, and it has no dense channel
to agree with. Before, such queries were scored by the ``weighted`` rule: a number
without a certified meaning, and a corrective keyword retry (B10) could never win
under the calibrated scorer because its number was not comparable.

An artifact fit with ``ragsift calibrate`` therefore carries a :class:`KeywordFit`:
the same fit (:func:`~ragsift.evaluation.scoring.fit_from_run`) run on the same
questions searched keyword-only, which gives its own hit bar on the BM25 scale, its
own logistic model and its own certified answer threshold with the mix and
near-miss tables that move it (ADR 013, ADR 021). It is served through
:meth:`~ragsift.confidence.artifact.CalibrationArtifact.keyword_model`, a view of
the artifact that keeps everything else (embedder, version, provenance, the
collection's score alignment) and reads the keyword part's model. A collection's
probes, searched keyword-only too, re-map and re-certify the part as they do the
hybrid model (its ``remap`` and ``conformal``), on the part's own in-scope sample.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragsift.confidence.conformal_spec import ConformalSpec
from ragsift.confidence.features import check_model
from ragsift.confidence.probes import ProbeRemap

__all__ = ["KeywordFit"]


class KeywordFit(BaseModel):
    """The model, hit bar and certified threshold of keyword-only queries."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    features: tuple[str, ...]
    coefficients: tuple[float, ...]
    intercept: float
    #: The A1 hit bar on the normalized BM25 score, fit as the cosine one is.
    similarity_threshold: float = Field(ge=0.0, le=1.0)
    conformal: ConformalSpec
    #: A collection's re-map of the keyword probability, from its probes searched
    #: keyword-only (:func:`with_keyword_probes`); None: the model's probability.
    remap: ProbeRemap | None = None

    @model_validator(mode="after")
    def _check(self) -> KeywordFit:
        check_model(self.features, self.coefficients)
        return self

    def describe(self) -> str:
        """One line for a summary."""
        conformal = self.conformal
        bound = conformal.risk_upper_bound
        coverage = conformal.coverage
        return (
            f"keyword-only queries (ADR 029): own model, hit bar {self.similarity_threshold:.3f}"
            " on the BM25 scale, answer threshold"
            f" {conformal.threshold:.3f} ({'certified' if conformal.feasible else 'NOT certified'},"
            f" risk bound {'n/a' if bound is None else f'{bound:.3f}'}, answered"
            f" {'n/a' if coverage is None else f'{coverage:.1%}'} of"
            f" {conformal.n_calibration} fit questions)"
        )
