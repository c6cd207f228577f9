"""Settings shared by tests in several tiers."""

from __future__ import annotations

from ragsift.settings import ConfidenceSettings


def low_bar_confidence() -> ConfidenceSettings:
    """Bars low enough that the hashing embedder's small cosines keep hits.

    For tests of plumbing and isolation, not of the calibrated confidence.
    """
    return ConfidenceSettings(
        scorer="weighted",
        similarity_threshold=0.05,
        high_threshold=0.30,
        medium_threshold=0.20,
        low_threshold=0.10,
    )
