"""A calibration command whose Redis store does not answer says which setting points at it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app

UNREACHABLE = {
    "RAGSIFT_EMBEDDER_KIND": "hashing",
    "RAGSIFT_CALIBRATION_STORE": "redis",
    "RAGSIFT_REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens on port 1
    "RAGSIFT_REDIS_SOCKET_TIMEOUT_S": "0.2",
}


@pytest.mark.parametrize(
    ("args", "failed"),
    [
        (["calibrations", "list"], "cannot read the calibration store"),
        (
            ["calibrations", "remove", "--tenant", "acme"],
            "cannot write the calibration or feedback store",
        ),
    ],
)
def test_an_unreachable_redis_store_is_named_with_its_setting(
    tmp_path: Path, args: list[str], failed: str
) -> None:
    result = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path)], env=UNREACHABLE)
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert failed in said
    assert said.rstrip().endswith("start it or set RAGSIFT_REDIS_URL"), said
    assert "Traceback" not in said
