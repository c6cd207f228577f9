"""`ragsift assess`, `console`, and the report in `ask` and `demo` (issue 15), via Typer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.ingest.sample import write_sample_corpus
from ragsift.runtime_store import STORE_FILE

IN_SCOPE = "How many days do I have to return the thermostat?"


@pytest.fixture(autouse=True)
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    # the plumbing is under test, not the semantics: the fast embedder will do
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def indexed(tmp_path: Path, runner: CliRunner) -> Path:
    data = tmp_path / "data"
    corpus = write_sample_corpus(tmp_path / "corpus")
    assert corpus
    done = runner.invoke(
        app, ["ingest", str(tmp_path / "corpus"), "--tenant", "acme", "--data-dir", str(data)]
    )
    assert done.exit_code == 0, done.output
    return data


def asked_id(output: str) -> str:
    found = re.search(r"query_id (ask-[0-9a-f]+)", output)
    assert found, output
    return found.group(1)


def test_assess_shows_what_ask_answered(runner: CliRunner, indexed: Path) -> None:
    # issue 15: this died with AttributeError: 'EmbeddedRuntime' object has no
    # attribute 'find_result'
    asked = runner.invoke(app, ["ask", IN_SCOPE, "-t", "acme", "--data-dir", str(indexed)])
    assert asked.exit_code == 0, asked.output
    assert "report" in asked.output or "REFUSED" in asked.output
    assert "decision:" in asked.output
    query_id = asked_id(asked.output)
    shown = runner.invoke(app, ["assess", query_id, "--data-dir", str(indexed)])
    assert shown.exit_code == 0, shown.output
    assert "breakdown" in shown.output
    assert "decision:" in shown.output
    assert query_id in shown.output


def test_assess_of_an_unknown_id_is_a_clear_error(runner: CliRunner, indexed: Path) -> None:
    runner.invoke(app, ["ask", IN_SCOPE, "-t", "acme", "--data-dir", str(indexed)])
    got = runner.invoke(app, ["assess", "no-such-id", "--data-dir", str(indexed)])
    assert got.exit_code == 2
    assert "no stored result for query id 'no-such-id'" in got.output
    assert "Traceback" not in got.output


def test_assess_on_a_fresh_data_dir_says_so_and_creates_nothing(
    runner: CliRunner, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh"
    got = runner.invoke(app, ["assess", "demo-0", "--data-dir", str(fresh)])
    assert got.exit_code == 2
    assert "no results stored under" in got.output
    assert not fresh.exists()


@pytest.mark.parametrize(
    "args",
    [[], ["q1", "--query", "why?"]],
    ids=["neither", "both"],
)
def test_assess_needs_an_id_or_a_query(runner: CliRunner, tmp_path: Path, args: list[str]) -> None:
    got = runner.invoke(app, ["assess", *args, "--data-dir", str(tmp_path)])
    assert got.exit_code == 2
    assert "give a QUERY_ID, or --query with --chunks" in got.output


def test_assess_scores_given_chunks(runner: CliRunner, indexed: Path) -> None:
    chunks = "returns-and-refunds.md:0,warranty.md:0,not-a-chunk"
    got = runner.invoke(
        app,
        [
            *("assess", "--query", IN_SCOPE, "--chunks", chunks),
            *("-t", "acme", "--data-dir", str(indexed)),
        ],
    )
    assert got.exit_code == 0, got.output
    assert "breakdown" in got.output
    assert "returns-and-refunds.md" in got.output
    assert "not found for tenant 'acme' in 'default': not-a-chunk" in got.output


@pytest.mark.parametrize(
    ("chunks", "tenant"),
    [("not-a-chunk,nor-this", "acme"), ("returns-and-refunds.md:0", "globex")],
    ids=["unknown ids", "another tenant's"],
)
def test_assess_of_chunks_none_of_which_is_found_is_an_error(
    runner: CliRunner, indexed: Path, chunks: str, tenant: str
) -> None:
    got = runner.invoke(
        app,
        [
            *("assess", "--query", IN_SCOPE, "--chunks", chunks),
            *("-t", tenant, "--data-dir", str(indexed)),
        ],
    )
    assert got.exit_code == 2, got.output
    assert f"none of the chunks was found for tenant '{tenant}' in 'default'" in got.output
    assert "breakdown" not in got.output  # no verdict on context that is not there


def test_assess_chunks_needs_chunks_and_a_tenant(runner: CliRunner, indexed: Path) -> None:
    got = runner.invoke(app, ["assess", "--query", IN_SCOPE, "--data-dir", str(indexed)])
    assert got.exit_code == 2
    assert "--query needs --chunks" in got.output


def test_demo_writes_the_store_it_names(runner: CliRunner, tmp_path: Path) -> None:
    # issue 15: demo printed "results: …/results.jsonl", a file it never wrote. It
    # writes it now; the check that the name was absent passed only while the path
    # was long enough for the terminal to fold the name across two lines.
    data = tmp_path / "demo"
    got = runner.invoke(app, ["demo", "--data-dir", str(data)])
    assert got.exit_code == 0, got.output
    lines = (data / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["query_id"] for line in lines][:1] == ["demo-0"]
    assert (data / STORE_FILE).is_file()
    shown = runner.invoke(app, ["assess", "demo-0", "--data-dir", str(data)])
    assert shown.exit_code == 0, shown.output
    assert "demo-0" in shown.output


def test_console_off_loopback_needs_credentials(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_API_KEYS_FILE", str(tmp_path / "no-keys.json"))
    got = runner.invoke(app, ["console", "--host", "0.0.0.0", "--data-dir", str(tmp_path / "d")])
    assert got.exit_code == 2
    assert "no API keys" in got.output
    assert "Traceback" not in got.output
    assert not (tmp_path / "d").exists()
