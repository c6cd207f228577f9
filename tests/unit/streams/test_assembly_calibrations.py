"""Where a streaming worker keeps per-collection calibrations when none is configured:
the data dir's folder, as the embedded runtime does, wherever its own retrieval agent
reads them. Before, an indexer with no store never re-probed, so every collection of a
`ragsift worker retrieval indexer` was served on SQuAD's scale (ADR 024)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import Provenance
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.confidence.selfcal import mark_uncertified
from ragsift.errors import ConfigurationError
from ragsift.settings import CalibrationSettings, EmbedderSettings, Settings
from ragsift.streams.assembly import assemble
from ragsift.wiring import CALIBRATIONS_DIR


def _settings(tmp_path: Path, **calibration: object) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        embedder=EmbedderSettings(kind="hashing"),
        calibration=CalibrationSettings(**calibration),
    )


async def test_a_worker_hosting_retrieval_reads_and_reprobes_into_its_data_dir(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    parts = assemble(["retrieval", "indexer"], settings)
    try:
        assert parts.reprober is not None  # was None: "no calibration store configured"
        assert parts.pipeline is not None
        base = parts.pipeline.engines.calibration
        assert isinstance(base, CalibrationArtifact)
        store = DirectoryCalibrationStore(settings.data_dir / CALIBRATIONS_DIR)
        provenance = Provenance(
            method="probes (bundled)", base_version=base.version, collection="docs"
        )
        scoped = mark_uncertified(base, provenance, "marked so it differs from the default")
        store.put(CalibrationScope("docs", "acme"), scoped)
        served = parts.pipeline.engines.calibration_for("acme", "docs")
        assert served is not None
        assert served.version == scoped.version
        assert parts.pipeline.engines.calibration_for("other", "docs") == base
    finally:
        await parts.close()
    # README's one worker hosting every agent starts: its feedback re-fits go there too.
    every = assemble(["retrieval", "indexer", "calibration"], settings)
    await every.close()


async def test_a_worker_without_retrieval_still_needs_a_configured_store(
    tmp_path: Path,
) -> None:
    """What it wrote under its own data dir no retrieval worker would read."""
    settings = _settings(tmp_path)
    parts = assemble(["indexer"], settings)
    try:
        assert parts.reprober is None
    finally:
        await parts.close()
    with pytest.raises(ConfigurationError, match="needs a store the retrieval workers read"):
        assemble(["calibration"], settings)
    configured = _settings(tmp_path, store_dir=tmp_path / "shared")
    parts = assemble(["indexer"], configured)
    try:
        assert parts.reprober is not None
    finally:
        await parts.close()
