"""Reader signals in evaluation: runs carry reader scores, `calibrate` fits them with the
reader on, `eval --artifact` reads for an artifact that uses them, and the report
gives the near-miss AUROC (in-scope against near-miss questions only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_squad_eval import OUTSIDE, TOPICS, write_squad
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import auroc, load_calibration
from ragsift.evaluation import evaluate_scorers, fit_from_run, load_squad, run_retrieval
from ragsift.evaluation.scoring import READER_SIGNAL_FEATURES, SHIPPED_FEATURES
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.reader import Reader


async def test_a_run_with_a_reader_carries_scores_aligned_with_its_hits(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    embedder = HashingEmbedder()
    reader = Reader(embedder, encoder=Bm25Encoder(), top_n=2)
    run = await run_retrieval(load_squad(labelled, outside), embedder, k=4, reader=reader)
    assert run.reader is not None
    assert len(run.reader) == len(run.hits)
    for hits, read in zip(run.hits, run.reader, strict=True):
        assert read.sentence.shape == read.coverage.shape == (len(hits),)
        assert np.isnan(read.sentence[2:]).all()  # only the top 2 are read
    artifact, _fit = fit_from_run(
        run, fit_fraction=0.5, features=("top_score", *READER_SIGNAL_FEATURES)
    )
    assert artifact.features == ("top_score", *READER_SIGNAL_FEATURES)
    everything = np.ones(len(run.queries), dtype=bool)
    result = evaluate_scorers(run, artifact, everything)
    kinds = np.array([q.kind for q in run.queries])
    on_topic = kinds != "out_of_scope"
    conf = result.scores["calibrated"][0]
    expected = auroc(conf[on_topic], result.labels[on_topic])
    assert result.reports[0].near_miss_auroc == pytest.approx(expected)


def test_cli_fits_sentence_and_token_match_only_when_on_and_reads_for_such_an_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    runner = CliRunner()
    off = tmp_path / "off.json"
    assert runner.invoke(app, ["calibrate", *data, "--half", "1", "--out", str(off)]).exit_code == 0
    # Off, the fit reads term coverage (a tokenization per chunk) but no sentences.
    assert load_calibration(off).features == SHIPPED_FEATURES
    assert "sentence_match" not in SHIPPED_FEATURES
    assert "token_match" not in SHIPPED_FEATURES
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_READER_SIGNALS", "on")
    on = tmp_path / "on.json"
    fit = runner.invoke(app, ["calibrate", *data, "--half", "1", "--out", str(on)])
    assert fit.exit_code == 0, fit.output
    # ONNX MiniLM (the default embedder) gives token states: token match is fit too
    assert load_calibration(on).features[-3:] == READER_SIGNAL_FEATURES
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_READER_SIGNALS", "off")  # the artifact decides
    applied = runner.invoke(app, ["eval", *data, "--half", "2", "--artifact", str(on), "--json"])
    assert applied.exit_code == 0, applied.output
    summary = json.loads(applied.stdout.strip().splitlines()[-1])
    assert summary["reader_signals"] == sorted(READER_SIGNAL_FEATURES)
    calibrated = summary["scorers"][0]
    assert calibrated["name"] == "calibrated"
    assert 0.0 <= calibrated["near_miss_auroc"] <= 1.0


@pytest.mark.parametrize(
    ("kind", "tokens"), [("onnx", True), ("hashing", False), ("openai", False)]
)
def test_token_match_is_fit_only_with_an_embedder_that_gives_token_states(
    kind: str, tokens: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragsift.cli.labelled import _fit_features
    from ragsift.settings import Settings

    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", kind)
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_READER_SIGNALS", "on")
    features = _fit_features(Settings())
    assert ("token_match" in features) is tokens
    assert "sentence_match" in features
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_READER_SIGNALS", "off")
    assert _fit_features(Settings()) == SHIPPED_FEATURES
