"""``ragsift eval`` with and without corrective retrieval (B10), on a small SQuAD-format set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_squad_eval import OUTSIDE, TOPICS, write_squad
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import load_calibration
from ragsift.errors import ConfigurationError
from ragsift.evaluation import load_squad, run_retrieval
from ragsift.evaluation.corrective import EvalCorrection
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.settings import CorrectiveSettings

EMBEDDER = HashingEmbedder()


def artifact_path() -> Path:
    path = packaged_calibration_path(EMBEDDER.embedder_id)
    assert path is not None
    return path


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI embeds with the embedder of the artifact these tests apply."""
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")


def eval_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    args = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    out = CliRunner().invoke(
        app, ["eval", *args, "--artifact", str(artifact_path()), "--probes", "none", "--json"]
    )
    assert out.exit_code == 0, out.output
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


def test_eval_runs_with_and_without_corrective_retrieval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without = eval_json(tmp_path, monkeypatch)
    assert "corrective" not in without
    every = eval_json(
        tmp_path,
        monkeypatch,
        RAGSIFT_CORRECTIVE_ENABLED="1",
        RAGSIFT_CORRECTIVE_TRIGGER_CONFIDENCE="1",
    )
    fix = every["corrective"]
    assert fix["settings"]["enabled"] is True
    # A bar of 1 triggers every query the expansion can add a term to: all of these.
    assert fix["retried"] == fix["retried_low_confidence"] == every["evaluated_queries"]
    assert 0 <= fix["retry_won_answered"] <= fix["retry_won"] <= fix["retried"]
    assert sum(fix["retry_won_answered_by_kind"].values()) == fix["retry_won_answered"]
    risk = fix["risk_of_won_answers"]
    assert risk is None or 0.0 <= risk <= 1.0
    assert [s["name"] for s in every["scorers"]] == [s["name"] for s in without["scorers"]]


def test_eval_with_corrective_retrieval_needs_an_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_CORRECTIVE_ENABLED", "1")
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    out = CliRunner().invoke(app, ["eval", "--labelled", str(labelled)])
    assert out.exit_code == 2
    assert "needs --artifact" in out.output


async def test_eval_correction_retries_each_query_at_most_once(tmp_path: Path) -> None:
    data = load_squad(
        write_squad(tmp_path / "dev.json", TOPICS, answers=True),
        write_squad(tmp_path / "other.json", OUTSIDE, answers=False),
    )
    artifact = load_calibration(artifact_path())
    settings = CorrectiveSettings(enabled=True, trigger_confidence=1.0, strategy="wider", max_k=12)
    correction = EvalCorrection(settings, artifact, EMBEDDER.embedder_id, max_k=50)
    run = await run_retrieval(data, EMBEDDER, k=4, corrective=correction)
    assert len(correction.records) == len(run.queries)
    assert all(r is not None and r.tried == ["wider"] for r in correction.records)
    for record, hits in zip(correction.records, run.hits, strict=True):
        assert record is not None
        # The winner's hits are the query's: 12 after a won wider retry, else the first 4.
        assert len(hits) <= (12 if record.won == "wider" else 4)


def test_eval_correction_reads_term_coverage_and_refuses_sentence_match() -> None:
    """Both tries are scored as the pipeline scores them: the packaged artifact's term
    coverage is read from each try's hits; sentence match would need embeddings."""
    artifact = load_calibration(artifact_path())
    assert "term_coverage" in artifact.features
    settings = CorrectiveSettings(enabled=True)
    assert EvalCorrection(settings, artifact, EMBEDDER.embedder_id, max_k=50).terms is not None
    sentences = artifact.model_copy(
        update={"features": (*artifact.features, "sentence_match")}
        | {"coefficients": (*artifact.coefficients, 1.0), "version": "cal-s"}
    )
    with pytest.raises(ConfigurationError, match=r"does not embed the retry.s hits"):
        EvalCorrection(settings, sentences, EMBEDDER.embedder_id, max_k=50)
