"""Errors raised by the confidence engine.

Kept local to :mod:`ragsift.confidence` so the core library has no dependency
on the rest of the package; both are ``ValueError`` subclasses so callers that
validate input can catch them the usual way.
"""

from __future__ import annotations

__all__ = ["CalibrationMismatchError", "ConfidenceError"]


class ConfidenceError(ValueError):
    """Bad input or configuration for the confidence engine (names the bad value)."""


class CalibrationMismatchError(ConfidenceError):
    """A calibration artifact was fit for another embedder or score metric.

    A probability fit on one embedder's score distribution means nothing for
    another's, so workers refuse the artifact instead of scoring with it.

    Attributes:
        expected_embedder: the embedder the caller runs.
        actual_embedder: the embedder named in the artifact.
        expected_metric: the score metric the caller produces.
        actual_metric: the score metric named in the artifact.
    """

    def __init__(
        self,
        *,
        expected_embedder: str,
        actual_embedder: str,
        expected_metric: str,
        actual_metric: str,
    ) -> None:
        self.expected_embedder = expected_embedder
        self.actual_embedder = actual_embedder
        self.expected_metric = expected_metric
        self.actual_metric = actual_metric
        parts = []
        if expected_embedder != actual_embedder:
            parts.append(f"embedder {actual_embedder!r} (running {expected_embedder!r})")
        if expected_metric != actual_metric:
            parts.append(f"metric {actual_metric!r} (running {expected_metric!r})")
        super().__init__(
            "calibration artifact was fit for "
            + " and ".join(parts or ["another setup"])
            + "; refit it with `ragsift calibrate` for this embedder and metric"
        )

    def to_dict(self) -> dict[str, str]:
        """Fields for a dead letter or a log line."""
        return {
            "error_type": type(self).__name__,
            "error": str(self),
            "expected_embedder": self.expected_embedder,
            "actual_embedder": self.actual_embedder,
            "expected_metric": self.expected_metric,
            "actual_metric": self.actual_metric,
        }
