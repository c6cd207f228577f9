"""Re-probing on the real broker: documents for a new tenant reach the indexer worker,
which re-certifies that tenant's answer threshold on the bundled probes once the load
settles; the next result for the tenant carries the new calibration version."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragsift.confidence.registry import CalibrationScope, DirectoryCalibrationStore
from ragsift.evaluation.probes import bundled_probes, method_of
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import DocumentEvent, QueryEvent, RetrievalResult
from tests.e2e.harness import (
    TENANT,
    Stack,
    TopicReader,
    WorkerProcess,
    hashing_worker,
    produce,
    wait_for,
)
from tests.factories import made_on_base

NEW_TENANT = "newco"
SCOPE = CalibrationScope("default", NEW_TENANT)
QUIET_S = 1.0
REFRESH_S = 1.0


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("calibrations")


@pytest.fixture(scope="module")
def reprobe_stack(stack: Stack, store_dir: Path) -> Stack:
    """The module's stack, with the hashing embedder and a calibration folder."""
    stack.extra_env.update(
        {
            "RAGSIFT_EMBEDDER_KIND": "hashing",
            "RAGSIFT_CALIBRATION_STORE_DIR": str(store_dir),
            "RAGSIFT_CALIBRATION_REPROBE_QUIET_S": str(QUIET_S),
            "RAGSIFT_CALIBRATION_REFRESH_S": str(REFRESH_S),
        }
    )
    return stack


@pytest.fixture(scope="module")
def worker(
    reprobe_stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    proc = hashing_worker(reprobe_stack, ["retrieval", "indexer"], tmp_path_factory, "reprobe")
    yield proc
    proc.stop()


async def test_documents_for_a_new_tenant_get_it_a_probe_certified_calibration(
    reprobe_stack: Stack, worker: WorkerProcess, store_dir: Path
) -> None:
    stack = reprobe_stack
    store = DirectoryCalibrationStore(store_dir)
    assert store.get(SCOPE) is None
    docs = [
        DocumentEvent(
            event_id=f"doc-{d.doc_id}", tenant_id=NEW_TENANT, doc_id=d.doc_id, text=d.text
        )
        for d in sample_documents()
    ]
    await produce(stack, "documents", docs)
    wait_for(lambda: store.get(SCOPE) is not None, "the re-probed calibration in the store", 180)
    probed = store.get(SCOPE)
    assert probed is not None
    assert probed.provenance is not None
    assert probed.provenance.method.startswith(method_of("bundled"))
    assert probed.provenance.tenant == NEW_TENANT
    assert probed.provenance.negatives == len(bundled_probes())
    assert probed.provenance.chunks >= 10
    assert worker.metric("ragsift_calibration_reprobes_total", {"outcome": "stored"}) == 1
    # The demo tenant, whose documents came from no event, was not touched.
    assert store.scopes() == [SCOPE]

    await asyncio.sleep(REFRESH_S + 1.0)  # the retrieval agent's registry re-reads the store
    ask = QueryEvent(
        query_id="rp-1", tenant_id=NEW_TENANT, query="How long is the Orbit thermostat warranty?"
    )
    async with TopicReader(stack, "retrievals") as reader:
        await produce(stack, "queries", [ask])
        await reader.until(
            lambda ev: any(isinstance(e, RetrievalResult) and e.query_id == "rp-1" for e in ev)
        )
    result = next(
        e for e in reader.events if isinstance(e, RetrievalResult) and e.query_id == "rp-1"
    )
    assert result.breakdown.calibration_version == probed.version

    # The same documents again change nothing: no re-probe is queued (since 2026-12-03,
    # ADR 051: a no-op event touches no re-probe), nothing re-stored.
    unchanged = {"reason": "unchanged"}
    skipped = worker.metric("ragsift_index_version_bumps_skipped_total", unchanged)
    await produce(stack, "documents", docs)
    wait_for(
        lambda: (
            worker.metric("ragsift_index_version_bumps_skipped_total", unchanged)
            >= skipped + len(docs)
        ),
        "the second load read as unchanged",
        180,
    )
    await asyncio.sleep(QUIET_S * 5)  # a queued re-probe is decided within this
    assert worker.metric("ragsift_calibration_reprobes_total", {"outcome": "not_due"}) == 0
    assert worker.metric("ragsift_calibration_reprobes_total", {"outcome": "stored"}) == 1
    assert store.get(SCOPE) == probed


@pytest.mark.parametrize("runtime", ["plain", "faust"])
def test_an_indexer_that_starts_after_an_upgrade_re_probes_the_stale_scopes(
    reprobe_stack: Stack,
    worker: WorkerProcess,
    store_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    runtime: str,
) -> None:
    """A scope made on another shipped calibration is skipped by queries until probed
    again. The demo tenant's documents came from no event, so only the indexer's sweep
    at start can reach its scope."""
    store = DirectoryCalibrationStore(store_dir)
    probed = store.get(SCOPE)
    assert probed is not None
    assert probed.provenance is not None
    base_now = probed.provenance.base_version
    demo = CalibrationScope("default", TENANT)
    store.put(demo, made_on_base(probed, "cal-000000000000", tenant=TENANT))
    env = reprobe_stack.extra_env
    saved = dict(env)
    # Its own consumer group: the module's worker keeps its group, and its runtime.
    env["RAGSIFT_KAFKA_APP_ID"] = f"{reprobe_stack.prefix}-sweep-{runtime}"
    env["RAGSIFT_WORKER_RUNTIME"] = runtime
    try:
        sweeper = hashing_worker(reprobe_stack, ["indexer"], tmp_path_factory, f"sweep-{runtime}")
    finally:
        env.clear()
        env.update(saved)
    try:

        def renewed() -> bool:
            current = store.get(demo)
            return (
                current is not None
                and current.provenance is not None
                and current.provenance.base_version == base_now
            )

        wait_for(renewed, "the stale scope probed again by the sweep at start", 180)
        assert sweeper.metric("ragsift_calibration_reprobes_total", {"outcome": "stored"}) >= 1
    finally:
        sweeper.stop()
