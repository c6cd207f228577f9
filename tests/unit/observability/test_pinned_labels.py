"""Tenants and collections an operator names keep their own series, whatever comes first.

Label slots go to the first values seen, for good: a burst of made-up tenant ids on
the queries topic (or test tenants at start-up) took all fifty, and the real tenants
shared ``(other)`` until the worker restarted. ``RAGSIFT_WORKER_METRICS_TENANTS`` /
``_COLLECTIONS`` name the values that always keep their own series, beside the bound
(not counted in it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.errors import ConfigurationError
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import BoundedLabeler, Metrics
from ragsift.schemas import QueryEvent
from ragsift.settings import Settings, WorkerSettings
from tests.factories import embedded_settings

pytestmark = pytest.mark.unit

FOLDED = "ragsift_metric_label_values_folded_total"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("RAGSIFT_", "RAG_")):
            monkeypatch.delenv(name)


def test_pinned_values_keep_their_label_after_a_flood_and_take_no_slot() -> None:
    labeler = BoundedLabeler(2, pinned=["acme", "beta"])
    flood = [labeler(f"made-up-{i}") for i in range(1_000)]
    assert flood[:2] == ["made-up-0", "made-up-1"]  # the bound's two slots, first come
    assert set(flood[2:]) == {"(other)"}
    assert [labeler("acme"), labeler("beta"), labeler("gamma")] == ["acme", "beta", "(other)"]


def test_pinning_the_shared_label_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'\(other\)' cannot be pinned"):
        BoundedLabeler(2, pinned=["acme", "(other)"])


def test_made_up_tenants_first_do_not_fold_a_pinned_tenant() -> None:
    metrics = Metrics(max_tenants=50, tenants=["acme"], collections=["docs"])
    for i in range(10_000):
        metrics.observe_result(f"made-up-{i}", "high_confidence", 0.9, "ok", {})
        metrics.decisions.labels(f"col-{i}", "true").inc()
    metrics.observe_result("acme", "no_relevant_context", 0.1, "ok", {})
    metrics.decisions.labels("docs", "false").inc()
    sample = metrics.registry.get_sample_value
    assert sample("ragsift_queries_total", {"tenant": "acme", "outcome": "ok"}) == 1
    assert sample("ragsift_confidence_status", {"tenant": "acme"}) == 0
    assert sample("ragsift_decisions_total", {"collection": "docs", "use_context": "false"}) == 1
    # The fifty slots went to the first made-up ids; the pinned look-ups folded nothing.
    assert sample(FOLDED, {"label": "tenant"}) == 10_000 - 50
    assert sample(FOLDED, {"label": "collection"}) == 10_000 - 50


def test_the_settings_read_comma_separated_values(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().worker.metrics_tenants == ()
    monkeypatch.setenv("RAGSIFT_WORKER_METRICS_TENANTS", " acme, beta.eu ,,acme,")
    monkeypatch.setenv("RAGSIFT_WORKER_METRICS_COLLECTIONS", "docs,handbook-v2")
    worker = Settings.from_env().worker
    assert worker.metrics_tenants == ("acme", "beta.eu")  # blanks and repeats dropped
    assert worker.metrics_collections == ("docs", "handbook-v2")


@pytest.mark.parametrize(
    ("variable", "value", "shown"),
    [
        ("TENANTS", "acme,(other)", "'(other)' is no tenant id"),
        ("TENANTS", "acme,bad tenant", "'bad tenant' is no tenant id"),
        ("TENANTS", "acme,\x01x", r"'\x01x' is no tenant id"),
        ("TENANTS", "\u202eacme", "is no tenant id"),
        ("TENANTS", "租户", "'租户' is no tenant id"),
        ("TENANTS", "a" * 65, "is no tenant id"),
        ("TENANTS", '["acme"]', "is no tenant id"),  # not JSON: one comma-separated list
        ("TENANTS", "[" * 5_000, "is no tenant id"),
        ("TENANTS", "other/acme", "is no tenant id"),
        ("TENANTS", ",".join(f"t{i}" for i in range(10_001)), "at most 10000 items"),
        ("COLLECTIONS", "docs,a.b", "'a.b' is no collection name"),
        ("COLLECTIONS", "../etc", "is no collection name"),
        ("COLLECTIONS", "9" * 5_000, "is no collection name"),
    ],
)
def test_a_value_no_label_can_have_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, shown: str
) -> None:
    monkeypatch.setenv(f"RAGSIFT_WORKER_METRICS_{variable}", value)
    with pytest.raises(ConfigurationError) as info:
        Settings.from_env()
    message = str(info.value)
    assert f"RAGSIFT_WORKER_METRICS_{variable}" in message
    assert shown in message
    assert len(message) < 600  # a huge value is cut, not echoed


async def test_the_embedded_runtime_keeps_the_bounds_and_pins_it_is_given(
    tmp_path: Path,
) -> None:
    """The embedded runtime (demo, console) built its container with the default
    bounds, whatever RAGSIFT_WORKER_METRICS_MAX_TENANTS said; both runtimes build it
    from the settings now (wiring.build_metrics)."""
    worker = WorkerSettings(metrics_max_tenants=1, metrics_tenants=("acme",))
    settings = embedded_settings(tmp_path).model_copy(update={"worker": worker})
    async with EmbeddedRuntime(settings) as runtime:
        await runtime.ingest("acme", sample_documents())
        await runtime.ask(
            [
                QueryEvent(query_id=f"q{n}", tenant_id=tenant, query="refund policy?")
                for n, tenant in enumerate(["first", "second", "acme"])
            ]
        )
        sample = runtime.metrics.registry.get_sample_value
        assert sample("ragsift_queries_total", {"tenant": "first", "outcome": "ok"}) == 1
        assert sample("ragsift_queries_total", {"tenant": "(other)", "outcome": "ok"}) == 1
        assert sample("ragsift_queries_total", {"tenant": "acme", "outcome": "ok"}) == 1
