"""A document's escape sequences are shown, never acted on by the operator's terminal.

A log ingested with its colour codes is text, and a JSONL line or a documents-topic
event may carry ``\\u001b``: ``ragsift ask`` printed a hit's ``ESC ]0;...`` (retitle the
terminal) and ``ESC [2J`` (clear it) raw. The consoles now show them as stand-ins.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.cli.common import plain_console
from ragsift.cli.terminal import visible

_ACTED_ON = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\t", "\n"}
HOSTILE = "lasts \x1b]0;pwned\x1b\\ two \x1b[2J years \x9b31m here\x7f"


def _printed(*renderables: object) -> str:
    out = io.StringIO()
    console = plain_console(file=out, force_terminal=True, color_system="standard", width=200)
    console.print(*renderables)
    return out.getvalue()


def test_every_character_a_terminal_acts_on_gets_a_stand_in_of_its_width() -> None:
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        shown = visible(chr(code))
        if chr(code) in "\t\n":
            assert shown == chr(code)
        else:
            assert len(shown) == 1, hex(code)
            assert shown not in _ACTED_ON, hex(code)
    assert visible("\x1b[2J") == "␛[2J"
    assert visible("café – 東京") == "café – 東京"


def test_text_in_tables_and_styled_text_cannot_steer_the_terminal() -> None:
    table = Table("text")
    table.add_row(HOSTILE)
    printed = _printed(table, Text(HOSTILE, style="bold"))
    for acted_on in ("\x1b]", "\x1b[2J", "\x9b", "\x7f"):
        assert acted_on not in printed
    assert printed.count("␛]0;pwned␛\\ two ␛[2J years �31m here␡") == 2
    assert "\x1b[1m" in printed  # rich's own style still reaches the terminal


def test_a_hit_with_escape_sequences_is_shown_not_acted_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    monkeypatch.setenv("COLUMNS", "200")
    docs = tmp_path / "docs"
    docs.mkdir()
    line = {"doc_id": "w", "text": f"The warranty {HOSTILE} on laptops."}
    (docs / "d.jsonl").write_text(json.dumps(line) + "\n")
    data = ["--data-dir", str(tmp_path / "data")]
    runner = CliRunner()
    done = runner.invoke(app, ["ingest", str(docs), "-t", "t1", "--no-probe", *data])
    assert done.exit_code == 0, done.output
    asked = runner.invoke(app, ["ask", "How long is the warranty on laptops?", "-t", "t1", *data])
    assert asked.exit_code == 0, asked.output
    assert "␛]0;pwned" in asked.output
    assert "␛[2J" in asked.output
    assert not set(asked.output) & _ACTED_ON


@pytest.mark.parametrize("terminal", [False, True])
def test_json_output_keeps_every_character_as_a_json_escape(terminal: bool) -> None:
    value = {"text": "a\x85b\x1bc\x9bd\x7fe café", "n": 1}
    out = io.StringIO()
    console = plain_console(file=out, force_terminal=terminal, width=40)
    console.print_json(json.dumps(value))
    console.print_json(data=value, indent=None)
    printed = out.getvalue()
    assert not set(printed) & (_ACTED_ON - {"\x1b"})  # ESC only in rich's own styles
    for escape in ("\\u0085", "\\u009b", "\\u007f"):
        assert printed.count(escape) == 2
    if not terminal:
        first, second = printed.split("\n}\n")
        assert json.loads(first + "}") == value
        assert json.loads(second) == value
