"""The conformal part of a calibration: the certified answer threshold and what
re-certifies it (the traffic mix's tables, the in-scope sample the probes use).

Kept apart from :mod:`.artifact` so that the artifact's parts that carry a model of
their own (the keyword model, ADR 029) can hold one too.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragsift.confidence.conformal import ConformalResult
from ragsift.confidence.mix import MixTable
from ragsift.confidence.near_miss import NearMissTable
from ragsift.confidence.probes import InScopeSample

__all__ = ["ConformalSpec"]


class ConformalSpec(BaseModel):
    """A confidence threshold whose selective risk is <= alpha with probability >= 1 - delta.

    Risk = the share of answered queries (confidence >= threshold) whose kept
    hits lack the relevant context. ``feasible`` is False when no threshold
    met the bound on the calibration data: then nothing should be answered.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    alpha: float = Field(gt=0, lt=1)
    delta: float = Field(gt=0, lt=1)
    threshold: float = Field(ge=0, le=1)
    feasible: bool
    method: str
    n_calibration: int = Field(ge=0)
    risk_upper_bound: float | None = None
    coverage: float | None = None
    #: Articles/documents the calibration questions were drawn in, when the bound
    #: counted them (``conformal_threshold(groups=...)``); None: per-question bound.
    n_groups: int | None = Field(default=None, ge=0)
    #: The design effect at the threshold (variance over the binomial one), with groups.
    design_effect: float | None = Field(default=None, ge=1.0)
    #: The threshold certified at other mixes of answerable and unanswerable
    #: queries, and the class histograms that estimate a scope's mix (:mod:`.mix`).
    mix: MixTable | None = None
    #: The sample's in-scope rows, to re-certify on a collection's own out-of-scope
    #: scores (:mod:`.probes`); None where the fit did not know which rows those were.
    in_scope: InScopeSample | None = None
    #: The threshold certified at other shares of near misses (on-topic queries whose
    #: hits lack the answer) and the three kinds' histograms (:mod:`.near_miss`).
    near_miss: NearMissTable | None = None

    @classmethod
    def certified(
        cls,
        result: ConformalResult,
        *,
        method: str | None = None,
        mix: MixTable | None = None,
        in_scope: InScopeSample | None = None,
        near_miss: NearMissTable | None = None,
    ) -> ConformalSpec:
        """The spec of a :func:`~ragsift.confidence.conformal.conformal_threshold` result.

        ``method`` names how the certified confidences were made when not by the plain
        fit (a re-map on feedback or pseudo-labels); ``mix``, ``in_scope`` and
        ``near_miss`` are :mod:`.mix`, :mod:`.probes` and :mod:`.near_miss`'s fits on it.
        """
        return cls(
            alpha=result.alpha,
            delta=result.delta,
            threshold=result.threshold,
            feasible=result.feasible,
            method=method or result.method,
            n_calibration=result.n_calibration,
            risk_upper_bound=result.risk_upper_bound,
            coverage=result.coverage,
            n_groups=result.n_groups,
            design_effect=result.design_effect,
            mix=mix,
            in_scope=in_scope,
            near_miss=near_miss,
        )

    def answers(self, confidence: float) -> bool:
        """Whether a query with this confidence should be answered under the risk bound."""
        return self.feasible and confidence >= self.threshold
