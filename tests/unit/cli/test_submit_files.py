"""`ragsift submit --files`: documents read as `ragsift ingest` reads them, checked
before any broker is asked (the broker side: tests/integration/test_cli_kafka_commands.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.cli.conftest import error_lines, run_cli

NO_BROKER = {"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--files", "docs"], "error: --files needs --tenant: whose documents they are"),
        (
            ["--files", "docs", "-t", "acme", "--topic", "audit"],
            "error: --files publishes to the documents topic, not 'audit'",
        ),
        (["--files", "nowhere", "-t", "acme"], "error: no such file or folder: nowhere"),
        (
            ["--files", "docs", "-t", "acme", "--source-type", "gossip"],
            "error: source_type must be one of",
        ),
        # a name the contract refuses: one line, not one per document
        (["--files", "docs", "-t", "bad\ttenant"], "error: --tenant: tenant_id must match"),
        (["--files", "docs", "-t", "x" * 300], "error: --tenant: tenant_id must match"),
        (["--files", "docs", "-t", "../etc"], "error: --tenant: tenant_id must match"),
        (["--files", "docs", "-t", "acme", "-c", "Bad Collection!"], "error: --collection:"),
    ],
)
def test_refused_before_any_broker(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("The boiler is serviced yearly.", "utf-8")
    (tmp_path / "docs" / "b.md").write_text("The tank holds water.", "utf-8")
    source, options = args[1], [args[0], *args[2:]]
    result = run_cli(["submit", source, *options], env=NO_BROKER)
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result)
    assert line.startswith(message)


def test_nothing_to_publish_says_what_was_passed_over(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "blank.txt").write_text("  ", "utf-8")
    (docs / "old.html").write_text('<meta http-equiv="refresh" content="0; url=x">', "utf-8")
    result = run_cli(["submit", str(docs), "--files", "-t", "acme"], env=NO_BROKER)
    assert result.exit_code == 2
    lines = error_lines(result)
    assert lines[0].startswith(f"warning: skipped 2 files under {docs}: 1 empty, 1 redirect")
    assert lines[-1] == f"error: nothing to publish under {docs}: no document with text in it"


def test_a_document_the_event_contract_refuses_is_named_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "long", "text": "Body.", "title": "t" * 600}) + "\n")
    result = run_cli(["submit", str(rows), "--files", "-t", "acme"], env=NO_BROKER)
    assert result.exit_code == 2
    (line,) = [x for x in error_lines(result) if "rejected" in x]
    assert line.startswith(f"{rows}:1: rejected title: String should have at most 500")
    assert "sent 0 events to ragsift.documents.v1; rejected 1" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["docs/a.md", "--files", "-t", "acme", "--prune"],
            "error: --prune needs a folder: with the one file docs/a.md it would remove every"
            " other document of tenant 'acme' in collection 'default'",
        ),
        (
            ["events.jsonl", "--prune"],
            "error: --prune goes with --files: it compares a folder with the documents topic",
        ),
    ],
)
def test_prune_is_refused_before_any_broker_where_it_cannot_mean_a_folder(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("The boiler is serviced yearly.", "utf-8")
    (tmp_path / "events.jsonl").write_text("", "utf-8")
    result = run_cli(["submit", *args], env=NO_BROKER)
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [message]


def _document(doc_id: str = "a.md", **fields: object) -> bytes:
    event = {"event_id": "e1", "tenant_id": "acme", "collection": "manuals", "doc_id": doc_id}
    return json.dumps({**event, "text": "Boilers are serviced yearly.", **fields}).encode()


@pytest.mark.parametrize(
    ("value", "keeps"),
    [
        (_document(), True),
        (None, False),  # a tombstone
        (_document(op="delete", text=None), False),
        (b"{not json", None),  # dead-lettered by the indexer: it changed nothing
        (_document(doc_id="b.md"), None),  # another document than its key names
        (_document(tenant_id="other"), None),
    ],
)
def test_what_a_documents_topic_record_says_of_the_document_its_key_names(
    value: bytes | None, keeps: bool | None
) -> None:
    from ragsift.schemas import DocumentEvent
    from ragsift.streams.codec import EventCodec
    from ragsift.streams.live_documents import _is_upsert

    assert _is_upsert(EventCodec(DocumentEvent), value, "acme", "manuals", "a.md") is keeps


def test_a_document_larger_than_a_worker_reads_is_rejected_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The indexer's codec refuses an event over MAX_PAYLOAD_BYTES (it would be
    dead-lettered): such a document is named and left out, the others kept."""
    from ragsift.cli.submit_files import document_events
    from ragsift.streams import codec

    monkeypatch.setattr(codec, "MAX_PAYLOAD_BYTES", 2_000)  # the real one is 4 MiB
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.md").write_text("The boiler is serviced yearly. " * 100, "utf-8")
    (docs / "small.md").write_text("The tank holds water.", "utf-8")
    events, sources, read, rejected = document_events(docs, "acme", "manuals", "unknown")
    assert (sources, rejected) == (["small.md"], 1)
    assert [json.loads(payload or b"")["doc_id"] for _, payload in events] == ["small.md"]
    assert sorted(read) == ["big.md", "small.md"]  # --prune keeps a rejected one's document
    err = capsys.readouterr().err
    assert "big.md: rejected " in err
    assert "over the 2000 a worker reads: split the file" in err
