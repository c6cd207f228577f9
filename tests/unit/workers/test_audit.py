"""The audit sink writes each evidence id once, across batches, rotations and restarts."""

from __future__ import annotations

from pathlib import Path

from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.workers.audit import AuditFileSink, AuditSinkHandler


def evidence(query_id: str, kind: EvidenceType = EvidenceType.NO_RELEVANT_CONTEXT) -> EvidenceEvent:
    data = EvidenceData(query_id=query_id, tenant_id="acme", summary="s" * 200, confidence=0.1)
    return EvidenceEvent.for_query(kind, data, source="/ragsift/test")


async def test_duplicates_dropped_within_and_across_batches(tmp_path: Path) -> None:
    handler = AuditSinkHandler(AuditFileSink(tmp_path))
    outcomes = await handler.handle_batch([evidence("q1"), evidence("q1"), evidence("q2")])
    assert outcomes == [[], [], []]
    await handler.handle_batch([evidence("q2"), evidence("q3")])
    ids = [row["id"] for row in handler.sink.read_all()]
    assert len(ids) == len(set(ids)) == 3
    assert handler.sink.duplicates == 2


def test_rotation_and_restart_keep_dedup(tmp_path: Path) -> None:
    sink = AuditFileSink(tmp_path, max_bytes=1024)
    for i in range(20):
        sink.write([evidence(f"q{i}")])
    assert len(sink.files()) > 1
    restarted = AuditFileSink(tmp_path, max_bytes=1024)
    assert restarted.write([evidence("q5"), evidence("q19"), evidence("new")]) == 1
    ids = [row["id"] for row in restarted.read_all()]
    assert len(ids) == len(set(ids)) == 21
