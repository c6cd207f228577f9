"""B7 pinned: the CLI's confidence line, exactly; and ``ask`` with several collections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.cli.render import confidence_line
from ragsift.schemas import CacheInfo, RetrievalResult
from tests.unit.report.conftest import build_result


def line(**fields: Any) -> str:
    return confidence_line(build_result(**fields)).plain


def test_the_confidence_line_exactly() -> None:
    breakdown = {"scorer": "calibrated"}
    assert (
        line(confidence=0.91, total_found=8, breakdown=breakdown)
        == "● HIGH confidence 0.91 (calibrated) · kept 3/8"
    )
    assert (
        line(confidence=0.72, cache=CacheInfo(hit=True))
        == "◐ MEDIUM confidence 0.72 (calibrated) · kept 3/3 · cached"
    )
    assert line(confidence=0.55) == "○ LOW confidence 0.55 (calibrated) · kept 3/3 · advisory only"
    assert (
        line(confidence=0.04, hits=[], total_found=5)
        == "✕ NONE confidence 0.04 (calibrated) · kept 0/5 · advisory only"
    )


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_SCORER", "weighted")
    monkeypatch.setenv("RAGSIFT_CACHE_ENABLED", "false")  # both asks score afresh
    (tmp_path / "refunds.md").write_text("Refunds are paid within fourteen days.")
    (tmp_path / "legal.md").write_text("Legal notice: refunds are paid by bank transfer.")
    runner = CliRunner()
    for name, collection in (("refunds.md", "default"), ("legal.md", "legal")):
        done = runner.invoke(
            app,
            [
                *("ingest", str(tmp_path / name), "--tenant", "acme"),
                *("--collection", collection, "--data-dir", str(tmp_path / "data")),
            ],
        )
        assert done.exit_code == 0, done.output
    return tmp_path


def test_ask_prints_the_line_of_its_result(workspace: Path) -> None:
    args = ["ask", "How are refunds paid?", "--tenant", "acme", "--collections", "legal"]
    args += ["--selection", "top_k", "--data-dir", str(workspace / "data")]
    runner = CliRunner()
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    result = RetrievalResult.model_validate(json.loads(as_json.output))
    assert result.collections == ["default", "legal"]
    assert {h.collection for h in result.hits} == {"default", "legal"}
    shown = runner.invoke(app, args, terminal_width=200)
    assert shown.exit_code == 0, shown.output
    # the console may wrap a long line: compare the words, in order, from the start
    words = " ".join(confidence_line(result).plain.split())
    assert " ".join(shown.output.split()).startswith(words)


def test_ask_refuses_a_task_with_another_selection(workspace: Path) -> None:
    done = CliRunner().invoke(
        app,
        [
            *("ask", "q", "--tenant", "acme", "--selection", "threshold"),
            *("--task", "debugging", "--data-dir", str(workspace / "data")),
        ],
    )
    assert done.exit_code == 2
    assert "task_type applies to adaptive selection only" in done.output
