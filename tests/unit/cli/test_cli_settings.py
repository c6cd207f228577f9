"""``ragsift settings`` shows the values queries are judged by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsift.confidence import load_calibration
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.engines import packaged_calibration_path
from tests.unit.cli.conftest import run_cli


def _confidence(env: dict[str, str] | None = None) -> dict[str, Any]:
    result = run_cli(["settings"], env=env)
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)["confidence"]
    return shown


def _artifact() -> Any:
    embedder_id = HashingEmbedder().embedder_id
    path = packaged_calibration_path(embedder_id)
    assert path is not None
    return load_calibration(path, embedder_id=embedder_id, metric="cosine")


def test_the_calibrations_hit_threshold_is_shown_as_applied_and_marked() -> None:
    artifact = _artifact()
    shown = _confidence()
    assert shown["similarity_threshold"] == {
        "value": artifact.similarity_threshold,
        "from": f"calibration {artifact.version} ({artifact.embedder_id})",
    }
    assert shown["min_documents"] == {"value": 1, "from": "calibrated scorer"}
    assert shown["answer_threshold"]["value"] == artifact.conformal.threshold
    assert shown["answer_threshold"]["from"].startswith(f"calibration {artifact.version}")
    assert shown["calibration_version"] == artifact.version
    # Keyword-only queries are judged by the artifact's keyword model (ADR 029).
    assert artifact.keyword is not None
    assert shown["keyword_only"] == {
        "similarity_threshold": artifact.keyword.similarity_threshold,
        "answer_threshold": artifact.keyword.conformal.threshold,
        "from": f"calibration {artifact.version} ({artifact.embedder_id}), its keyword model",
    }


def test_a_threshold_the_operator_set_is_shown_plain() -> None:
    shown = _confidence({"RAGSIFT_CONFIDENCE_SIMILARITY_THRESHOLD": "0.55"})
    assert shown["similarity_threshold"] == 0.55


def test_an_uncalibrated_scorer_shows_the_seed_rules() -> None:
    shown = _confidence({"RAGSIFT_CONFIDENCE_SCORER": "weighted"})
    assert shown["similarity_threshold"] == 0.7
    assert shown["min_documents"] == 2
    assert shown["answer_threshold"] == shown["low_threshold"]
    assert "calibration_version" not in shown
    assert "keyword_only" not in shown


def test_secrets_stay_masked() -> None:
    result = run_cli(["settings"], env={"RAGSIFT_REDIS_URL": "redis://:hunter2@localhost:6379/0"})
    assert result.exit_code == 0
    assert "hunter2" not in result.stdout


def test_bad_settings_are_one_line_exit_2() -> None:
    result = run_cli(["settings"], env={"RAGSIFT_CONFIDENCE_HIGH_THRESHOLD": "0.1"})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.output


def test_the_confidence_doc_quotes_the_packaged_calibrations() -> None:
    # docs/confidence.md §5-6 gave seed A's 0.70 and seed D's 2 documents, which the
    # calibrated service does not apply; it now quotes the artifacts' own figures.
    doc = (Path(__file__).parents[3] / "docs" / "confidence.md").read_text(encoding="utf-8")
    for embedder_id in ("onnx-all-MiniLM-L6-v2-int8-384", HashingEmbedder().embedder_id):
        path = packaged_calibration_path(embedder_id)
        assert path is not None
        artifact = load_calibration(path, embedder_id=embedder_id, metric="cosine")
        assert f"{artifact.similarity_threshold:.3f}" in doc
        assert f"{artifact.conformal.threshold:.2f}" in doc
    assert "one hit is enough" in doc


def test_a_missing_calibration_still_shows_the_settings(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.json")
    result = run_cli(["settings"], env={"RAGSIFT_CONFIDENCE_CALIBRATION_PATH": missing})
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: cannot tell the confidence values in effect")
    shown = json.loads(result.stdout)["confidence"]
    assert shown["calibration_path"] == missing
    assert shown["applied"].startswith("unknown: ")
