"""What ``--help`` says of an option is what the option does (issue: CLI consistency)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from ragsift.cli import app
from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from tests.unit.cli.conftest import Invoke, error_lines, run_cli
from tests.unit.cli.test_cli_calibrations import DEFAULT, made_on

pytestmark = pytest.mark.unit


def _commands() -> dict[str, Any]:
    """Every command of ``ragsift`` by its path (``calibrations remove``)."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        found[path] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def _options(command: Any) -> dict[str, list[str]]:
    """Each option of ``command`` by its long name, with all its names."""
    return {
        next(o for o in p.opts if o.startswith("--")): [*p.opts, *p.secondary_opts]
        for p in command.params
        if p.param_type_name == "option"
    }


def test_every_embedded_commands_tenant_option_takes_t() -> None:
    # `calibrations remove --tenant` alone took no -t: `remove -t acme` was "No such
    # option", where reprobe, ask, ingest and the rest take it.
    embedded = {
        path: options
        for path, command in _commands().items()
        if "--data-dir" in (options := _options(command)) and "--tenant" in options
    }
    assert "calibrations remove" in embedded
    assert {path for path, options in embedded.items() if "-t" not in options["--tenant"]} == set()


def test_calibrations_remove_takes_t(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = DirectoryCalibrationStore(data / "calibrations")
    store.put(CalibrationScope("docs", "acme"), made_on(DEFAULT.version))
    args = ["calibrations", "remove", "-c", "docs", "-t", "acme", "--data-dir", str(data)]
    result = run_cli(args)
    assert result.exit_code == 0, result.output
    assert store.get(CalibrationScope("docs", "acme")) is None


def test_demo_help_says_its_folder_is_deleted_first(cli: Invoke) -> None:
    # It said only "Where the demo writes its shard and audit file.", while the demo
    # deletes the folder before it starts (refusing one it did not write).
    result = cli(["demo", "--help"])
    assert result.exit_code == 0
    shown = " ".join(result.stdout.replace("│", " ").split())
    assert "deleted first" in shown


@pytest.mark.parametrize("level", ["verbose", "INFOO", "1"])
def test_worker_refuses_a_log_level_it_does_not_know(cli: Invoke, level: str) -> None:
    # The plain runtime read an unknown --loglevel as info without a word.
    result = cli(
        ["worker", "retrieval", "--loglevel", level],
        env={  # nothing listens there: were the level let through, it would say so
            "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
            "RAGSIFT_REDIS_URL": "redis://127.0.0.1:1/0",
        },
    )
    assert result.exit_code == 2, result.output
    [line] = error_lines(result)
    assert line.startswith("error: --loglevel")
    assert repr(level) in line
