"""What a calibration answered of questions its scope cannot answer (an observation
recorded in an artifact's provenance, docs/confidence.md section 12)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["MissingAnswerEstimate"]


class MissingAnswerEstimate(BaseModel):
    """Of ``asked`` questions on the scope's subjects whose answer it does not hold,
    how many the calibration answered (docs/confidence.md, section 12).

    Measured once, when the calibration was made, with it. An observation about the
    artifact, not part of what it computes: left out of its version.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    asked: int = Field(ge=1)
    answered: int = Field(ge=0)

    @model_validator(mode="after")
    def _at_most_asked(self) -> MissingAnswerEstimate:
        if self.answered > self.asked:
            raise ValueError(f"answered ({self.answered}) exceeds asked ({self.asked})")
        return self

    @property
    def share(self) -> float:
        """The share answered."""
        return self.answered / self.asked
