"""Drift alarm on the real broker: a tenant's traffic turns out-of-domain; its results get the
flag, the audit one shift event, and the worker's gauge fires the alert rule (promtool)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from ragsift.schemas import EvidenceEvent, EvidenceType, QueryEvent, RetrievalResult
from tests.e2e.harness import TENANT, Stack, TopicReader, WorkerProcess, hashing_worker, produce
from tests.unit.runtime.test_drift_alarm import IN_DOMAIN, OUT_OF_DOMAIN, alert_fires_on

MIN_SAMPLES = 40


@pytest.fixture(scope="module")
def worker(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    stack.extra_env.update(
        {
            "RAGSIFT_EMBEDDER_KIND": "hashing",
            "RAGSIFT_DRIFT_MIN_SAMPLES": str(MIN_SAMPLES),
            "RAGSIFT_DRIFT_HALF_LIFE": "60",
        }
    )
    proc = hashing_worker(stack, ["retrieval", "audit"], tmp_path_factory, "drift")
    yield proc
    proc.stop()


def queries(tag: str, texts: tuple[str, ...], n: int) -> list[QueryEvent]:
    return [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id=TENANT, query=texts[i % len(texts)])
        for i in range(n)
    ]


async def results_of(stack: Stack, sent: list[QueryEvent]) -> list[RetrievalResult]:
    ids = {q.query_id for q in sent}
    async with TopicReader(stack, "retrievals") as reader:
        await produce(stack, "queries", sent)
        await reader.until(
            lambda ev: ids <= {e.query_id for e in ev if isinstance(e, RetrievalResult)}
        )
    got = {e.query_id: e for e in reader.events if isinstance(e, RetrievalResult)}
    return [got[q.query_id] for q in sent]


async def test_out_of_domain_traffic_trips_flag_evidence_and_alert(
    stack: Stack, worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Every in-domain result is back before the first out-of-domain query goes out,
    # so the reference (the first MIN_SAMPLES scored queries) is in domain.
    before = await results_of(stack, queries("in", IN_DOMAIN, 2 * MIN_SAMPLES))
    assert not any(r.calibration_shift for r in before)
    psi_before = worker.metric("ragsift_calibration_drift_psi", {"tenant": TENANT})
    after = await results_of(stack, queries("ood", OUT_OF_DOMAIN, 3 * MIN_SAMPLES))
    assert after[-1].calibration_shift
    psi = worker.metric("ragsift_calibration_drift_psi", {"tenant": TENANT})
    assert psi > 0.25 > psi_before
    async with TopicReader(stack, "audit") as audit:
        await audit.until(
            lambda ev: any(
                isinstance(e, EvidenceEvent) and e.type == EvidenceType.CALIBRATION_SHIFT
                for e in ev
            )
        )
        await asyncio.sleep(2)  # time for a (wrong) second shift event to show up
        await audit.poll()
    shifts = [
        e
        for e in audit.events
        if isinstance(e, EvidenceEvent) and e.type == EvidenceType.CALIBRATION_SHIFT
    ]
    assert len(shifts) == 1
    assert alert_fires_on(tmp_path_factory.mktemp("promtool"), {TENANT: psi}) == {TENANT}
