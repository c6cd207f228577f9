"""Dense-only searches in the labelled tools (ADR 028): one pass retrieves in several
modes, `calibrate` fits the dense-only imputation, `eval --mode dense` measures it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ragsift.cli.probing as probing
from ragsift.cli import app
from ragsift.confidence import load_calibration
from ragsift.evaluation import load_squad, run_retrieval
from ragsift.evaluation.runner import run_retrievals
from ragsift.retrieval.embedders import HashingEmbedder
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, write_squad


def _hits(run: object) -> list[list[tuple[str, float | None, float | None]]]:
    return [[(h.doc_id, h.dense_score, h.sparse_score) for h in found] for found in run.hits]  # type: ignore[attr-defined]


async def test_one_pass_in_two_modes_is_two_passes(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = load_squad(labelled, outside)
    both = await run_retrievals(data, HashingEmbedder(), k=4, modes=("hybrid", "dense"))
    assert [r.mode for r in both.values()] == ["hybrid", "dense"]
    for mode, run in both.items():
        alone = await run_retrieval(data, HashingEmbedder(), k=4, mode=mode)
        assert _hits(run) == _hits(alone)
    assert all(h.sparse_score is None for found in both["dense"].hits for h in found)
    assert _hits(both["hybrid"]) != _hits(both["dense"])


def test_calibrate_fits_the_dense_only_imputation_and_eval_measures_dense(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    out = tmp_path / "cal.json"
    runner = CliRunner()
    fit = runner.invoke(app, ["calibrate", *data, "--half", "1", "--out", str(out)])
    assert fit.exit_code == 0, fit.output
    artifact = load_calibration(out)
    dense = artifact.dense_only
    assert dense is not None
    assert dense.n_examples > 0
    assert dense.slope >= 0.0
    assert "dense-only agreement = clip(" in fit.stdout
    runs = {}
    for mode in ("hybrid", "dense"):
        args = [*data, "--half", "2", "--artifact", str(out), "--probes", "none"]
        got = runner.invoke(app, ["eval", *args, "--mode", mode, "--json"])
        assert got.exit_code == 0, got.output
        runs[mode] = json.loads(got.stdout.strip().splitlines()[-1])
    assert runs["dense"]["mode"] == "dense"
    assert runs["hybrid"]["mode"] == "hybrid"
    assert runs["dense"]["scorers"] != runs["hybrid"]["scorers"]
    # The service probes a collection with hybrid searches whatever its queries' mode:
    # a dense eval's probes are certified on hybrid searches too.
    probed: list[str] = []
    real = probing.probe_certified

    def spy(run: Any, *args: Any) -> Any:
        probed.append(run.mode)
        return real(run, *args)

    monkeypatch.setattr(probing, "probe_certified", spy)
    args = [*data, "--half", "2", "--artifact", str(out), "--probes", "bundled"]
    got = runner.invoke(app, ["eval", *args, "--mode", "dense", "--json"])
    assert got.exit_code == 0, got.output
    assert probed == ["hybrid"]
    assert json.loads(got.stdout.strip().splitlines()[-1])["mode"] == "dense"
