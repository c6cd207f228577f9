"""Files that start with a UTF-8 byte order mark, as editors on Windows write them, are
read as the same files without one: ingest, eval's SQuAD and BEIR sets, probes, and
submit (whose event decoder took one already).

Before: a JSONL, SQuAD or probe file with a BOM was refused as "not JSON" on its first
line; a Markdown file's BOM hid its first heading (the title fell back to the file
name) and stayed in its first chunk; a BEIR qrels file read it into its first query id.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragsift.evaluation.beir import load_beir
from ragsift.evaluation.probes import load_probes
from ragsift.evaluation.squad import load_squad
from ragsift.ingest.loaders import iter_documents
from tests.unit.cli.conftest import error_lines, run_cli

BOM = b"\xef\xbb\xbf"


def _with_bom(path: Path, text: str) -> Path:
    path.write_bytes(BOM + text.replace("\n", "\r\n").encode("utf-8"))
    return path


def test_ingest_reads_jsonl_and_markdown_with_a_bom(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    row = {"id": "tank", "text": "The tank holds two hundred litres."}
    _with_bom(docs / "rows.jsonl", json.dumps(row) + "\n")
    _with_bom(docs / "boiler.md", "# Boiler care\n\nThe boiler is serviced every year.\n")
    found = {d.doc_id: d for d in iter_documents(docs)}
    assert found["tank"].text == row["text"]
    [boiler] = [d for d in found.values() if d.doc_id != "tank"]
    assert boiler.title == "Boiler care"
    assert not boiler.text.startswith("\ufeff")
    data = tmp_path / "data"
    ingested = run_cli(
        ["ingest", str(docs), "--tenant", "t", "--data-dir", str(data), "--no-probe"]
    )
    assert ingested.exit_code == 0, ingested.output
    assert "indexed 2 documents" in ingested.stdout


def test_eval_sets_and_probes_read_with_a_bom(tmp_path: Path) -> None:
    qas = [{"id": "q1", "question": "Which car?", "answers": [{"text": "red"}]}]
    squad = {
        "data": [{"title": "Cars", "paragraphs": [{"context": "The car was red.", "qas": qas}]}]
    }
    labelled = load_squad(_with_bom(tmp_path / "dev.json", json.dumps(squad)))
    assert [(q.text, len(q.relevant)) for q in labelled.queries] == [("Which car?", 1)]
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    _with_bom(beir / "corpus.jsonl", json.dumps({"_id": "d1", "title": "", "text": "Red car."}))
    _with_bom(beir / "queries.jsonl", json.dumps({"_id": "q1", "text": "Which car?"}))
    _with_bom(beir / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert [(q.text, len(q.relevant)) for q in load_beir(beir).queries] == [("Which car?", 1)]
    probes = _with_bom(tmp_path / "probes.jsonl", json.dumps({"text": "Who won in 2014?"}) + "\n")
    assert [p.text for p in load_probes(probes)] == ["Who won in 2014?"]


def test_submit_reads_a_file_with_a_bom(tmp_path: Path) -> None:
    # The first line is checked as an event, not refused as "not JSON": no broker needed.
    events = _with_bom(
        tmp_path / "q.jsonl", '{"query_id": "q1", "tenant_id": "a", "query": "hi", "k": 60}\n'
    )
    result = run_cli(
        ["submit", str(events)], env={"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    )
    assert result.exit_code == 2
    assert error_lines(result) == [
        "line 1: rejected QueryEvent: k: Input should be less than or equal to 50 (got 60)"
    ]
