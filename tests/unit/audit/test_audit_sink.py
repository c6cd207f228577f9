"""The sink: ids remembered only once written, torn tails repaired, the chain carried on."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from ragsift.audit import GENESIS, AuditFileSink, verify_chain
from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from tests.unit.audit.fakes import FailingWriter


def evidence(query_id: str, summary: str = "s" * 200) -> EvidenceEvent:
    data = EvidenceData(query_id=query_id, tenant_id="acme", summary=summary, confidence=0.1)
    return EvidenceEvent.for_query(EvidenceType.NO_RELEVANT_CONTEXT, data, source="/ragsift/test")


def test_failed_write_does_not_remember_ids_so_redelivery_is_written(tmp_path: Path) -> None:
    # Finding 3: ids used to be remembered before the write, so the redelivered
    # event after a failed write was dropped as a duplicate and never written.
    sink = AuditFileSink(tmp_path, writer=FailingWriter(failures=1))
    with pytest.raises(OSError, match="injected disk failure"):
        sink.write([evidence("q1"), evidence("q2")])
    assert sink.write([evidence("q1"), evidence("q2")]) == 2
    assert [row["subject"] for row in sink.read_all()] == ["q1", "q2"]
    assert sink.duplicates == 0


def test_failed_write_leaves_no_half_batch_behind(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path, writer=FailingWriter(failures=3, code=errno.EIO))
    for _ in range(3):
        with pytest.raises(OSError, match="injected disk failure"):
            sink.write([evidence("q1")])
    sink.write([evidence("q1")])
    report = verify_chain(sink.files())
    assert report.intact, report.problem
    assert report.rows == 1


def test_torn_last_line_is_cut_and_kept_and_the_sink_starts(tmp_path: Path) -> None:
    # Finding 2: a restarted sink crash-looped on JSONDecodeError reading a torn tail.
    sink = AuditFileSink(tmp_path)
    sink.write([evidence("q1"), evidence("q2")])
    whole = sink.path.stat().st_size
    torn = b'{"specversion":"1.0","id":"half-writ'
    with sink.path.open("ab") as handle:
        handle.write(torn)

    restarted = AuditFileSink(tmp_path)

    assert restarted.repaired is not None
    assert restarted.repaired.offset == whole
    assert restarted.path.stat().st_size == whole
    side = tmp_path / f"audit.jsonl.torn-{whole}"
    assert side.read_bytes() == torn
    assert restarted.write([evidence("q2"), evidence("q3")]) == 1
    assert verify_chain(restarted.files()).intact


def test_zero_filled_tail_with_a_newline_is_cut_too(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path)
    sink.write([evidence("q1")])
    whole = sink.path.stat().st_size
    with sink.path.open("ab") as handle:
        handle.write(b"\x00" * 300 + b"\n")
    restarted = AuditFileSink(tmp_path)
    assert restarted.repaired is not None
    assert restarted.repaired.length == 301
    assert restarted.path.stat().st_size == whole


def test_whole_file_is_left_alone(tmp_path: Path) -> None:
    AuditFileSink(tmp_path).write([evidence("q1")])
    assert AuditFileSink(tmp_path).repaired is None
    assert not list(tmp_path.glob("*.torn-*"))


def test_chain_continues_across_restart_and_rotation(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path, max_bytes=1024)
    for i in range(10):
        sink.write([evidence(f"q{i}")])
    restarted = AuditFileSink(tmp_path, max_bytes=1024)
    assert restarted.head == sink.head
    for i in range(10, 20):
        restarted.write([evidence(f"q{i}")])
    files = restarted.files()
    assert len(files) > 2
    report = verify_chain(files, from_genesis=True)
    assert report.intact, report.problem
    assert (report.rows, report.first_seq, report.last_seq) == (20, 0, 19)
    first = json.loads(files[0].read_text().splitlines()[0])
    assert first["auditprev"] == GENESIS


def test_rows_keep_the_event_fields_readers_use(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path, hmac_key=b"k")
    event = evidence("q1", summary="naïve 東京 \u202e")
    sink.write([event])
    (row,) = sink.read_all()
    assert (
        EvidenceEvent.model_validate({k: v for k, v in row.items() if not k.startswith("audit")})
        == event
    )
    assert {
        "id",
        "type",
        "subject",
        "data",
        "auditseq",
        "auditprev",
        "audithash",
        "auditmac",
    } <= set(row)


def test_restart_after_unchained_rows_starts_a_chain(tmp_path: Path) -> None:
    # Files written before the chain existed hold plain event rows.
    (tmp_path / "audit.jsonl").write_text(evidence("old").model_dump_json() + "\n")
    sink = AuditFileSink(tmp_path)
    assert sink.write([evidence("old"), evidence("new")]) == 1
    report = verify_chain(sink.files())
    assert report.intact
    assert (report.unchained, report.first_seq) == (1, 0)


def test_bad_line_in_the_middle_does_not_stop_the_sink(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path)
    sink.write([evidence("q1")])
    with sink.path.open("ab") as handle:
        handle.write(b"not json\n")
    sink2 = AuditFileSink(tmp_path)  # the last line is judged torn and cut
    sink2.write([evidence("q2")])
    lines = sink2.path.read_text().splitlines()
    lines.insert(1, "garbage")
    sink2.path.write_text("\n".join(lines) + "\n")
    restarted = AuditFileSink(tmp_path)
    assert restarted.write([evidence("q1"), evidence("q2")]) == 0
    problem = verify_chain(restarted.files()).problem
    assert problem is not None
    assert (problem.line, problem.kind) == (2, "unreadable")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_bytes": 10}, "max_bytes must be >= 1024, got 10"),
        ({"remember": 0}, "remember must be >= 1, got 0"),
        ({"hmac_key": b""}, "hmac_key must not be empty"),
        ({"fsync": "sometimes"}, "fsync must be 'batch' or 'off'"),
    ],
)
def test_bad_arguments_are_named(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuditFileSink(tmp_path, **kwargs)  # type: ignore[arg-type]  # wrong on purpose


def test_two_sinks_on_one_folder_keep_each_others_rows(tmp_path: Path) -> None:
    # A console and an `ask` on one data dir: each wrote at the size it had seen and cut
    # the other's rows as the remains of a failed attempt; verify still read "intact".
    console, ask = AuditFileSink(tmp_path), AuditFileSink(tmp_path)
    assert console.write([evidence("c1")]) == 1
    assert ask.write([evidence("a1")]) == 1
    assert console.write([evidence("c2"), evidence("a1")]) == 1  # a1 is on disk already
    assert ask.write([evidence("a2")]) == 1
    rows = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [r["subject"] for r in rows] == ["c1", "a1", "c2", "a2"]
    assert [r["auditseq"] for r in rows] == [0, 1, 2, 3]
    report = verify_chain(console.files(), from_genesis=True)
    assert report.intact
    assert report.rows == 4


def test_a_sink_takes_in_another_sinks_rotation(tmp_path: Path) -> None:
    big = AuditFileSink(tmp_path, max_bytes=1024)
    small = AuditFileSink(tmp_path, max_bytes=1024)
    for i in range(6):  # rows of ~600 bytes: each writer rotates in turn
        (big if i % 2 else small).write([evidence(f"q{i}")])
    report = verify_chain(big.files(), from_genesis=True)
    assert report.intact, report.problem
    assert report.rows == 6


def _write_many(directory: str, name: str, n: int, go: Any) -> None:
    sink = AuditFileSink(Path(directory), max_bytes=16 * 1024)
    go.wait()
    for i in range(n):
        while True:  # as the audit worker does: a failed batch is written again
            try:
                sink.write([evidence(f"{name}-{i}", summary="s" * 100)])
                break
            except OSError:
                continue


def test_processes_writing_one_folder_at_once_lose_no_row(tmp_path: Path) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    go = context.Barrier(3)  # all three start writing together
    workers = [
        context.Process(target=_write_many, args=(str(tmp_path), name, 60, go)) for name in "abc"
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    sink = AuditFileSink(tmp_path)
    report = verify_chain(sink.files(), from_genesis=True)
    assert report.intact, report.problem
    assert report.rows == 180
    assert len({r["subject"] for r in sink.read_all()}) == 180


def test_a_trail_that_cannot_be_written_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found at the first batch instead, a one-shot `ask` held its answer and retried
    # for ever. (Root ignores file modes: the refusal is injected, as `chattr +i` gives.)
    import errno as codes
    import os

    from ragsift.audit import sink as sink_module

    AuditFileSink(tmp_path).write([evidence("q1")])
    real_open = os.open

    def immutable(path: Any, flags: int, *args: Any) -> int:
        if str(path).endswith("audit.jsonl") and flags & os.O_WRONLY:
            raise PermissionError(codes.EPERM, "Operation not permitted")
        return real_open(path, flags, *args)

    monkeypatch.setattr(sink_module.os, "open", immutable)
    with pytest.raises(OSError, match=r"audit trail .*audit\.jsonl cannot be written"):
        AuditFileSink(tmp_path)


def test_a_copy_with_other_data_is_dropped_but_counted_as_a_conflict(tmp_path: Path) -> None:
    # Evidence ids derive from (tenant, query, type, source): a producer allowed on the
    # audit topic published "all good" rows under the ids to come, and the genuine
    # evidence was dropped as a plain duplicate, with nothing to tell them apart.
    forged = evidence("q1", "FORGED: all good")
    genuine = evidence("q1", "retrieval found no relevant context")
    assert forged.id == genuine.id
    sink = AuditFileSink(tmp_path)
    assert sink.write([forged]) == 1
    replay = genuine.model_copy(update={"data": forged.data})  # later `time`, same data
    assert sink.write([replay, genuine]) == 0
    assert (sink.duplicates, sink.conflicts) == (2, 1)
    restarted = AuditFileSink(tmp_path)  # the digest is read back from the file
    assert restarted.write([genuine]) == 0
    assert restarted.conflicts == 1
    assert [row["data"]["summary"] for row in restarted.read_all()] == ["FORGED: all good"]


async def test_the_audit_worker_counts_conflicts_in_its_metric(tmp_path: Path) -> None:
    from ragsift.audit import AuditMetrics
    from ragsift.workers.audit import AuditSinkHandler

    metrics = AuditMetrics()
    handler = AuditSinkHandler(AuditFileSink(tmp_path), metrics=metrics)
    await handler.handle_batch([evidence("q1", "FORGED: all good")])
    await handler.handle_batch([evidence("q1", "the genuine row"), evidence("q1", "another")])
    assert metrics.registry.get_sample_value("ragsift_audit_conflicts_total") == 2
