"""A real Faust agent over a real broker: a full disk delays the audit trail, never gaps it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from ragsift.audit import verify_chain
from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from tests.integration.apps import faust_worker
from tests.integration.test_kafka_roundtrip import _consume, create_topics

APP = Path(__file__).parent / "apps" / "audit_full_disk.py"
WRITE_TIMEOUT_S = 60
FAILURES = 5  # failed writes before the "disk" has room again
EVENTS = 60


@pytest.fixture
def full_disk_worker(kafka_bootstrap: str, unique: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The audit agent with a disk that is full for its first FAILURES writes."""
    env_extra = {
        "AUDIT_PREFIX": f"it-audit-{unique}",
        "AUDIT_APP_ID": f"it-audit-{unique}",
        "AUDIT_DIR": str(tmp_path / "audit"),
        "AUDIT_FAILURES": str(FAILURES),
    }
    prefix = env_extra["AUDIT_PREFIX"]
    asyncio.run(
        create_topics(
            kafka_bootstrap, [TOPICS["audit"].name(prefix), TOPICS["deadletter"].name(prefix)]
        )
    )
    with faust_worker(
        APP, bootstrap=kafka_bootstrap, env=env_extra, workdir=tmp_path, log_name="worker.log"
    ) as log:
        yield {**env_extra, "LOG": str(log)}


def written_ids(audit_dir: Path) -> set[object]:
    """Ids of the whole rows so far (a failed write leaves half a line until its retry)."""
    ids = set()
    for file in audit_dir.glob("audit*.jsonl"):
        for line in file.read_text().splitlines():
            try:
                ids.add(json.loads(line)["id"])
            except (ValueError, KeyError):
                continue
    return ids


def read_trail(audit_dir: Path) -> tuple[list[Path], list[dict[str, object]]]:
    """The files in chain order and every row, strictly parsed."""
    files = sorted(audit_dir.glob("audit*.jsonl"))
    return files, [json.loads(line) for f in files for line in f.read_text().splitlines()]


async def test_full_disk_under_the_faust_agent_dead_letters_nothing(
    kafka_bootstrap: str, full_disk_worker: dict[str, str]
) -> None:
    prefix = full_disk_worker["AUDIT_PREFIX"]
    codec = EventCodec(EvidenceEvent)
    sent = [
        EvidenceEvent.for_query(
            EvidenceType.REFUSAL,
            EvidenceData(query_id=f"q-{i}", tenant_id="acme", summary="s"),
            source="/it",
        )
        for i in range(EVENTS)
    ]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for event in sent:
            await producer.send(TOPICS["audit"].name(prefix), codec.encode(event), key=b"k")
        await producer.flush()
    finally:
        await producer.stop()

    audit_dir = Path(full_disk_worker["AUDIT_DIR"])
    wanted = {e.id for e in sent}
    deadline = time.monotonic() + WRITE_TIMEOUT_S
    while time.monotonic() < deadline:
        if wanted <= written_ids(audit_dir):
            break
        await asyncio.sleep(0.5)

    files, rows = read_trail(audit_dir)
    assert sorted(r["id"] for r in rows) == sorted(wanted)  # every event, once
    assert verify_chain(files).intact  # the failed half-writes left nothing behind
    log = Path(full_disk_worker["LOG"]).read_text(errors="replace")  # noqa: ASYNC240
    assert "audit write failed" in log
    letters = await _consume(kafka_bootstrap, TOPICS["deadletter"].name(prefix), 1, timeout_s=3)
    assert letters == []
