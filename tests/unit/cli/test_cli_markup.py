"""Text that looks like Rich markup is printed as it is, never read as markup.

A data dir named ``d[/x]`` made ``ragsift eval`` and ``ask`` die with Rich's
MarkupError (a traceback, exit 1), and a document's own ``[bold]`` was swallowed
as a style. The consoles print without markup; style goes in Text objects. Emoji
codes are text too: /etc/passwd's ``root:x:0`` was shown as ``root❌0``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app

TRICKY = "[/x] [bold] root:x:0 :smile:"


@pytest.fixture(autouse=True)
def hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    monkeypatch.setenv("COLUMNS", "200")  # one line per table row: the text is whole


def test_a_document_query_and_path_with_markup_are_shown_as_they_are(tmp_path: Path) -> None:
    runner = CliRunner()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "w.md").write_text(f"The warranty {TRICKY} period is two years.\n")
    data = tmp_path / f"d{TRICKY}"
    ingest = ["ingest", str(docs), "-t", "t1", "--data-dir", str(data), "--no-probe"]
    done = runner.invoke(app, ingest)
    assert done.exit_code == 0, done.output
    asked = runner.invoke(
        app, ["ask", f"What is the warranty {TRICKY} period?", "-t", "t1", "--data-dir", str(data)]
    )
    assert asked.exit_code == 0, asked.output
    assert f"The warranty {TRICKY} period" in asked.output  # the hit's text, brackets and all
    assert "❌" not in asked.output  # nowhere was an emoji code read
    assert "😄" not in asked.output
    assert f"--data-dir {shlex.quote(str(data))}" in asked.output  # as a shell reads it back


def test_an_error_naming_such_a_path_is_one_plain_line(tmp_path: Path) -> None:
    bad = tmp_path / f"bad{TRICKY}"
    bad.mkdir(parents=True)
    out = CliRunner().invoke(app, ["eval", "--dataset", str(bad)])
    assert out.exit_code == 2, out.output
    assert "MarkupError" not in out.output
    assert f"error: --dataset '{bad}' is neither squad2 nor a BEIR folder" in out.output
