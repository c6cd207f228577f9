"""The ``ragsift`` command driven by Typer's runner, on a temporary data directory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from ragsift.cli import app

#: what every CLI test runs with: the zero-dependency embedder, a wide terminal
BASE_ENV = {"RAGSIFT_EMBEDDER_KIND": "hashing", "COLUMNS": "200"}

Invoke = Callable[..., Result]


def run_cli(
    args: Sequence[str], env: dict[str, str] | None = None, stdin: str | None = None
) -> Result:
    """``ragsift ARGS`` in-process; stdout and stderr captured apart (``result.stderr``)."""
    return CliRunner().invoke(app, list(args), env={**BASE_ENV, **(env or {})}, input=stdin)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Invoke the CLI from inside ``tmp_path``, so the default ``.ragsift`` lands there."""
    monkeypatch.chdir(tmp_path)
    return run_cli


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory filled by ``ragsift demo`` (tenant ``demo``), shared read-only."""
    path = tmp_path_factory.mktemp("cli") / "demo"
    result = run_cli(["demo", "--data-dir", str(path)])
    assert result.exit_code == 0, result.output
    return path


def error_lines(result: Result) -> list[str]:
    """The non-empty lines the command wrote to stderr."""
    return [line for line in result.stderr.splitlines() if line.strip()]
