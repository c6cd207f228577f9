"""One tenant cannot hold every waiting ``POST /v1/query``: past its bound it gets a 429.

Before: one API key could hold all 4,096 connections with requests waiting out their
``timeout_s``, and every other tenant's requests were refused at the connection cap.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest
from pydantic import ValidationError

from ragsift.api import Authenticator, create_web_app, openapi_document
from ragsift.api.guarded_site import MOST_CONNECTIONS
from ragsift.settings import ApiSettings, KafkaSettings
from tests.unit.api.conftest import Keys, RecordingApi, build_result

Client = TestClient[Any, Any]


def dropped(api: RecordingApi) -> dict[str, float]:
    """``ragsift_api_waits_dropped_total`` by reason."""
    counts = {}
    for line in generate_latest(api.metrics.registry).decode().splitlines():
        if line.startswith("ragsift_api_waits_dropped_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('reason="')[1].split('"')[0]] = float(value)
    return counts


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_a_tenant_past_its_bound_gets_a_429_and_the_others_are_served(
    make_api: Callable[..., RecordingApi], keys: Keys
) -> None:
    api = make_api(max_waiting_per_tenant=2)
    api.waiters.clock = lambda: 100.0  # stopped: the Retry-After is the whole timeout
    async with TestClient(TestServer(create_web_app(api))) as client:

        def ask(key: str, query_id: str) -> Any:
            body = {"query": "q", "query_id": query_id, "timeout_s": 40}
            return client.post("/v1/query", json=body, headers=keys.header(key))

        held = [asyncio.ensure_future(ask(keys.alpha, f"a{i}")) for i in range(2)]
        await _until(lambda: len(api.sent) == 2)
        refused = await ask(keys.alpha, "a2")
        assert refused.status == 429
        # when the first waiting request's timeout ends at the latest, not a fixed 1 s
        assert refused.headers["Retry-After"] == "40"
        body = await refused.json()
        assert body["error"] == "tenant_busy"
        assert body["query_id"] == "a2"
        assert "2 requests" in body["detail"]
        assert [event.query_id for event, _ in api.sent] == ["a0", "a1"]  # never sent
        # another tenant is still served; so is a key that covers alpha, for its other tenant
        beta = asyncio.ensure_future(ask(keys.beta, "b0"))
        await _until(lambda: len(api.sent) == 3)
        api.accept_result(build_result("b0", "beta", query="q"))
        assert (await beta).status == 200
        # an answered request frees its slot
        api.accept_result(build_result("a0", "alpha", query="q"))
        assert (await held[0]).status == 200
        again = asyncio.ensure_future(ask(keys.alpha, "a3"))
        await _until(lambda: len(api.sent) == 4)
        api.accept_result(build_result("a3", "alpha", query="q"))
        assert (await again).status == 200
        assert dropped(api) == {"tenant_limit": 1.0, "client_gone": 0.0}
        held[1].cancel()
    assert api.waiters._pending == {}


async def test_zero_is_no_bound(make_api: Callable[..., RecordingApi], keys: Keys) -> None:
    api = make_api(max_waiting_per_tenant=0)
    async with TestClient(TestServer(create_web_app(api))) as client:
        body = {"query": "q", "timeout_s": 60}
        held = [
            asyncio.ensure_future(
                client.post("/v1/query", json=body, headers=keys.header(keys.alpha))
            )
            for _ in range(20)
        ]
        await _until(lambda: len(api.sent) == 20)
        for task in held:
            task.cancel()
    assert dropped(api) == {"tenant_limit": 0.0, "client_gone": 0.0}


@pytest.mark.parametrize("bad", [-1, 10**12, "many", 2.5])
def test_a_bad_bound_is_refused_by_name(bad: Any) -> None:
    with pytest.raises(ValidationError, match="max_waiting_per_tenant"):
        ApiSettings(max_waiting_per_tenant=bad)


def test_the_default_bound_is_a_quarter_of_the_connection_cap() -> None:
    assert ApiSettings().max_waiting_per_tenant == MOST_CONNECTIONS // 4


def test_the_openapi_document_lists_the_429() -> None:
    responses = openapi_document()["paths"]["/v1/query"]["post"]["responses"]
    assert "Retry-After" in responses["429"]["description"]


async def test_a_request_whose_client_left_stops_waiting_and_frees_its_slot(
    make_api: Callable[..., RecordingApi], keys: Keys
) -> None:
    # Served as `ragsift api` serves it: AppRunner does not cancel the handler of a
    # client that left, so it waited out its timeout_s holding the tenant's slot.
    api = make_api(max_waiting_per_tenant=1)
    api.waiters.gone_check_s = 0.05
    runner = web.AppRunner(create_web_app(api))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        body = json.dumps({"query": "q", "query_id": "left", "timeout_s": 60}).encode()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {keys.alpha}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        await _until(lambda: len(api.sent) == 1)
        writer.close()
        await _until(lambda: not api.waiters._pending)
        assert dropped(api) == {"tenant_limit": 0.0, "client_gone": 1.0}
        assert _statuses(api) == {"499": 1.0}
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as session:
            # the slot is free: the tenant's next request is sent and answered
            api.answer = lambda api, event, _: api.accept_result(
                build_result(event.query_id, event.tenant_id, query=event.query)
            )
            again = {"query": "q", "query_id": "next", "timeout_s": 60}
            async with session.post("/v1/query", json=again, headers=keys.header(keys.alpha)) as r:
                assert r.status == 200
            # the query that was sent is still answered, and kept for a poll
            api.accept_result(build_result("left", "alpha", query="q"))
            async with session.get("/v1/queries/left", headers=keys.header(keys.alpha)) as r:
                assert r.status == 200
                assert (await r.json())["query_id"] == "left"
    finally:
        await runner.cleanup()


def _statuses(api: RecordingApi) -> dict[str, float]:
    """``ragsift_api_requests_total`` of ``/v1/query``, by status."""
    counts = {}
    for line in generate_latest(api.metrics.registry).decode().splitlines():
        if line.startswith('ragsift_api_requests_total{route="/v1/query"'):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('status="')[1].split('"')[0]] = float(value)
    return counts


async def test_without_auth_the_bound_applies_by_the_bodys_tenant(
    api_settings: ApiSettings,
) -> None:
    # --insecure-no-auth: no credential names the tenant; the body's tenant_id does, and
    # the bound counts by it as by a credential's tenant.
    settings = api_settings.model_copy(update={"max_waiting_per_tenant": 2})
    auth = Authenticator.from_settings(settings, insecure=True)
    api = RecordingApi(KafkaSettings(), auth=auth, settings=settings)
    async with TestClient(TestServer(create_web_app(api))) as client:

        def ask(tenant: str, query_id: str) -> Any:
            body = {"query": "q", "query_id": query_id, "tenant_id": tenant, "timeout_s": 60}
            return client.post("/v1/query", json=body)

        held = [asyncio.ensure_future(ask("alpha", f"a{i}")) for i in range(2)]
        await _until(lambda: len(api.sent) == 2)
        refused = await ask("alpha", "a2")
        assert refused.status == 429
        assert (await refused.json())["error"] == "tenant_busy"
        assert [event.query_id for event, _ in api.sent] == ["a0", "a1"]  # never sent
        other = asyncio.ensure_future(ask("beta", "b0"))  # another tenant is served
        await _until(lambda: len(api.sent) == 3)
        api.accept_result(build_result("b0", "beta", query="q"))
        assert (await other).status == 200
        assert dropped(api) == {"tenant_limit": 1.0, "client_gone": 0.0}
        for task in held:
            task.cancel()
