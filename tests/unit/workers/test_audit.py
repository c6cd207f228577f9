"""The audit handler writes each evidence id once and waits out a failing disk, dropping nothing."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from ragsift.audit import AuditMetrics, verify_chain
from ragsift.errors import ConfigurationError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import EvidenceData, EvidenceEvent, EvidenceType
from ragsift.settings import AuditSettings, Settings
from ragsift.streams.bus import InProcessBus
from ragsift.workers.audit import AuditFileSink, AuditSinkHandler, Backoff, build_audit_handler
from tests.unit.audit.fakes import FailingWriter


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


class Sleeps:
    """Records the waits instead of sleeping them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_full_disk_applies_back_pressure_and_drops_nothing(tmp_path: Path) -> None:
    # Finding 1: with the disk full the handler raised, and the runtime dead-lettered
    # every evidence event of the batch — a gap in the trail.
    metrics = AuditMetrics()
    sleeps = Sleeps()
    sink = AuditFileSink(tmp_path, writer=FailingWriter(failures=6))
    handler = AuditSinkHandler(
        sink, metrics=metrics, backoff=Backoff(initial_s=0.1, max_s=1.0), sleep=sleeps
    )
    batch = [evidence(f"q{i}") for i in range(5)]

    outcomes = await handler.handle_batch(batch)

    assert outcomes == [[] for _ in batch]  # no exception: nothing for the runtime to dead-letter
    assert sleeps.delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]  # bounded backoff
    assert [row["id"] for row in sink.read_all()] == [e.id for e in batch]
    assert verify_chain(sink.files()).intact  # the half-written attempts left nothing behind
    registry = metrics.registry
    assert registry.get_sample_value("ragsift_audit_write_failures_total", {"error": "ENOSPC"}) == 6
    assert registry.get_sample_value("ragsift_audit_rows_written_total") == 5
    assert registry.get_sample_value("ragsift_audit_sink_stalled") == 0
    assert not handler.stalled


async def test_stall_is_visible_while_the_disk_fails(tmp_path: Path) -> None:
    metrics = AuditMetrics()
    seen: list[tuple[bool, float | None]] = []
    handler: AuditSinkHandler

    async def look(delay: float) -> None:
        seen.append(
            (handler.stalled, metrics.registry.get_sample_value("ragsift_audit_sink_stalled"))
        )

    sink = AuditFileSink(tmp_path, writer=FailingWriter(failures=2, code=errno.EIO))
    handler = AuditSinkHandler(sink, metrics=metrics, sleep=look)
    await handler.handle_batch([evidence("q1")])
    assert seen == [(True, 1.0), (True, 1.0)]
    assert not handler.stalled


async def test_embedded_bus_dead_letters_nothing_when_the_disk_fails(tmp_path: Path) -> None:
    metrics = Metrics()
    sink = AuditFileSink(tmp_path, writer=FailingWriter(failures=3))
    handler = AuditSinkHandler(sink, metrics=AuditMetrics(metrics), sleep=Sleeps())
    bus = InProcessBus([handler], metrics=metrics, batch_size=4)
    sent = [evidence(f"q{i}") for i in range(10)]
    for event in sent:
        await bus.publish("audit", event.id, event)
    await bus.drain()
    assert bus.published["deadletter"] == []
    assert {row["id"] for row in sink.read_all()} == {e.id for e in sent}
    assert (
        metrics.registry.get_sample_value(
            "ragsift_dead_letters_total", {"worker": "audit", "stage": "handler"}
        )
        is None
    )


async def test_redelivered_duplicates_are_counted(tmp_path: Path) -> None:
    metrics = Metrics()
    handler = AuditSinkHandler(AuditFileSink(tmp_path), metrics=AuditMetrics(metrics))
    await handler.handle_batch([evidence("q1"), evidence("q1")])
    await handler.handle_batch([evidence("q1")])
    assert (
        metrics.registry.get_sample_value("ragsift_duplicates_dropped_total", {"worker": "audit"})
        == 2
    )


async def test_torn_tail_repair_is_counted(tmp_path: Path) -> None:
    AuditFileSink(tmp_path).write([evidence("q1")])
    with (tmp_path / "audit.jsonl").open("ab") as handle:
        handle.write(b'{"id": "torn')
    metrics = AuditMetrics()
    AuditSinkHandler(AuditFileSink(tmp_path), metrics=metrics)
    assert metrics.registry.get_sample_value("ragsift_audit_torn_tails_repaired_total") == 1


def test_handler_opts_out_of_per_event_deadlines() -> None:
    # A deadline would turn the wait for the disk into dead letters (see docs/audit.md).
    assert AuditSinkHandler.deadline_s is None


def test_built_from_settings_uses_the_hmac_key(tmp_path: Path) -> None:
    settings = AuditSettings(hmac_key=SecretStr("k1"), max_file_bytes=4096)
    handler = build_audit_handler(settings, tmp_path, Metrics())
    handler.sink.write([evidence("q1")])
    assert verify_chain(handler.sink.files(), key=b"k1").intact
    problem = verify_chain(handler.sink.files(), key=b"other").problem
    assert problem is not None
    assert problem.kind == "bad_hmac"


@pytest.mark.parametrize(("initial", "cap"), [(0.0, 1.0), (2.0, 1.0)])
def test_backoff_bounds_are_checked(initial: float, cap: float) -> None:
    with pytest.raises(ValueError, match="0 < initial_s <= max_s"):
        Backoff(initial, cap)


def test_audit_settings_from_env_mask_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_AUDIT_HMAC_KEY", "s3cret")
    monkeypatch.setenv("RAGSIFT_AUDIT_FSYNC", "off")
    settings = Settings.from_env()
    assert settings.audit.fsync == "off"
    assert settings.audit.hmac_key is not None
    assert settings.audit.hmac_key.get_secret_value() == "s3cret"
    assert "s3cret" not in json.dumps(settings.masked())


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"RAGSIFT_AUDIT_RETRY_INITIAL_S": "10", "RAGSIFT_AUDIT_RETRY_MAX_S": "1"},
            "retry_initial_s",
        ),
        ({"RAGSIFT_AUDIT_HMAC_KEY": ""}, "hmac_key must not be empty"),
        ({"RAGSIFT_AUDIT_FSYNC": "always"}, "fsync"),
        ({"RAGSIFT_AUDIT_MAX_FILE_BYTES": "10"}, "max_file_bytes"),
    ],
)
def test_bad_audit_settings_are_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_env()
