"""Settings shared by tests in several tiers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragsift.settings import ConfidenceSettings, EmbedderSettings, LimitSettings, Settings


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


#: the embedded tests' query limit: low, so a hostile long query is cheap to build
EMBEDDED_MAX_QUERY_CHARS = 500


def embedded_settings(data_dir: Path, **confidence: Any) -> Settings:
    """Embedded-runtime settings for plumbing tests: hashing embedder, low bars.

    The weighted scorer with low bars keeps these tests independent of the fitted
    calibration (tested on its own): the hashing embedder's cosines are small, and
    the plumbing is what is checked. Hashing is pinned (not the default onnx) for
    that reason and for speed. ``confidence`` overrides ConfidenceSettings fields.
    """
    return Settings(
        data_dir=data_dir,
        confidence=ConfidenceSettings(**{**low_bar_confidence().model_dump(), **confidence}),
        limits=LimitSettings(max_query_chars=EMBEDDED_MAX_QUERY_CHARS),
        embedder=EmbedderSettings(kind="hashing"),
    )
