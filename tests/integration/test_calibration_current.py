"""The shipped calibration is exactly what `ragsift calibrate --dataset squad2` fits today."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragsift.cli import SQUAD_DIR
from ragsift.confidence import load_calibration
from ragsift.retrieval.engines import packaged_calibration_path


def test_shipped_artifact_is_reproducible(tmp_path: Path) -> None:
    if not (SQUAD_DIR / "dev-v2.0.json").is_file():
        pytest.fail(f"the labelled set is missing: {SQUAD_DIR}", pytrace=False)
    out = tmp_path / "cal.json"
    subprocess.run(
        [sys.executable, "-m", "ragsift", "calibrate", "--dataset", "squad2", "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    shipped = packaged_calibration_path("ragsift-hashing-v1-384")
    assert shipped is not None
    fresh, packaged = load_calibration(out), load_calibration(shipped)
    assert fresh.version == packaged.version, (
        "ragsift/confidence/artifacts/ragsift-hashing-v1-384.json is stale: re-run"
        " `ragsift calibrate --dataset squad2 --out` on it"
    )
    assert json.loads(out.read_text()) == json.loads(shipped.read_text())
