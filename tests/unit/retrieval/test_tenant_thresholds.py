"""Per-tenant thresholds (A13): levels, answer threshold and TTLs per tenant from a file
that is re-read when it changes; a bad file fails start-up, and on reload is logged,
counted and ignored."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence import LevelThresholds
from ragsift.errors import ConfigurationError
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.cache import InMemoryCache
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.pipeline import PipelineOutput, RetrievalPipeline
from ragsift.retrieval.tenant_thresholds import TenantThresholdStore, load_tenant_thresholds
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import ConfidenceSettings, GuardrailSettings, Settings
from ragsift.wiring import build_pipeline

EMBEDDER = HashingEmbedder()
BASE = LevelThresholds(high=0.30, medium=0.20, low=0.10)
POLL_S = 5.0


class FakeClock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, data: Any) -> None:
    """Write the file and move its mtime on: a rewrite within a second still shows."""
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    stamp = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))


def reloads(metrics: Metrics, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "ragsift_tenant_thresholds_reloads_total", {"result": result}
    )
    return value or 0.0


# -- the file --------------------------------------------------------------------------------


def test_yaml_and_json_files_give_the_same_thresholds(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("tenants:\n  acme:\n    high: 0.9\n    ttl_high_s: 60\n")
    (tmp_path / "t.json").write_text('{"tenants": {"acme": {"high": 0.9, "ttl_high_s": 60}}}')
    assert load_tenant_thresholds(tmp_path / "t.yaml", BASE) == load_tenant_thresholds(
        tmp_path / "t.json", BASE
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tenants: [", "tenant thresholds"),  # not YAML
        ('{"tenants": {"acme": {"high": 2}}}', "less than or equal to 1"),
        ('{"tenants": {"acme": {"hihg": 0.9}}}', "Extra inputs"),  # a typo is not ignored
        ('{"tenants": {"acme": {"medium": 0.5}}}', "high > medium > low"),  # 0.30 / 0.5 / 0.10
        ('{"tenants": {"ac/me": {"high": 0.9}}}', "tenants"),  # not a tenant id
        ('{"tenants": {"acme": {"ttl_high_s": 99999999999}}}', "ttl_high_s"),
        ('{"tenants": {"acme": {"high": "\\u0000"}}}', "high"),
        ("[" * 50 + "]" * 50, "dictionary"),  # deep nesting
    ],
)
def test_a_bad_file_is_a_clear_error_at_start_up(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        TenantThresholdStore(path, BASE, poll_interval_s=POLL_S)


def test_a_missing_file_is_a_clear_error_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read it"):
        TenantThresholdStore(tmp_path / "absent.yaml", BASE, poll_interval_s=POLL_S)


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("# " + "x" * (5 * 1024 * 1024))
    with pytest.raises(ConfigurationError, match="bytes"):
        TenantThresholdStore(path, BASE, poll_interval_s=POLL_S)


# -- reloads ---------------------------------------------------------------------------------


def test_a_changed_file_applies_after_the_poll_interval(tmp_path: Path) -> None:
    path, clock, metrics = tmp_path / "t.json", FakeClock(), Metrics()
    write(path, {"tenants": {"acme": {"answer_threshold": 0.5}}})
    store = TenantThresholdStore(path, BASE, poll_interval_s=POLL_S, metrics=metrics, clock=clock)
    write(path, {"tenants": {"acme": {"answer_threshold": 0.8}}})
    clock.now = POLL_S / 2
    assert not store.poll()  # bounded frequency: too soon to look
    assert store.policy("acme").answer_threshold == 0.5
    clock.now = POLL_S
    assert store.poll()
    assert store.policy("acme").answer_threshold == 0.8
    assert reloads(metrics, "ok") == 1
    clock.now = 2 * POLL_S
    assert not store.poll()  # unchanged file: nothing re-read


def test_a_bad_reload_is_counted_and_the_last_good_thresholds_stay(tmp_path: Path) -> None:
    path, clock, metrics = tmp_path / "t.json", FakeClock(), Metrics()
    write(path, {"tenants": {"acme": {"high": 0.9}}})
    store = TenantThresholdStore(path, BASE, poll_interval_s=POLL_S, metrics=metrics, clock=clock)
    write(path, "{not json")
    clock.now = POLL_S
    assert not store.poll()
    assert reloads(metrics, "error") == 1
    assert store.policy("acme").levels == LevelThresholds(high=0.9, medium=0.20, low=0.10)
    path.unlink()  # a deleted file is a bad reload too
    clock.now = 2 * POLL_S
    assert not store.poll()
    assert reloads(metrics, "error") == 2
    assert store.get("acme") is not None


# -- in the pipeline -------------------------------------------------------------------------


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """Tenants acme and other, the same three documents each."""
    built = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(built, EMBEDDER)
    docs = [
        SourceDocument("a.md", "Refunds are paid within fourteen days by bank transfer."),
        SourceDocument("b.md", "Refunds for gift cards are paid as store credit."),
        SourceDocument("c.md", "Shipping takes three days within the country."),
    ]
    for tenant in ("acme", "other"):
        await indexer.ingest(tenant, "default", docs)
    yield built
    await built.close()


def make_pipeline(
    tmp_path: Path, index: EdgeIndex, path: Path, clock: FakeClock
) -> tuple[RetrievalPipeline, InMemoryCache]:
    settings = Settings(
        data_dir=tmp_path,
        # Weighted scorer, one hit needed, levels at BASE: plumbing, not calibration.
        confidence=ConfidenceSettings(
            scorer="weighted",
            # Refund documents score ~0.5, shipping ~0.08 (hybrid, hashing embedder);
            # no relaxation: the shipping document is dropped, with its explanation.
            similarity_threshold=0.3,
            min_results=0,
            high_threshold=BASE.high,
            medium_threshold=BASE.medium,
            low_threshold=BASE.low,
        ),
        guardrails=GuardrailSettings(tenant_thresholds_path=path, tenant_thresholds_poll_s=POLL_S),
    )
    metrics = Metrics()
    pipeline = build_pipeline(
        settings, index=index, embedder=EMBEDDER, metrics=metrics, cache=InMemoryCache()
    )
    assert isinstance(pipeline.tenant_thresholds, TenantThresholdStore)  # built from settings
    # the same store on a fake clock
    pipeline.tenant_thresholds = TenantThresholdStore(
        path, BASE, poll_interval_s=POLL_S, metrics=metrics, clock=clock
    )
    assert isinstance(pipeline.cache, InMemoryCache)
    return pipeline, pipeline.cache


async def ask(pipeline: RetrievalPipeline, tenant: str, query_id: str) -> RetrievalResult:
    query = QueryEvent(query_id=query_id, tenant_id=tenant, query="How are refunds paid?")
    [out] = await pipeline.process([query])
    assert isinstance(out, PipelineOutput), out
    return out.result


async def test_a_tenants_levels_and_answer_threshold_apply_without_a_restart(
    tmp_path: Path, index: EdgeIndex
) -> None:
    path, clock = tmp_path / "tenants.json", FakeClock()
    write(path, {"tenants": {}})
    pipeline, _ = make_pipeline(tmp_path, index, path, clock)
    before = await ask(pipeline, "acme", "q1")
    assert before.answerable
    assert before.dropped
    # Bars above any confidence: acme's results become very low and unanswerable.
    bars = {"high": 0.99, "medium": 0.98, "low": 0.97, "answer_threshold": 0.99}
    write(path, {"tenants": {"acme": bars}})
    clock.now = POLL_S
    after = await ask(pipeline, "acme", "q2")
    assert not after.cache.hit  # the tenant's cached entry is stale with its thresholds
    assert after.confidence == before.confidence
    assert before.confidence < bars["low"]
    assert (after.status, after.level) == ("no_relevant_context", "VERY_LOW")
    assert not after.answerable
    assert after.answerability_reason == "low_confidence"
    assert after.dropped == before.dropped  # every drop keeps its explanation
    other = await ask(pipeline, "other", "q3")
    assert other.level == before.level
    assert other.answerable


async def test_a_tenants_ttls_apply_to_its_cached_results(tmp_path: Path, index: EdgeIndex) -> None:
    path, clock = tmp_path / "tenants.yaml", FakeClock()
    ttl = {f"ttl_{s}_s": 0 for s in ("high", "medium", "low", "none")}
    write(path, "tenants:\n  acme: " + json.dumps(ttl) + "\n")
    pipeline, cache = make_pipeline(tmp_path, index, path, clock)
    await ask(pipeline, "acme", "q1")
    await ask(pipeline, "other", "q2")
    keys = list(cache._data)  # acme's TTL 0: never cached; other's default TTLs: cached
    assert len(keys) == 1
    assert ":other:" in keys[0]
