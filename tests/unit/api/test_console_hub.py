"""The console hub and the API's console routes: tenant scoping, bounds, counters, SSE."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from ragsift.api import Authenticator, create_web_app
from ragsift.api.console import OTHER_TENANT, ConsoleHub, Message, _Client, _sse
from ragsift.schemas import DeadLetter
from ragsift.settings import ApiSettings, KafkaSettings
from tests.unit.api.conftest import Keys, RecordingApi, build_result
from tests.unit.report.conftest import build_result as build_report_input


def drain(queue: asyncio.Queue[Message | None]) -> list[Message]:
    out: list[Any] = []  # None, the end of a stream, only after end_streams()
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


def test_a_page_sees_only_its_tenants() -> None:
    hub = ConsoleHub(backlog=10)
    page, replay = hub.open(frozenset({"alpha"}))
    hub.accept("retrievals", build_result("a1", "alpha"))
    hub.accept("retrievals", build_result("b1", "beta"))
    got = drain(page.queue)
    assert {m["tenant_id"] for m in got if m["kind"] == "result"} == {"alpha"}
    counters = [m["data"] for m in got if m["kind"] == "counters"]
    assert counters
    assert all(set(c) <= {"alpha"} for c in counters)
    _, replay = hub.open(frozenset({"beta"}))
    assert [m["query_id"] for m in replay if m["kind"] == "result"] == ["b1"]


def letter(stage: str, query_id: str, tenant_id: str | None = None) -> DeadLetter:
    """The retrieval worker's letter of a query it refused at ``stage``."""
    return DeadLetter.build(
        original=b"{}",
        stage=stage,
        error_type="X",
        error=f"refused at {stage}",
        worker="retrieval",
        topic="ragsift.queries.v1",
        query_id=query_id,
        tenant_id=tenant_id,
    )


def test_dead_letters_name_no_tenant_so_only_all_tenant_pages_get_them() -> None:
    hub = ConsoleHub(backlog=10)
    scoped, _ = hub.open(frozenset({"alpha"}))
    everyone, _ = hub.open(None)
    hub.accept("deadletter", letter("validate", "bad"))
    assert drain(scoped.queue) == []
    assert [m["kind"] for m in drain(everyone.queue)] == ["rejected"]


def test_a_letter_of_a_tenants_query_reaches_that_tenants_pages_alone() -> None:
    # Before letters named their tenant, a tenant's page never heard its query failed.
    hub = ConsoleHub(backlog=10)
    alpha, _ = hub.open(frozenset({"alpha"}))
    beta, _ = hub.open(frozenset({"beta"}))
    everyone, _ = hub.open(None)
    hub.accept("deadletter", letter("handler", "q1", "alpha"))
    assert [(m["kind"], m["query_id"]) for m in drain(alpha.queue)] == [("rejected", "q1")]
    assert drain(beta.queue) == []
    assert [m["kind"] for m in drain(everyone.queue)] == ["rejected"]


def test_backlog_and_tenants_are_bounded() -> None:
    hub = ConsoleHub(backlog=5, max_tenants=2)
    for i in range(50):
        hub.accept("retrievals", build_result(f"q{i}", f"t{i}"))
    _, replay = hub.open(None)
    assert len([m for m in replay if m["kind"] == "result"]) == 5
    counters = hub.counters(None)
    assert set(counters) == {"t0", "t1", OTHER_TENANT}
    assert counters[OTHER_TENANT]["queries"] == 48
    assert OTHER_TENANT not in hub.counters(frozenset({"t0"}))


def test_a_slow_page_loses_messages_counted_not_memory() -> None:
    drops: list[int] = []
    hub = ConsoleHub(backlog=5, on_drop=lambda: drops.append(1))
    page, _ = hub.open(None)
    for i in range(400):
        hub.accept("retrievals", build_result(f"q{i}", "alpha"))
    assert page.queue.qsize() == page.queue.maxsize
    assert len(drops) == 2 * 400 - page.queue.maxsize  # a result and a counters message each
    hub.close(page)
    assert hub.pages == 0


def test_counters_tell_answers_from_refusals_and_cache_hits() -> None:
    from ragsift.report.builder import ReportBuilder, ReportSettings

    hub = ConsoleHub(backlog=10)
    answered = build_report_input(query_id="a", tenant_id="acme")
    refused = build_report_input(query_id="r", tenant_id="acme", confidence=0.1, hits=[])
    cached = build_report_input(query_id="c", tenant_id="acme", cache={"hit": True})
    builder = ReportBuilder(ReportSettings())

    async def build() -> None:
        for result in (answered, refused, cached):
            hub.accept("retrievals", result)
            report, _ = await builder.build(result)
            hub.accept("reports", report)

    asyncio.run(build())
    acme = hub.counters(None)["acme"]
    assert acme["queries"] == 3
    assert acme["cache_hits"] == 1
    assert acme["refusal_rate"] == pytest.approx(1 / 3)
    assert acme["answer_rate"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        "日本語の質問",
        "a\u202eb",
        "\x07bell",
        "x" * 2000,
        'line\n\ndata: {"kind":"result"}',  # would forge an SSE frame if not escaped
    ],
)
def test_hostile_text_travels_as_json_data_only(hostile: str) -> None:
    hub = ConsoleHub(backlog=3)
    hub.accept("retrievals", build_result("h", "alpha", query=hostile))
    _, replay = hub.open(None)
    [message] = [m for m in replay if m["kind"] == "result"]
    frame = _sse(message)
    assert frame.count(b"\n\n") == 1  # one frame, whatever the text
    assert json.loads(frame[len(b"data: ") :])["data"]["query"] == hostile


# -- the API's console routes -------------------------------------------------------------


@pytest.fixture
async def console_client(
    keys: Keys, api_settings: ApiSettings
) -> AsyncIterator[tuple[TestClient[Any, Any], RecordingApi]]:
    api = RecordingApi(
        KafkaSettings(),
        auth=Authenticator.from_settings(api_settings),
        settings=api_settings,
        hub=ConsoleHub(backlog=20),
    )
    async with TestClient(TestServer(create_web_app(api))) as client:
        yield client, api


async def read_events(resp: Any, want: Callable[[list[Message]], bool]) -> list[Message]:
    got: list[Message] = []
    async with asyncio.timeout(10):
        while not want(got):
            line = (await resp.content.readline()).decode()
            if line.startswith("data: "):
                got.append(json.loads(line[6:]))
    return got


async def test_the_page_and_assets_need_no_key_but_the_events_do(
    console_client: tuple[TestClient[Any, Any], RecordingApi],
) -> None:
    client, _ = console_client
    page = await client.get("/console")
    assert page.status == 200
    assert "ragsift console" in await page.text()
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    for name, kind in [("console.js", "text/javascript"), ("console.css", "text/css")]:
        asset = await client.get(f"/console/static/{name}")
        assert asset.status == 200
        assert asset.content_type == kind
    events = await client.get("/console/events")
    assert events.status == 401


@pytest.mark.parametrize("name", ["../app.py", "..%2Fapp.py", "nope.js", "console.js%00.py"])
async def test_only_shipped_assets_are_served(
    console_client: tuple[TestClient[Any, Any], RecordingApi], name: str
) -> None:
    client, _ = console_client
    resp = await client.get(f"/console/static/{name}")
    assert resp.status == 404


async def test_the_event_stream_is_scoped_to_the_keys_tenants(
    console_client: tuple[TestClient[Any, Any], RecordingApi], keys: Keys
) -> None:
    client, api = console_client
    api.accept("retrievals", build_result("before", "alpha"))
    resp = await client.get("/console/events", headers=keys.header(keys.beta))
    assert resp.status == 200
    assert resp.content_type == "text/event-stream"
    api.accept("retrievals", build_result("alpha-secret", "alpha"))
    api.accept("retrievals", build_result("beta-own", "beta"))
    got = await read_events(resp, lambda ms: any(m["query_id"] == "beta-own" for m in ms))
    seen = {m["query_id"] for m in got if m["kind"] == "result"}
    assert seen == {"beta-own"}
    resp.close()


def test_ending_the_streams_reaches_a_page_whose_queue_is_full() -> None:
    dropped: list[int] = []
    hub = ConsoleHub(backlog=10, on_drop=lambda: dropped.append(1))
    page, _ = hub.open(None)
    while not page.queue.full():
        hub.accept("retrievals", build_result(f"q{page.queue.qsize()}", "alpha"))
    hub.end_streams()
    got: list[Message | None] = list(drain(page.queue))
    assert got[-1] is None  # the end is last, after what the page had not read
    assert len(got) == page.queue.maxsize


@pytest.mark.parametrize("page_stays", [True, False])
async def test_a_stopping_server_ends_the_event_streams_without_waiting_for_them(
    monkeypatch: pytest.MonkeyPatch, keys: Keys, api_settings: ApiSettings, page_stays: bool
) -> None:
    # No heartbeat for an hour: only the end of the stream can let the server stop.
    monkeypatch.setattr("ragsift.api.console.HEARTBEAT_S", 3600.0)
    hub = ConsoleHub(backlog=20)
    api = RecordingApi(
        KafkaSettings(),
        auth=Authenticator.from_settings(api_settings),
        settings=api_settings,
        hub=hub,
    )
    server = TestServer(create_web_app(api))
    async with TestClient(server) as client:
        resp = await client.get("/console/events", headers=keys.header(keys.alpha))
        assert resp.status == 200
        await read_events(resp, lambda ms: any(m["kind"] == "counters" for m in ms))
        assert hub.pages == 1
        if not page_stays:
            resp.close()  # the tab was closed: nothing tells the handler until it writes
        # aiohttp waits up to 60 s for a handler; the stream must end long before.
        await asyncio.wait_for(server.runner.cleanup(), timeout=20)  # type: ignore[union-attr]
        assert hub.pages == 0
        if page_stays:
            assert (await resp.content.read()).strip() == b""  # the stream ended
            assert resp.content.at_eof()  # (an open page's EventSource then reconnects)


def test_a_tenant_named_other_never_reads_the_overflow_counters() -> None:
    # The overflow bucket was the tenant id "other": that tenant's page showed every
    # tenant past the limit's queries and refusals as its own.
    hub = ConsoleHub(backlog=5, max_tenants=2)
    hub.accept("retrievals", build_result("q0", "other"))
    hub.accept("retrievals", build_result("q1", "t1"))
    for i in range(5):
        hub.accept("retrievals", build_result(f"v{i}", "victim"))
    theirs = hub.counters(frozenset({"other"}))
    assert theirs == {"other": theirs["other"]}
    assert theirs["other"]["queries"] == 1
    assert hub.counters(None)[OTHER_TENANT]["queries"] == 5


def test_a_page_gets_counters_only_when_a_tenant_it_sees_asks() -> None:
    hub = ConsoleHub(backlog=5)
    page, _ = hub.open(frozenset({"t0"}))
    hub.accept("retrievals", build_result("q1", "t1"))  # another tenant's question
    assert drain(page.queue) == []
    hub.accept("retrievals", build_result("q2", "t0"))
    assert [m["kind"] for m in drain(page.queue)] == ["result", "counters"]


def test_pinned_tenants_keep_their_own_counters_outside_the_bound() -> None:
    # RAGSIFT_WORKER_METRICS_TENANTS pinned a tenant's metric series, but the console
    # gave its counters to the first tenants seen: a burst of made-up ids folded the
    # pinned tenant into (other tenants), and its own page showed it no counters at all.
    hub = ConsoleHub(backlog=5, max_tenants=2, pinned_tenants=("acme",))
    for i in range(10):
        hub.accept("retrievals", build_result(f"q{i}", f"t{i}"))
    page, _ = hub.open(frozenset({"acme"}))
    hub.accept("retrievals", build_result("a1", "acme"))
    counters = hub.counters(None)
    assert set(counters) == {"t0", "t1", "acme", OTHER_TENANT}  # the pin took no slot
    assert counters["acme"]["queries"] == 1
    assert counters[OTHER_TENANT]["queries"] == 8
    got = [m["data"] for m in drain(page.queue) if m["kind"] == "counters"]
    assert got == [{"acme": counters["acme"]}]


def test_the_overflow_bucket_cannot_be_pinned() -> None:
    with pytest.raises(ValueError, match=r"\(other tenants\)"):
        ConsoleHub(backlog=5, pinned_tenants=(OTHER_TENANT,))


def test_one_event_reads_the_counters_once_per_set_of_tenants_not_once_per_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each open page had the counters read for it, over every tenant counted, on each
    # result and report of a tenant it sees: one tenant's key holding 4,000 pages open
    # cost 59 ms of the event loop per result of its own (the loop every request and the
    # Kafka reader share); 4,000 all-tenant pages, 145 ms.
    hub = ConsoleHub(backlog=5)
    for i in range(20):
        hub.accept("retrievals", build_result(f"q{i}", f"t{i}"))
    pages = [hub.open(frozenset({"t1"}))[0] for _ in range(100)]
    pages += [hub.open(None)[0] for _ in range(100)]
    reads: list[frozenset[str] | None] = []
    counters = hub.counters

    def counted(tenants: frozenset[str] | None) -> dict[str, dict[str, float | int]]:
        reads.append(tenants)
        return counters(tenants)

    monkeypatch.setattr(hub, "counters", counted)
    hub.accept("retrievals", build_result("again", "t1"))
    assert sorted(reads, key=str) == [None, frozenset({"t1"})]
    for page in pages:  # each page still gets its own tenants' counters
        [result, view] = drain(page.queue)
        assert result["query_id"] == "again"
        assert view["data"] == counters(page.tenants)


def test_another_tenants_pages_cost_nothing_on_this_tenants_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every event went past every open page to find those that see its tenant: 4,000
    # pages of one key (or more: a page whose client left lingers, outside the
    # connection cap, until its next write) cost 1.5 ms of the shared event loop on
    # each event of every other tenant, four or five events per query.
    hub = ConsoleHub(backlog=5)
    theirs = [hub.open(frozenset({"mallory"}))[0] for _ in range(200)]
    mine, _ = hub.open(frozenset({"alpha"}))
    everyone, _ = hub.open(None)
    asked: list[frozenset[str] | None] = []
    sees = _Client.sees

    def counted(client: _Client, tenant: str | None) -> bool:
        asked.append(client.tenants)
        return sees(client, tenant)

    monkeypatch.setattr(_Client, "sees", counted)
    hub.accept("retrievals", build_result("a1", "alpha"))
    assert frozenset({"mallory"}) not in asked
    assert [m["query_id"] for m in drain(mine.queue) if m["kind"] == "result"] == ["a1"]
    assert [m["query_id"] for m in drain(everyone.queue) if m["kind"] == "result"] == ["a1"]
    assert all(drain(page.queue) == [] for page in theirs)
    hub.accept("deadletter", letter("decode", "x1"))  # names no tenant: all-tenant pages
    assert [m["kind"] for m in drain(everyone.queue)] == ["rejected"]
    assert drain(mine.queue) == []
    for page in [*theirs, mine, everyone]:
        hub.close(page)
    assert hub.pages == 0
    hub.accept("retrievals", build_result("a2", "alpha"))  # no page left to reach


async def test_an_idle_stream_still_gets_its_heartbeat(
    console_client: tuple[TestClient[Any, Any], RecordingApi],
    keys: Keys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked for its client every GONE_CHECK_S, an idle page still gets a comment line
    every HEARTBEAT_S, which keeps proxies from closing it."""
    monkeypatch.setattr("ragsift.api.console.HEARTBEAT_S", 0.05)
    client, _ = console_client
    resp = await client.get("/console/events", headers=keys.header(keys.alpha))
    async with asyncio.timeout(10):
        while (await resp.content.readline()) != b": keep-alive\n":
            pass
    resp.close()
