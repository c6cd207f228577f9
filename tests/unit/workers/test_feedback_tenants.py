"""Two tenants may send the same query id: each keeps its own result for feedback.

Before: scored results were kept by query id alone, so tenant B's query with the id of
tenant A's replaced A's record within the join window, and A's label was then refused
as another tenant's (``tenant_mismatch``): one tenant could keep another's feedback
from ever re-fitting its calibration.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.feedback_store import ScoredRecord, SqliteFeedbackStore
from ragsift.schemas import QueryEvent
from ragsift.settings import EmbedderSettings, FeedbackSettings, Settings
from ragsift.workers.calibration import FeedbackLoop, FeedbackRefused
from tests.unit.workers.test_calibration_worker import (
    Clock,
    base_artifact,
    count,
    feedback,
    result,
)


@pytest.fixture
def loop(tmp_path: Path) -> FeedbackLoop:
    registry = CalibrationRegistry(
        base_artifact(), DirectoryCalibrationStore(tmp_path / "calibrations"), refresh_s=0
    )
    settings = FeedbackSettings(min_labels=200, refit_interval_s=0, join_ttl_s=3600)
    clock = Clock()
    store = SqliteFeedbackStore(tmp_path / "feedback.sqlite", clock=clock)
    return FeedbackLoop(store, registry, settings, Metrics(), clock=clock)


def record(query_id: str, tenant: str, top: float = 0.7) -> ScoredRecord:
    signals = {"top_score": top}
    return ScoredRecord(
        query_id=query_id, tenant_id=tenant, collection="docs", kept=True, signals=signals
    )


def test_the_store_keeps_one_record_per_tenant_and_query_id(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteFeedbackStore(tmp_path / "f.sqlite", clock=clock)
    store.remember([record("q1", "acme", 0.7)], ttl_s=60)
    store.remember([record("q1", "globex", 0.2)], ttl_s=60)
    assert store.recall("q1", "acme") == record("q1", "acme", 0.7)
    assert store.recall("q1", "globex") == record("q1", "globex", 0.2)
    assert store.recall("q1", "initech") is None
    assert store.owners("q1") == ["acme", "globex"]
    assert store.owners("q2") == []
    clock.now += 61
    assert store.recall("q1", "acme") is None
    assert store.owners("q1") == []
    store.close()


def test_a_record_kept_by_query_id_alone_is_read_for_its_tenant_only(tmp_path: Path) -> None:
    # A data dir written before results were kept per tenant: its rows are still joined
    # until their window ends.
    clock = Clock()
    path = tmp_path / "f.sqlite"
    SqliteFeedbackStore(path, clock=clock).close()
    with sqlite3.connect(path) as db:
        old = record("q-old", "acme")
        db.execute("INSERT INTO results VALUES (?, ?, ?)", ("q-old", old.model_dump_json(), 2e9))
    store = SqliteFeedbackStore(path, clock=clock)
    assert store.recall("q-old", "acme") == old
    assert store.recall("q-old", "globex") is None
    assert store.owners("q-old") == ["acme"]
    store.close()


def test_another_tenants_query_with_the_same_id_leaves_the_first_tenants_label(
    loop: FeedbackLoop,
) -> None:
    loop.remember([result("shared-id", 0.8, tenant="acme")])
    loop.remember([result("shared-id", 0.3, tenant="globex")])
    loop.apply(feedback("shared-id", True, tenant="acme"))
    loop.apply(feedback("shared-id", False, tenant="globex"))
    [acme] = loop.store.labels(CalibrationScope("docs", "acme"))
    [globex] = loop.store.labels(CalibrationScope("docs", "globex"))
    assert (acme.record.tenant_id, acme.relevant, acme.record.signals["top_score"]) == (
        "acme",
        True,
        0.8,
    )
    assert (globex.record.tenant_id, globex.relevant) == ("globex", False)
    # A third tenant that never asked it is still told the query was another's.
    with pytest.raises(FeedbackRefused) as other:
        loop.apply(feedback("shared-id", True, tenant="mallory"))
    assert other.value.reason == "tenant_mismatch"
    assert count(loop, "tenant_mismatch") == 1
    assert count(loop, "labelled") == 2


def test_the_cli_asks_which_tenant_when_two_asked_the_same_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    settings = Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))

    async def run() -> None:
        async with EmbeddedRuntime(settings) as runtime:
            for tenant in ("acme", "globex"):
                await runtime.ingest(tenant, sample_documents())
                question = "What is the warranty period?"
                await runtime.ask([QueryEvent(query_id="q-1", tenant_id=tenant, query=question)])

    asyncio.run(run())
    base = ["feedback", "q-1", "--relevant", "--data-dir", str(tmp_path)]
    runner = CliRunner()
    unnamed = runner.invoke(app, base)
    assert unnamed.exit_code == 2
    assert "asked by tenants acme, globex: name one with --tenant" in unnamed.output
    named = runner.invoke(app, [*base, "--tenant", "globex"])
    assert named.exit_code == 0, named.output
    assert "globex/" in named.output
