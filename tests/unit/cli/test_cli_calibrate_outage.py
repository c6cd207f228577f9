"""``ragsift calibrate --collection`` with a backing service down: an outage, not bad
input. One ``error:`` line naming the setting to check, exit 1 (``EXIT_FAILURE``); exit 2
(``EXIT_USAGE``) tells a script its arguments are wrong, and retrying them is pointless."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragsift.cli import main
from ragsift.cli.common import EXIT_FAILURE
from tests.unit.cli.conftest import BASE_ENV, error_lines, run_cli

pytestmark = pytest.mark.unit

#: Nothing listens on port 1: a connection there is refused at once.
DOWN = "127.0.0.1:1"


@pytest.mark.parametrize("method", ["probes", "pseudo-queries"])
def test_qdrant_down_during_the_job_exits_1_naming_its_setting(tmp_path: Path, method: str) -> None:
    env = {"RAGSIFT_QDRANT_MODE": "server", "RAGSIFT_QDRANT_URL": f"http://{DOWN}"}
    args = ["calibrate", "--collection", "docs", "--method", method]
    result = run_cli([*args, "--data-dir", str(tmp_path / "data")], env=env)
    assert result.exit_code == EXIT_FAILURE, result.output
    errors = error_lines(result)
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: Qdrant unreachable")
    assert "RAGSIFT_QDRANT_URL" in errors[0]
    assert "Traceback" not in result.output


def test_the_redis_calibration_store_down_exits_1(
    demo_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The probes ran; the store the calibration is put in does not answer. The console
    script's ``main`` says so (Typer's runner would show the exception instead)."""
    env = {
        **BASE_ENV,
        "RAGSIFT_CALIBRATION_STORE": "redis",
        "RAGSIFT_REDIS_URL": f"redis://{DOWN}/0",
        "RAGSIFT_API_KEYS_FILE": str(tmp_path / "keys.json"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = ["calibrate", "--collection", "default", "--tenant", "demo"]
    monkeypatch.setattr(sys, "argv", ["ragsift", *args, "--data-dir", str(demo_dir)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == EXIT_FAILURE
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    assert errors[0].startswith("error: redis calibration store: ConnectionError")
    assert "Traceback" not in err
