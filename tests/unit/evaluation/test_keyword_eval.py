"""Keyword-only searches in the labelled tools (ADR 029): `calibrate` fits the keyword
model on the same questions searched keyword-only, `eval --mode keyword` measures it as
the pipeline serves it, and what it cannot measure is refused with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import CalibrationArtifact, load_calibration, save_calibration
from ragsift.evaluation.scoring import KEYWORD_UNREAD
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, write_squad


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, str]:
    tmp = tmp_path_factory.mktemp("keyword")
    labelled = write_squad(tmp / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    out = tmp / "cal.json"
    fit = CliRunner().invoke(app, ["calibrate", *data, "--half", "1", "--out", str(out)])
    assert fit.exit_code == 0, fit.output
    return data, out, fit.stdout


def test_calibrate_fits_a_keyword_model_on_the_bm25_scale(
    fitted: tuple[list[str], Path, str],
) -> None:
    _, out, stdout = fitted
    artifact = load_calibration(out)
    part = artifact.keyword
    assert part is not None
    assert not KEYWORD_UNREAD.intersection(part.features)
    assert set(part.features) < set(artifact.features)
    assert part.conformal.n_calibration > 0
    assert part.conformal.in_scope is not None  # what a collection's probes re-certify on
    assert part.conformal.mix is not None  # the bar moves with the scope's mix
    assert "keyword-only queries (ADR 029): own model" in " ".join(stdout.split())


def test_eval_measures_keyword_queries_with_the_keyword_model(
    fitted: tuple[list[str], Path, str],
) -> None:
    data, out, _ = fitted
    args = [*data, "--half", "2", "--artifact", str(out), "--probes", "none", "--json"]
    runs = {}
    for mode in ("hybrid", "keyword"):
        got = CliRunner().invoke(app, ["eval", *args, "--mode", mode])
        assert got.exit_code == 0, got.output
        runs[mode] = json.loads(got.stdout.strip().splitlines()[-1])
    assert runs["keyword"]["mode"] == "keyword"
    assert runs["keyword"]["calibration_version"] == runs["hybrid"]["calibration_version"]
    rule = {r["name"]: r["rule"] for r in runs["keyword"]["scorers"]}["calibrated"]
    bar = load_calibration(out).keyword.conformal.threshold  # type: ignore[union-attr]
    assert f"conformal answer threshold {bar:.2f}" in rule
    assert runs["keyword"]["scorers"] != runs["hybrid"]["scorers"]
    # Keyword queries are never counted in their scope's mix: it is read from the same
    # questions searched hybrid, as the scope's hybrid traffic sets it in the service.
    keyword_mix, hybrid_mix = runs["keyword"]["mix"], runs["hybrid"]["mix"]
    assert keyword_mix["estimated_share"] == hybrid_mix["estimated_share"]
    assert keyword_mix["estimated_share"] is not None


def test_eval_refuses_keyword_mode_where_there_is_nothing_to_measure(
    fitted: tuple[list[str], Path, str], tmp_path: Path
) -> None:
    data, out, _ = fitted
    artifact = load_calibration(out)
    old = CalibrationArtifact.model_validate(
        {**artifact.model_dump(mode="json"), "version": "", "keyword": None}
    )
    before = save_calibration(old, tmp_path / "old.json")
    args = [*data, "--half", "2", "--probes", "none", "--mode", "keyword"]
    got = CliRunner().invoke(app, ["eval", *args, "--artifact", str(before)])
    assert got.exit_code == 2
    assert "fit before keyword-only queries had a model of their own" in " ".join(
        got.output.split()
    )
    got = CliRunner().invoke(app, ["eval", *args, "--artifact", str(out), "--feedback", "50"])
    assert got.exit_code == 2
    assert "keyword-only labels never feed" in " ".join(got.output.split())


def test_calibrate_on_too_few_questions_is_one_clear_error(tmp_path: Path) -> None:
    """It was a ConfidenceError traceback from inside the fit."""
    from tests.unit.evaluation.test_squad_eval import make_topics

    labelled = write_squad(tmp_path / "dev.json", make_topics(2, 2, seed=3), answers=True)
    outside = write_squad(tmp_path / "other.json", make_topics(1, 2, seed=4), answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    out = tmp_path / "cal.json"
    got = CliRunner().invoke(app, ["calibrate", *data, "--out", str(out)])
    assert got.exit_code == 2, got.output
    assert "cannot fit on" in got.output
    assert "need at least" in got.output
    assert "Traceback" not in got.output
    assert not out.exists()


def test_eval_recertifies_the_keyword_model_on_the_probes_searched_keyword_only(
    fitted: tuple[list[str], Path, str],
) -> None:
    data, out, _ = fitted
    args = [*data, "--half", "2", "--artifact", str(out), "--probes", "bundled", "--json"]
    got = CliRunner().invoke(app, ["eval", *args, "--mode", "keyword"])
    assert got.exit_code == 0, got.output
    probed = json.loads(got.stdout.strip().splitlines()[-1])["probes"]
    assert probed["applied"]
    keyword = probed["keyword"]
    assert keyword["applied"], keyword["why_not"]
    assert keyword["threshold"] >= keyword["threshold_before"]
    hybrid = CliRunner().invoke(app, ["eval", *args, "--mode", "hybrid"])
    assert "keyword" not in json.loads(hybrid.stdout.strip().splitlines()[-1])["probes"]
