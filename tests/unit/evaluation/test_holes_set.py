"""A labelled set over a corpus with holes (`--holes`): on-topic questions whose
answer the corpus lacks, fitted as unanswered by `ragsift calibrate` (ADR 020)."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence import load_calibration
from ragsift.errors import InvalidEventError
from ragsift.evaluation import load_squad, select_half
from ragsift.evaluation.beir import load_beir
from ragsift.evaluation.dataset import left_out, with_holes
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, write_squad

ROOT = Path(__file__).resolve().parents[3]


def _set(tmp_path: Path):  # type: ignore[no-untyped-def]
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    return load_squad(labelled, outside)


def test_left_out_never_takes_an_articles_last_paragraph() -> None:
    rng = random.Random(0)
    for n in range(1, 30):
        dropped = left_out(n, 0.9, rng)
        assert n - 1 not in dropped
        assert dropped <= set(range(n))
    assert left_out(6, 0.0, random.Random(0)) == set()


def test_holes_turn_the_left_out_paragraphs_questions_into_near_misses(tmp_path: Path) -> None:
    ds = _set(tmp_path)
    holed = with_holes(ds, 0.5)
    kept = {d.doc_id for d in holed.documents}
    gone = {d.doc_id for d in ds.documents} - kept
    assert 0 < len(gone) < len(ds.documents)
    # every article keeps its last paragraph, so its other questions stay on topic
    assert {f"{title}-{len(rows) - 1}" for title, rows in TOPICS.items()} <= kept
    by_id = {q.query_id: q for q in ds.queries}
    for q in holed.queries:
        was = by_id[q.query_id]
        if was.relevant & gone:
            assert (q.kind, q.relevant, q.group) == ("near_miss", frozenset(), was.group)
        else:
            assert q == was
    # the set's own (written) near misses leave: every near miss is a hole
    holes = [q for q in holed.queries if q.kind == "near_miss"]
    assert len(holes) == sum(1 for q in ds.queries if q.kind == "in_scope" and q.relevant & gone)
    assert holed.counts()["out_of_scope"] == ds.counts()["out_of_scope"]
    assert set(holed.doc_groups) == kept
    assert "50% holes" in holed.name
    assert with_holes(ds, 0.5) == holed  # seeded
    assert with_holes(ds, 0.0) is ds


@pytest.mark.parametrize("fraction", [-0.1, 1.0, 2.0, math.nan, math.inf])
def test_a_holes_share_outside_zero_to_one_is_refused(tmp_path: Path, fraction: float) -> None:
    with pytest.raises(InvalidEventError, match=r"holes share must be in \[0, 1\)"):
        with_holes(_set(tmp_path), fraction)


def test_a_set_without_articles_cannot_have_holes(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "alpha beta"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha?"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(InvalidEventError, match="holes need articles"):
        with_holes(load_beir(folder), 0.2)


def test_the_script_and_the_library_make_the_same_holes(tmp_path: Path) -> None:
    """`scripts/squad_to_beir.py --holes` and `--holes` on the SQuAD files agree."""
    squad = tmp_path / "squad"
    squad.mkdir()
    write_squad(squad / "dev-v2.0.json", TOPICS, answers=True)
    write_squad(squad / "test-v2.0.json", OUTSIDE, answers=False)
    out = tmp_path / "beir"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "squad_to_beir.py"),
            str(squad),
            str(out),
            "--half",
            "2",
            "--holes",
            "0.5",
        ],
        check=True,
        capture_output=True,
    )
    written = {json.loads(line)["_id"] for line in (out / "corpus.jsonl").read_text().splitlines()}
    holed = with_holes(select_half(load_squad(squad / "dev-v2.0.json"), 2), 0.5)
    assert written == {d.doc_id for d in holed.documents}


def test_cli_holes(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    runner = CliRunner()
    bad = runner.invoke(app, ["eval", *data, "--holes", "1.5"])
    assert bad.exit_code == 2
    assert "--holes: the holes share must be in [0, 1), got 1.5" in bad.output
    out = tmp_path / "holes.json"
    fit = runner.invoke(
        app, ["calibrate", *data, "--half", "1", "--holes", "0.5", "--out", str(out)]
    )
    assert fit.exit_code == 0, fit.output
    artifact = load_calibration(out)
    assert "50% holes" in artifact.data.notes
    assert "near-miss" in artifact.data.notes
    # the holes are in the in-scope sample, unanswered: probes re-certify with them
    sample = artifact.conformal.in_scope
    assert sample is not None
    assert not all(sample.relevant)
    plain = tmp_path / "plain.json"
    assert (
        runner.invoke(app, ["calibrate", *data, "--half", "1", "--out", str(plain)]).exit_code == 0
    )
    base = load_calibration(plain).conformal.in_scope
    assert base is not None
    assert len(sample.relevant) - sum(sample.relevant) > len(base.relevant) - sum(base.relevant)
