"""A query the retrieval worker refuses never takes a tenant's or collection's series.

Label values get their own series first come, first served, for good: a refused
query that took one would leave a made-up id with a series and fold a real tenant
into ``(other)``. Tenant ids the schema refuses fail at decode, and queries refused
after it (too many hits asked, an unknown task, an unknown collection, a greeting to
one) fail before anything is counted by tenant or collection. Each is fed through
the worker's router with the bounds at one tenant and one collection, then a real
tenant's query: it gets the one series of each.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.observability.metrics import Metrics
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.topics import TOPICS
from ragsift.workers.retrieval import RetrievalHandler
from tests.factories import EMBEDDED_MAX_QUERY_CHARS, embedded_settings
from tests.unit.streams.scripted import RecordingSender, record_key

pytestmark = pytest.mark.unit

TENANT = "acme"
#: Refused at decode: no tenant id can be these (TENANT_PATTERN).
BAD_TENANTS = ["(other)", "bad tenant", "a" * 65, "\u202eacme", "💥", "acme\n", "\x00", "", "../x"]
#: Valid ids, refused after decode: (extra fields of the query, stage of the refusal).
REFUSED = [
    ({"k": 10**6}, "decode"),
    ({"task_type": "no-such-task"}, "validate"),
    ({"collection": "nowhere"}, "validate"),
    ({"collection": "nowhere", "query": "hello"}, "validate"),  # a greeting: a bypass
    ({"query": "y" * (EMBEDDED_MAX_QUERY_CHARS + 1)}, "validate"),  # over the worker's limit
    ({"query": "y" * 2_000_000}, "decode"),  # over the schema's
    ({"filters": "NESTED"}, "decode"),  # 5,000 levels deep, spliced in below
]


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[EmbeddedRuntime]:
    rt = EmbeddedRuntime(
        embedded_settings(tmp_path), metrics=Metrics(max_tenants=1, max_collections=1)
    )
    await rt.ingest(TENANT, sample_documents())
    yield rt
    await rt.close()


def _record(n: int, **fields: object) -> Received:
    event = {"query_id": f"q{n}", "tenant_id": "intruder", "query": "refund policy?", **fields}
    value = json.dumps(event).replace('"NESTED"', "[" * 5_000 + "]" * 5_000).encode()
    return Received(value, record_key("queries", value, None), TOPICS["queries"].name(), 0, n)


async def test_refused_queries_take_no_series(runtime: EmbeddedRuntime) -> None:
    metrics = runtime.metrics
    sender = RecordingSender()
    router = BatchRouter(
        RetrievalHandler(runtime.pipeline), sender, metrics=metrics, deadline_s=10.0
    )
    records = [_record(n, tenant_id=bad) for n, bad in enumerate(BAD_TENANTS)]
    records += [_record(100 + n, **fields) for n, (fields, _) in enumerate(REFUSED)]
    await router.process(records)
    stages = [stage for _, stage in REFUSED] + ["decode"] * len(BAD_TENANTS)
    for stage in set(stages):  # every one refused, at the stage it names
        letters = metrics.registry.get_sample_value(
            "ragsift_dead_letters_total", {"worker": "retrieval", "stage": stage}
        )
        assert letters == stages.count(stage), stage
    await router.process([_record(200, tenant_id=TENANT)])
    ok = {"tenant": TENANT, "outcome": "ok"}
    assert metrics.registry.get_sample_value("ragsift_queries_total", ok) == 1
    # The bounds' one tenant and one collection are the real ones: nothing was folded.
    folded = "ragsift_metric_label_values_folded_total"
    assert metrics.registry.get_sample_value(folded, {"label": "tenant"}) == 0
    assert metrics.collection("default") == "default"
    assert metrics.registry.get_sample_value(folded, {"label": "collection"}) == 0
