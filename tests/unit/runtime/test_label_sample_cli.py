"""`ragsift ask` with a label sample: the result it chose says how to label it, and that works."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.settings import EmbedderSettings, Settings

QUESTION = "How many days do I have to return the Orbit thermostat for a refund?"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    monkeypatch.setenv("COLUMNS", "200")

    async def ingest() -> None:
        settings = Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
        async with EmbeddedRuntime(settings) as runtime:
            await runtime.ingest("acme", sample_documents())

    asyncio.run(ingest())
    return tmp_path


def ask(data_dir: Path) -> str:
    result = CliRunner().invoke(app, ["ask", "--data-dir", str(data_dir), "-t", "acme", QUESTION])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_sampled_answer_says_how_to_label_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "sampled for a label" not in ask(data_dir)  # no share: nothing asked
    monkeypatch.setenv("RAGSIFT_FEEDBACK_SAMPLE_SHARE", "1")
    # Words, not lines: a long decision reason wraps the hint even at 200 columns.
    found = re.search(
        r"sampled for a label: ragsift feedback (\S+) --relevant\|--not-relevant",
        " ".join(ask(data_dir).split()),
    )
    assert found is not None
    labelled = CliRunner().invoke(
        app, ["feedback", found[1], "--relevant", "--data-dir", str(data_dir), "-t", "acme"]
    )
    assert labelled.exit_code == 0, labelled.output
