"""The API's state under distinct values it does not choose: bounded whatever they are.

Results of every tenant arrive from Kafka (the API reads them all), and callers send
query ids, tenant parameters and paths of their own. None of them makes a series, a
waiter or a store entry that outlives the bound: the request counter is labelled by
route template, the store is an LRU by bytes, the console counts 50 tenants apart,
and a waiter lives as long as its request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from ragsift.api import create_web_app
from ragsift.api.console import OTHER_TENANT, ConsoleHub
from ragsift.schemas import QueryEvent
from tests.unit.api.conftest import Keys, RecordingApi, build_result

pytestmark = pytest.mark.unit

#: distinct tenants read from the results topic (400 times the console's bound)
TENANTS = 20_000
#: distinct ids, tenant parameters and paths sent over HTTP
REQUESTS = 300


def _series(api: RecordingApi, name: str) -> list[dict[str, str]]:
    return [
        sample.labels
        for metric in api.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == name
    ]


async def test_results_of_twenty_thousand_tenants_keep_the_store_and_console_bounded(
    make_api: Callable[..., RecordingApi],
) -> None:
    api = make_api(store_bytes=1_000_000)
    api.hub = ConsoleHub(backlog=10)
    for i in range(TENANTS):
        api.accept("retrievals", build_result(f"q{i}", f"t{i}"))
    assert api.store.bytes <= 1_000_000
    assert 0 < len(api.store) < TENANTS
    counters = api.hub.counters(None)
    assert len(counters) == 51  # fifty tenants and the rest together
    assert counters[OTHER_TENANT]["queries"] == TENANTS - 50
    assert api.waiters._pending == {}


async def test_distinct_ids_tenants_and_paths_add_no_series_and_no_waiters(
    api: RecordingApi, keys: Keys
) -> None:
    def answer(api: RecordingApi, event: QueryEvent, payload: bytes) -> None:
        result = build_result(event.query_id, event.tenant_id, collection=event.collection)
        api.accept("retrievals", result)

    api.answer = answer
    async with TestClient(TestServer(create_web_app(api))) as client:
        auth = keys.header(keys.multi)
        for i in range(REQUESTS):
            seen = await client.get(f"/v1/queries/q{i}", headers=auth)
            assert seen.status == 404
            other = await client.get(f"/v1/queries/q{i}?tenant_id=t{i}", headers=auth)
            assert other.status == 403
            lost = await client.get(f"/nowhere/{i}/x", headers=auth)
            assert lost.status == 404
            answered = await client.post(
                "/v1/query",
                json={
                    "tenant_id": "alpha",
                    "query": f"q {i}?",
                    "collection": f"c{i}",
                },
                headers=auth,
            )
            assert answered.status == 200
    routes: dict[tuple[str, str], Any] = {
        (labels["route"], labels["status"]): labels
        for labels in _series(api, "ragsift_api_requests_total")
    }
    assert {route for route, _ in routes} <= {"/v1/queries/{query_id}", "unmatched", "/v1/query"}
    assert len(routes) <= 6
    assert api.waiters._pending == {}
