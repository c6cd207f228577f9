"""Every command's --help renders, in a user's words."""

from __future__ import annotations

import re

import pytest
import typer
from typer.core import TyperGroup

from ragsift.cli import app
from ragsift.streams.worker import WORKER_NAMES
from tests.unit.cli.conftest import run_cli

# FEATURES.md ids ("B5:", "X7", "C1 source type") mean nothing to a user.
FEATURE_ID = re.compile(r"\b[A-EX][0-9]{1,2}\b")


def _commands(group: TyperGroup, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    # TyperGroup, not click.Group: typer ships its own copy of click, whose groups are
    # not click's, so an isinstance on click.Group never descended into ours.
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, TyperGroup):
            found.extend(_commands(command, path))
    return found


COMMANDS = _commands(typer.main.get_group(app))


def test_every_command_is_listed() -> None:
    names = {c[0] for c in COMMANDS}
    assert {"demo", "ingest", "ask", "settings", "worker", "submit", "tail", "api"} <= names


def test_nested_commands_are_listed() -> None:
    """The groups' commands get their --help checked too, not only the groups."""
    nested = {c for c in COMMANDS if len(c) == 2}
    assert {
        ("schemas", "export"),
        ("k8s", "topics"),
        ("audit", "verify"),
        ("keys", "create"),
        ("keys", "list"),
        ("keys", "revoke"),
    } <= nested


def _shown(text: str) -> str:
    """Help text without the rows of commands rewritten elsewhere."""
    rows = [line for line in text.splitlines() if line.strip("│ ").split(" ")[0] != "assess"]
    return "\n".join(rows)


@pytest.mark.parametrize("command", [(), *COMMANDS], ids=lambda c: " ".join(c) or "ragsift")
def test_help_renders_without_feature_ids(command: tuple[str, ...]) -> None:
    result = run_cli([*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.stdout
    assert FEATURE_ID.findall(_shown(result.stdout)) == [], result.stdout


GROUPS = [(), *(c for c in COMMANDS if len(c) == 1 and c[0] in {"audit", "calibrations", "keys"})]


@pytest.mark.parametrize("group", GROUPS, ids=lambda c: " ".join(c) or "ragsift")
def test_a_command_lists_summary_flows_as_one_line(group: tuple[str, ...]) -> None:
    """Wide enough, each listed command's summary is one row: the docstring's line
    breaks do not cut it mid-sentence (``settings`` was cut after "values a")."""
    result = run_cli([*group, "--help"], env={"COLUMNS": "400"})
    box = result.stdout.split("Commands")[1]
    rows = [line.strip("│ ") for line in box.splitlines()[1:] if line.startswith("│")]
    assert rows, result.stdout
    assert all(not row[:1].isspace() and "  " in row for row in rows), rows
    if not group:
        assert any("confidence values a calibration sets" in row for row in rows), rows


def test_a_help_body_flows_in_paragraphs() -> None:
    """``--help`` reflows each paragraph of the docstring; the breaks between
    paragraphs stay (``feedback``'s body broke after "replaces")."""
    result = run_cli(["feedback", "--help"], env={"COLUMNS": "400"})
    assert "(labelling again replaces it). With RAGSIFT_FEEDBACK_MIN_LABELS" in result.stdout
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert (
        lines[
            lines.index(
                "Label a past embedded result; re-fit the tenant's calibration"
                " once enough labels exist."
            )
            + 1
        ]
        == ""
    )  # a paragraph of its own


def test_worker_help_names_every_worker() -> None:
    result = run_cli(["worker", "--help"])
    for name in WORKER_NAMES:
        assert name in result.stdout


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        (["api"], "(default: RAGSIFT_API_METRICS_PORT or 9464)"),
        (["api"], "(default: RAGSIFT_API_METRICS_HOST or 127.0.0.1)"),
        (["ask"], "(default: RAGSIFT_DATA_DIR or .ragsift)"),
        (["api"], "(default: RAGSIFT_API_PORT or 8080)"),
        (["keys", "create"], "(default: query and read)"),
    ],
)
def test_defaults_in_help_are_not_swallowed_as_markup(command: list[str], shown: str) -> None:
    # Rich reads "[default: 9464]" as a markup tag and prints nothing of it.
    assert shown in run_cli([*command, "--help"]).stdout
