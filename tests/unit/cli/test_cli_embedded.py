"""demo, ingest and ask on the embedded runtime: what they print, write and exit with."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsift.ingest.sample import DEMO_QUERIES
from ragsift.schemas import MAX_QUERY_CHARS, RetrievalResult
from tests.factories import docx_paragraph, make_docx, make_epub, make_odt, make_pdf
from tests.unit.cli.conftest import Invoke, error_lines, run_cli

QUESTION = "How many days do I have to return the Orbit thermostat for a refund?"


def _ask(demo_dir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = run_cli(["ask", "--data-dir", str(demo_dir), "--tenant", "demo", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_demo_writes_the_results_file_it_names(demo_dir: Path) -> None:
    results = demo_dir / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(DEMO_QUERIES)
    parsed = [RetrievalResult.model_validate_json(line) for line in lines]
    assert [r.query_id for r in parsed] == [f"demo-{i}" for i in range(len(DEMO_QUERIES))]


def test_demo_output_names_the_results_file(tmp_path: Path) -> None:
    result = run_cli(["demo", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    named = str(tmp_path / "d" / "results.jsonl")
    assert named in result.stdout.replace("\n", "")
    assert Path(named).is_file()


def test_demo_probes_its_collection_as_ingest_does_and_scores_with_that(tmp_path: Path) -> None:
    """`ragsift demo` re-certifies its handbook on the bundled probes before it asks, as
    `ragsift ingest` would: the scripted questions are scored with the collection's
    calibration, not the shipped one on SQuAD's scale."""
    result = run_cli(["demo", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())
    assert "calibration for demo/default: re-certified on the bundled probes" in said
    version = said.split("version ", 1)[1].split(";", 1)[0]
    assert "RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST=false skips this step" in said
    lines = (tmp_path / "d" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    scored = [RetrievalResult.model_validate_json(line) for line in lines]
    versions = [r.breakdown.calibration_version for r in scored if r.breakdown is not None]
    calibrated = [v for v in versions if v is not None]  # greetings are not scored
    assert len(calibrated) >= 7
    assert set(calibrated) == {version}
    unprobed = run_cli(
        ["demo", "--data-dir", str(tmp_path / "u")],
        env={"RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST": "false"},
    )
    assert unprobed.exit_code == 0, unprobed.output
    assert "re-certified" not in unprobed.stdout


def test_ask_answers_from_the_demo_data(demo_dir: Path) -> None:
    code, out, err = _ask(demo_dir, QUESTION)
    assert code == 0, err
    assert "confidence" in out
    assert "query_id ask-" in out


def test_ask_json_is_one_result(demo_dir: Path) -> None:
    code, out, err = _ask(demo_dir, QUESTION, "--json")
    assert code == 0, err
    result = RetrievalResult.model_validate(json.loads(out))
    assert result.tenant_id == "demo"
    assert result.hits


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # issue 15: --k 60 exited 0 ("k must be <= 50"), --k 1000 gave another limit (100)
        (["--k", "60", QUESTION], "k: Input should be less than or equal to 50 (got 60)"),
        (["--k", "1000", QUESTION], "k: Input should be less than or equal to 50 (got 1000)"),
        (["--k", "0", QUESTION], "greater than or equal to 1"),
        (["x" * 3_000], "query: String should have at most 2000 characters"),
        (["x" * (MAX_QUERY_CHARS + 1)], f"at most {MAX_QUERY_CHARS} characters"),
        (["--mode", "fuzzy", QUESTION], "mode:"),
    ],
)
def test_rejected_input_exits_2_with_one_line(
    demo_dir: Path, args: list[str], message: str
) -> None:
    code, out, err = _ask(demo_dir, *args)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert message in lines[0]
    assert "Traceback" not in err
    assert len(lines[0]) < 300  # a 3,000-character query is not echoed back whole
    assert out == ""


def test_a_tighter_deployment_limit_is_one_line_too(demo_dir: Path) -> None:
    code, _, err = _ask(demo_dir, "--k", "20", QUESTION, env={"RAGSIFT_LIMITS_MAX_K": "10"})
    assert code == 2
    assert [line for line in err.splitlines() if line.strip()] == [
        "error: query rejected at validate: k must be <= 10, got 20"
    ]


def test_unknown_collection_is_a_clear_error(demo_dir: Path) -> None:
    code, _, err = _ask(demo_dir, "--collection", "nope", QUESTION)
    assert code == 2
    assert "collection 'nope' does not exist" in err
    assert "ensure_collection" not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1


def test_unknown_tenant_is_a_clear_error(demo_dir: Path) -> None:
    result = run_cli(["ask", "--data-dir", str(demo_dir), "--tenant", "nobody", QUESTION])
    assert result.exit_code == 2
    assert error_lines(result) == [
        f"error: tenant 'nobody' has no documents in collection 'default' in {demo_dir};"
        " index some with `ragsift ingest PATH --tenant nobody`"
    ]


def test_fresh_data_dir_is_an_error_and_is_not_created(cli: Invoke, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    result = cli(["ask", "--data-dir", str(fresh), "--tenant", "demo", QUESTION])
    assert result.exit_code == 2
    assert f"no ragsift data in {fresh}" in result.stderr
    assert "ensure_collection" not in result.stderr
    assert not fresh.exists()


def test_default_data_dir_is_not_created_either(cli: Invoke, tmp_path: Path) -> None:
    result = cli(["ask", "--tenant", "demo", QUESTION])
    assert result.exit_code == 2
    assert not (tmp_path / ".ragsift").exists()


def test_ingest_then_ask_a_new_tenant(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "boiler.md").write_text(
        "# Boiler service\nThe boiler is serviced every twelve months by a licensed engineer.\n",
        encoding="utf-8",
    )
    ingested = cli(["ingest", str(docs), "--tenant", "acme", "--data-dir", "data"])
    assert ingested.exit_code == 0, ingested.output
    assert "indexed 1 documents" in ingested.stdout
    # No terminal here: progress comes as lines, not as a bar that would never be drawn.
    assert "indexing chunks: 1/1 (100%)" in ingested.stderr
    asked = cli(["ask", "How often is the boiler serviced?", "-t", "acme", "--data-dir", "data"])
    assert asked.exit_code == 0, asked.output
    assert "boiler.md" in asked.stdout


def test_html_pdf_docx_odt_and_epub_documents_are_asked_like_text(
    cli: Invoke, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.html").write_text(
        "<html><head><title>Heat pump</title><script>track()</script></head><body>"
        "<nav>Home | Products</nav><p>The heat pump defrosts itself every ninety minutes"
        " in freezing weather.</p></body></html>",
        encoding="utf-8",
    )
    (docs / "tank.pdf").write_bytes(
        make_pdf([["Water tank", "The water tank holds two hundred litres."]], title="Tank")
    )
    (docs / "leave.docx").write_bytes(
        make_docx(docx_paragraph("<w:t>Staff get twenty-five days of annual leave.</w:t>"))
    )
    (docs / "bike.odt").write_bytes(
        make_odt(
            "<text:p>Cyclists park their bikes in the <text:span>basement</text:span>.</text:p>"
        )
    )
    (docs / "canteen.epub").write_bytes(
        make_epub({"c.xhtml": "<p>The canteen serves lunch from noon to two.</p>"}, ["c.xhtml"])
    )
    ingested = cli(["ingest", str(docs), "--tenant", "acme", "--data-dir", "data"])
    assert ingested.exit_code == 0, ingested.output
    assert "indexed 5 documents" in ingested.stdout
    for question, source in (
        ("How often does the heat pump defrost?", "pump.html"),
        ("How many litres does the water tank hold?", "tank.pdf"),
        ("How many days of annual leave do staff get?", "leave.docx"),
        ("Where do cyclists park their bikes?", "bike.odt"),
        ("When does the canteen serve lunch?", "canteen.epub"),
    ):
        asked = cli(["ask", question, "-t", "acme", "--data-dir", "data", "--json"])
        assert asked.exit_code == 0, asked.output
        result = json.loads(asked.stdout)
        top = result["hits"][0]
        assert top["doc_id"] == source
        assert "track()" not in top["text"]
        assert "Products" not in top["text"]


def test_ingest_says_which_files_it_passed_over(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "boiler.md").write_text("The boiler is serviced every twelve months.\n", "utf-8")
    (docs / "blank.txt").write_text("  \n", "utf-8")
    (docs / "manual.pdf").write_bytes(b"%PDF-1.7")  # no more than its header: unreadable
    (docs / "scan.PDF").write_bytes(b"%PDF-1.7")
    (docs / "notes.doc").write_bytes(b"\xd0\xcf\x11\xe0")  # the old binary Word format
    (docs / "guide.html").write_text("<title>Guide</title><p>Bleed radiators yearly.</p>", "utf-8")
    for name in ("old.html", "older.htm"):  # pages that only send the reader on
        (docs / name).write_text('<meta http-equiv="refresh" content="0; url=guide.html">', "utf-8")
    ingested = cli(["ingest", str(docs), "--tenant", "acme", "--data-dir", "data", "--no-probe"])
    assert ingested.exit_code == 0, ingested.output
    assert "indexed 2 documents" in ingested.stdout
    assert (
        f"skipped 6 files under {docs}: 1 empty, 2 redirects, 2 unreadable PDFs,"
        " 1 unsupported type .doc" in ingested.stderr
    )


def test_ingest_counts_passed_over_files_and_jsonl_lines_apart(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "blank.txt").write_text("  \n", "utf-8")
    rows = [
        {"id": "a", "text": ""},
        {"id": "b", "text": "Tanks hold water."},
        {"id": "c", "text": " "},
    ]
    (docs / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    ingested = cli(["ingest", str(docs), "--tenant", "acme", "--data-dir", "data", "--no-probe"])
    assert ingested.exit_code == 0, ingested.output
    assert "indexed 1 documents" in ingested.stdout
    assert (
        f"skipped 1 file and 2 JSONL lines under {docs}: 1 empty, 2 empty lines"
        f" (first: {docs / 'blank.txt'})" in ingested.stderr
    )


def test_ingest_counts_passed_over_folders_as_folders(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / ".git").mkdir(parents=True)
    (docs / ".git" / "HEAD").write_text("ref: refs/heads/main\n", "utf-8")
    (docs / ".cache").mkdir()
    (docs / ".notes.md").write_text("a hidden file\n", "utf-8")
    (docs / "boiler.md").write_text("The boiler is serviced every twelve months.\n", "utf-8")
    ingested = cli(["ingest", str(docs), "--tenant", "acme", "--data-dir", "data", "--no-probe"])
    assert ingested.exit_code == 0, ingested.output
    assert f"skipped 1 file and 2 folders under {docs}: 3 hidden" in ingested.stderr


def test_a_jsonl_line_with_no_text_is_passed_over_not_indexed_as_nothing(
    cli: Invoke, tmp_path: Path
) -> None:
    # Before: the line was an upsert of an empty document, which took the indexed
    # version of its id away and wrote nothing in its place.
    rows = tmp_path / "rows.jsonl"
    kept = {"id": "boiler", "text": "The boiler is serviced every twelve months."}
    rows.write_text(json.dumps(kept) + "\n", "utf-8")
    first = cli(["ingest", str(rows), "--tenant", "acme", "--data-dir", "data", "--no-probe"])
    assert first.exit_code == 0, first.output
    blank = {"id": "boiler", "text": " \n"}
    other = {"id": "tank", "text": "The tank holds two hundred litres."}
    rows.write_text("".join(json.dumps(r) + "\n" for r in (blank, other)), "utf-8")
    again = cli(["ingest", str(rows), "--tenant", "acme", "--data-dir", "data", "--no-probe"])
    assert again.exit_code == 0, again.output
    assert "indexed 1 documents" in again.stdout
    assert f"skipped 1 JSONL line under {rows}: 1 empty line (first: {rows}:1)" in again.stderr
    asked = cli(
        ["ask", "How often is the boiler serviced?", "--tenant", "acme", "--data-dir", "data"]
    )
    assert asked.exit_code == 0, asked.output
    assert "twelve months" in asked.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "missing-folder", "--tenant", "acme"], "missing-folder"),
        (
            ["ingest", ".", "--tenant", "acme"],
            "no .txt/.md/.html/.pdf/.docx/.odt/.epub/.jsonl document with text",
        ),
        (["ingest", "empty.txt", "--tenant", "acme"], "nothing to index under empty.txt"),
    ],
)
def test_ingest_without_documents_exits_2(
    cli: Invoke, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "empty.txt").write_text(" \n")
    result = cli(args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--tenant", "bad tenant"),  # indexed before, then no `ask` could name it
        ("--tenant", "démo"),
        ("--tenant", "a\x07b"),
        ("--tenant", "t" * 65),
        ("--collection", "../x"),  # a traceback (ValueError) before
        ("--collection", "a/b"),
    ],
)
def test_ingest_refuses_names_ask_would_refuse(
    cli: Invoke, tmp_path: Path, option: str, value: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\nSome text.\n", encoding="utf-8")
    args = ["ingest", str(docs), "--tenant", "acme", "--data-dir", "data", option, value]
    result = cli(args)
    assert result.exit_code == 2
    errors = error_lines(result)
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: {option}: ")
    assert "Traceback" not in result.output
    assert not (tmp_path / "data").exists()


QDRANT_DOWN = {"RAGSIFT_QDRANT_MODE": "server", "RAGSIFT_QDRANT_URL": "http://127.0.0.1:1"}


@pytest.mark.parametrize(
    "args",
    [
        ["ingest", "docs", "--tenant", "acme"],
        ["ask", "How often is the boiler serviced?", "--tenant", "acme"],
    ],
    ids=lambda args: args[0],
)
def test_unreachable_qdrant_server_is_one_line_naming_its_setting(
    cli: Invoke, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# A\nThe boiler is serviced yearly.\n", encoding="utf-8"
    )
    result = cli([*args, "--data-dir", "data"], env=QDRANT_DOWN)
    assert result.exit_code == 1
    errors = error_lines(result)
    assert errors[-1].startswith("error: Qdrant unreachable")
    assert errors[-1].endswith("start it or set RAGSIFT_QDRANT_URL")
    assert "Traceback" not in result.output


def test_an_unreachable_qdrant_server_is_the_only_line_a_real_process_prints(
    tmp_path: Path,
) -> None:
    # In a process of its own, qdrant-client's version check (a thread started as the
    # client is made) printed a two-line Python warning before ragsift's own error.
    env = {**os.environ, "RAGSIFT_EMBEDDER_KIND": "hashing", **QDRANT_DOWN}
    ask = ["ask", "How often?", "--tenant", "acme", "--data-dir", str(tmp_path / "data")]
    asked = subprocess.run(
        [sys.executable, "-m", "ragsift", *ask],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert asked.returncode == 1, asked.stderr
    lines = [line for line in asked.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, asked.stderr
    assert lines[0].startswith("error: Qdrant unreachable")


def test_a_missing_calibration_file_is_one_line(demo_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    code, _, err = _ask(
        demo_dir, QUESTION, env={"RAGSIFT_CONFIDENCE_CALIBRATION_PATH": str(missing)}
    )
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert str(missing) in lines[0]


def test_an_advisory_answer_does_not_also_log_a_warning(
    demo_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The printed report flags "advisory only"; C3's service log line is noise on a terminal."""
    caplog.set_level(logging.WARNING)
    code, out, _ = _ask(demo_dir, "Who won the football world cup in 2014?")
    assert code == 0
    assert "Advisory only" in out or "advisory" in out.lower()
    assert not [r for r in caplog.records if "advisory only" in r.getMessage()]


def test_an_error_no_command_expects_is_one_line_from_the_real_entry_point(
    tmp_path: Path,
) -> None:
    # A damaged index file reached `ask` as a traceback: the commands catch the errors
    # they expect, and main() now turns any other RagsiftError into one line (exit 2
    # for a setting or an input).
    shards = tmp_path / "data" / "qdrant"
    shards.mkdir(parents=True)
    (shards / "default.ragsift.json").write_text("{bad")
    args = ["ask", "--data-dir", str(tmp_path / "data"), "-t", "demo", "how long?"]
    done = subprocess.run(
        [sys.executable, "-m", "ragsift", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAGSIFT_EMBEDDER_KIND": "hashing", "COLUMNS": "200"},
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines == [lines[0]]
    assert lines[0].startswith("error: unreadable metadata file")


def test_ingest_warns_when_a_file_replaces_another_files_document(
    cli: Invoke, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "opening hours.txt").write_text("The zebra enclosure opens at nine.")
    (docs / "opening-hours.txt").write_text("Parking costs five euros.")
    first = cli(["ingest", str(docs / "opening hours.txt"), "-t", "t1", "--no-probe"])
    assert first.exit_code == 0, first.output
    assert not [line for line in error_lines(first) if line.startswith("warning:")]
    second = cli(["ingest", str(docs / "opening-hours.txt"), "-t", "t1", "--no-probe"])
    assert second.exit_code == 0, second.output
    [warning] = [line for line in error_lines(second) if line.startswith("warning:")]
    assert "'opening-hours.txt' replaced document 'opening-hours.txt'" in warning
    assert "from 'opening hours.txt'" in warning
    again = cli(["ingest", str(docs / "opening-hours.txt"), "-t", "t1", "--no-probe"])
    assert not [line for line in error_lines(again) if line.startswith("warning:")]


INTERRUPTED_INGEST = """
import asyncio, sys
from ragsift.embedded import EmbeddedRuntime
from ragsift.cli import main

async def held(*args, **kwargs):
    print("writing", flush=True)
    await asyncio.sleep(120)

EmbeddedRuntime.ingest = held
sys.argv = ["ragsift", *sys.argv[1:]]
main()
"""


def test_an_interrupted_ingest_says_how_to_complete_it(tmp_path: Path) -> None:
    # Ctrl-C during a long ingest printed "Aborted!" and left a document indexed in part,
    # served as if whole, with nothing said about running the ingest again.
    import signal

    doc = tmp_path / "a.txt"
    doc.write_text("The warranty lasts two years.")
    args = ["ingest", str(doc), "-t", "t1", "--no-probe", "--data-dir", str(tmp_path / "d")]
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_INGEST, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAGSIFT_EMBEDDER_KIND": "hashing", "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"  # inside the ingest now
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: interrupted: a document being written may be indexed in part and is"
        " served so; run the same ingest again to complete it (documents indexed as they"
        " are now are skipped)"
    ], stderr


def test_ask_says_what_its_other_handlers_could_not_do(
    demo_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The feedback store could not remember the result (held locked by another process):
    # dead-lettered under the quiet routing logger, so a later `ragsift feedback` found
    # "no scored result within the join window" without a word why.
    import shutil

    from ragsift.retrieval.feedback_store import SqliteFeedbackStore

    data = tmp_path / "data"
    shutil.copytree(demo_dir, data)

    def locked(self: SqliteFeedbackStore, records: object, ttl_s: int) -> None:
        raise OSError("database is locked")

    monkeypatch.setattr(SqliteFeedbackStore, "remember", locked)
    code, _, err = _ask(data, QUESTION)
    assert code == 0, err
    assert "could not handle it" in err
    assert "database is locked" in err
    assert "calibration-results" in err
