"""``ragsift console``'s app: the embedded pipeline behind the console's page and routes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from ragsift.api.auth import Authenticator, KeyStore
from ragsift.api.console import OTHER_TENANT
from ragsift.cli.serve import _console_hub
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.settings import EmbedderSettings, Settings, WorkerSettings
from ragsift.wiring import CALIBRATIONS_DIR, MIX_STATE_FILE
from tests.factories import embedded_settings
from tests.unit.api.conftest import build_result

IN_SCOPE = "How many days do I have to return the thermostat?"
OUT_OF_SCOPE = "Who won the football world cup in 2014?"


@pytest.fixture
async def loopback(runtime: EmbeddedRuntime) -> AsyncIterator[TestClient[Any, Any]]:
    auth = Authenticator(None, None, insecure=True)  # what `ragsift console` uses on loopback
    async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
        yield client


async def ask(client: TestClient[Any, Any], query: str, **body: Any) -> Any:
    resp = await client.post("/v1/query", json={"query": query, "tenant_id": "acme", **body})
    return resp.status, await resp.json()


async def test_a_head_request_on_the_event_stream_gets_no_stream(
    loopback: TestClient[Any, Any],
) -> None:
    # aiohttp answered HEAD with the GET handler: a 200 that streamed events and never
    # ended, a body where none may be and a connection held open.
    async with asyncio.timeout(10):
        head = await loopback.head("/console/events")
    assert head.status == 405
    assert (await loopback.head("/console")).status == 200  # the page itself keeps HEAD


async def test_an_answer_comes_back_with_its_report_and_streams_live(
    loopback: TestClient[Any, Any],
) -> None:
    events = await loopback.get("/console/events")
    assert events.status == 200
    status, answer = await ask(loopback, IN_SCOPE)
    assert status == 200
    assert answer["report"]["badge"] in ("green", "orange", "red")
    kinds: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(10):
        while not {"result", "report", "decision", "counters"} <= kinds.keys():
            line = (await events.content.readline()).decode()
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if message["query_id"] in (answer["query_id"], None):
                    kinds[message["kind"]] = message
    assert kinds["result"]["data"]["hits"]
    assert kinds["report"]["data"]["badge"] == answer["report"]["badge"]
    assert kinds["counters"]["data"]["acme"]["queries"] >= 1
    events.close()


async def test_a_report_that_could_not_be_built_says_why(
    loopback: TestClient[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The console answered "report": null without a word, where the API says why.
    from ragsift.report.builder import ReportBuilder

    async def broken(self: ReportBuilder, result: object) -> object:
        raise RuntimeError("the report model is gone")

    monkeypatch.setattr(ReportBuilder, "build_report", broken)
    status, answer = await ask(loopback, IN_SCOPE)
    assert status == 200
    assert answer["result"]["hits"]
    assert answer["report"] is None
    assert answer["report_error"]["error"] == "report_failed"
    assert "the report model is gone" in answer["report_error"]["detail"]


async def test_the_console_settles_the_collector_once_started(
    runtime: EmbeddedRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr("ragsift.console_server.settle_gc", lambda: calls.append("settled"))
    app = create_console_app(runtime, auth=Authenticator(None, None, insecure=True))
    assert calls == []  # not while the app is being built
    async with TestClient(TestServer(app)):
        assert calls == ["settled"]


async def test_out_of_scope_is_a_refusal(loopback: TestClient[Any, Any]) -> None:
    status, answer = await ask(loopback, OUT_OF_SCOPE)
    assert status == 200
    assert answer["report"]["is_refusal"]
    assert answer["report"]["badge"] == "red"
    assert answer["report"]["banner"]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"k": 60}, 422, "invalid_query"),  # this deployment's max_k, as the API says it
        ({"k": 1000}, 422, "invalid_query"),  # the wire contract's bound
        ({"query": "x " * 300}, 422, "invalid_query"),  # this deployment's 500 characters
        ({"collection": "nope"}, 404, "collection_not_found"),
    ],
)
async def test_rejected_queries_say_why(
    loopback: TestClient[Any, Any], body: dict[str, Any], status: int, error: str
) -> None:
    got, answer = await ask(loopback, body.pop("query", IN_SCOPE), **body)
    assert (got, answer["error"]) == (status, error)


async def test_a_stored_result_can_be_polled(loopback: TestClient[Any, Any]) -> None:
    status, _ = await ask(loopback, IN_SCOPE, query_id="poll-me")
    assert status == 200
    found = await loopback.get("/v1/queries/poll-me")
    assert found.status == 200
    assert (await found.json())["query_id"] == "poll-me"
    assert (await loopback.get("/v1/queries/never")).status == 404
    unknown = await loopback.get("/v1/queries/" + "a" * 8_000)
    assert unknown.status == 404
    assert len((await unknown.json())["detail"]) < 200  # the id was echoed whole


async def test_home_redirects_to_the_console(loopback: TestClient[Any, Any]) -> None:
    resp = await loopback.get("/", allow_redirects=False)
    assert resp.status == 302
    assert resp.headers["Location"] == "/console"


async def test_off_loopback_a_key_is_needed_and_scopes_the_tenant(
    runtime: EmbeddedRuntime, tmp_path: Path
) -> None:
    store = KeyStore(tmp_path / "keys.json")
    acme, _ = store.create(["acme"], ["query", "read"])
    other, _ = store.create(["globex"], ["query", "read"])
    app = create_console_app(runtime, auth=Authenticator(store, None))
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/console")).status == 200  # the page holds no data
        assert (await client.get("/console/events")).status == 401
        assert (await client.post("/v1/query", json={"query": IN_SCOPE})).status == 401
        resp = await client.post(
            "/v1/query", json={"query": IN_SCOPE, "query_id": "mine"}, headers={"X-API-Key": acme}
        )
        assert resp.status == 200
        assert (await resp.json())["result"]["tenant_id"] == "acme"
        theirs = await client.get("/v1/queries/mine", headers={"X-API-Key": other})
        assert theirs.status == 404
        # Another tenant asking the same id never hides acme's result (it read the
        # newest of any tenant, then refused it as another's: a 404 for acme).
        again = await client.post(
            "/v1/query",
            json={"query": "what else?", "query_id": "mine"},
            headers={"X-API-Key": other},
        )
        assert again.status == 200
        mine = await client.get("/v1/queries/mine", headers={"X-API-Key": acme})
        assert mine.status == 200
        assert (await mine.json())["tenant_id"] == "acme"
        asked = await client.get("/v1/queries/mine?tenant_id=globex", headers={"X-API-Key": acme})
        assert asked.status == 403  # as the API answers a tenant the credential does not cover
        for hostile in ("../acme", "acme\n", "\u202eemca", "", "a" * 5_000, "acme%00"):
            odd = await client.get(
                "/v1/queries/mine", params={"tenant_id": hostile}, headers={"X-API-Key": acme}
            )
            assert odd.status == 422, hostile  # no tenant id at all: as a body's is
            assert (await odd.json())["error"]
        assert (await client.get("/v1/queries/mine", headers={"X-API-Key": acme})).status == 200
        spoof = await client.post(
            "/v1/query",
            json={"query": IN_SCOPE, "tenant_id": "acme"},
            headers={"X-API-Key": other},
        )
        assert spoof.status == 403
        # the same header twice, two keys: not the first one's, silently
        twice = CIMultiDict([("X-API-Key", other), ("X-API-Key", acme)])
        resp = await client.get("/v1/queries/mine", headers=twice)
        assert resp.status == 401
        assert "send one credential" in (await resp.json())["detail"]


async def test_the_console_saves_the_mix_estimates_while_it_runs(tmp_path: Path) -> None:
    """Not only at close: a console killed outright keeps what its traffic showed (ADR 013)."""
    settings = Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
    rt = EmbeddedRuntime(settings)
    assert rt.pipeline.mix is not None  # the shipped calibration, mix share "auto"
    await rt.ingest("acme", sample_documents())
    saved = tmp_path / CALIBRATIONS_DIR / MIX_STATE_FILE
    auth = Authenticator(None, None, insecure=True)
    try:
        app = create_console_app(rt, auth=auth, mix_save_interval_s=0.05)
        async with TestClient(TestServer(app)) as client:
            status, _ = await ask(client, IN_SCOPE)
            assert status == 200
            for _ in range(500):  # up to 10 s: well past a few 0.05 s periods
                if saved.exists():
                    break
                await asyncio.sleep(0.02)
            (scope,) = json.loads(saved.read_text())["scopes"]
            assert scope["tenant"] == "acme"
    finally:
        await rt.close()


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/nowhere", 404, "not_found"),
        ("GET", "/console/static/missing.js", 404, "not_found"),
        ("DELETE", "/v1/query", 405, "method_not_allowed"),
    ],
)
async def test_every_error_is_the_apis_json_error(
    loopback: TestClient[Any, Any], method: str, path: str, status: int, error: str
) -> None:
    resp = await loopback.request(method, path)
    assert resp.status == status
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert body["error"] == error
    assert body["detail"]
    if status == 405:
        assert "POST" in resp.headers["Allow"]


async def test_feedback_without_the_calibrated_scorer_says_so(
    loopback: TestClient[Any, Any],
) -> None:
    """The plumbing runtime scores with the weighted scorer: no re-fit to feed."""
    label = {"query_id": "q", "relevant": True}
    # on loopback no credential names the tenant: the body must
    unnamed = await loopback.post("/v1/feedback", json=label)
    assert unnamed.status == 422
    assert [f["loc"] for f in (await unnamed.json())["fields"]] == [["tenant_id"]]
    resp = await loopback.post("/v1/feedback", json={**label, "tenant_id": "acme"})
    assert resp.status == 409
    assert "RAGSIFT_CONFIDENCE_SCORER=calibrated" in (await resp.json())["detail"]


async def test_a_label_is_applied_by_the_embedded_feedback_loop(tmp_path: Path) -> None:
    runtime = EmbeddedRuntime(
        Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
    )
    await runtime.ingest("acme", sample_documents())
    auth = Authenticator(None, None, insecure=True)
    try:
        async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
            status, _ = await ask(client, IN_SCOPE, query_id="to-label")
            assert status == 200
            label = {"query_id": "to-label", "relevant": True, "tenant_id": "acme"}
            taken = await client.post("/v1/feedback", json=label)
            assert taken.status == 202, await taken.text()
            assert (await taken.json())["tenant_id"] == "acme"
            assert runtime.feedback is not None
            record = runtime.feedback.store.recall("to-label", "acme")
            assert record is not None
            [held] = runtime.feedback.store.labels(runtime.feedback.scope_of(record))
            assert held.relevant
            unknown = await client.post("/v1/feedback", json={**label, "query_id": "never-asked"})
            assert unknown.status == 404
            assert (await unknown.json())["error"] == "unknown_query"
            # another tenant labelling acme's query: refused, acme's label untouched
            theirs = await client.post(
                "/v1/feedback", json={**label, "relevant": False, "tenant_id": "globex"}
            )
            assert theirs.status == 404
            # ... answered as for an id never asked: globex learns nothing of acme's ids
            answer = await theirs.json()
            never = await (
                await client.post(
                    "/v1/feedback", json={**label, "query_id": "never-asked", "tenant_id": "globex"}
                )
            ).json()
            assert answer["error"] == never["error"] == "unknown_query"
            assert answer["detail"] == never["detail"].replace("never-asked", "to-label")
            assert "acme" not in json.dumps(answer)
            mismatches = runtime.metrics.registry.get_sample_value(
                "ragsift_feedback_total", {"result": "tenant_mismatch"}
            )
            assert mismatches == 1
            [still] = runtime.feedback.store.labels(runtime.feedback.scope_of(record))
            assert still.relevant
            bad = await client.post("/v1/feedback", json={"query_id": "to-label"})
            assert bad.status == 422
            assert (await bad.json())["error"] == "invalid_feedback"
    finally:
        await runtime.close()


async def test_a_label_is_applied_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a label is applied (a re-fit takes hundreds of ms), the console goes on
    answering; labels are applied one at a time."""
    runtime = EmbeddedRuntime(
        Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
    )
    await runtime.ingest("acme", sample_documents())
    assert runtime.feedback is not None
    started, release = threading.Event(), threading.Event()
    running: list[str] = []
    released: list[bool] = []
    apply = runtime.feedback.apply

    def slow_apply(event: Any) -> Any:
        running.append(event.query_id)
        assert len(running) == 1, "two labels applied at once"
        started.set()
        released.append(release.wait(timeout=20))  # the test releases it once served
        running.pop()
        return apply(event)

    monkeypatch.setattr(runtime.feedback, "apply", slow_apply)
    auth = Authenticator(None, None, insecure=True)
    try:
        async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
            for query_id in ("first", "second"):
                status, _ = await ask(client, IN_SCOPE, query_id=query_id)
                assert status == 200
            posts = [
                asyncio.create_task(
                    client.post(
                        "/v1/feedback",
                        json={"query_id": q, "relevant": True, "tenant_id": "acme"},
                    )
                )
                for q in ("first", "second")
            ]
            async with asyncio.timeout(10):
                assert await asyncio.to_thread(started.wait, 10)
                # the event loop is free: a query and a read are served meanwhile
                status, _ = await ask(client, OUT_OF_SCOPE, query_id="meanwhile")
                assert status == 200
                read = await client.get("/v1/queries/first")
                assert read.status == 200
            release.set()
            taken = await asyncio.gather(*posts)
            assert [resp.status for resp in taken] == [202, 202]
            assert released == [True, True]
    finally:
        release.set()
        await runtime.close()


async def test_a_query_past_its_timeout_is_a_504_and_its_answer_can_be_polled(
    loopback: TestClient[Any, Any], runtime: EmbeddedRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # timeout_s was read and dropped: under load an answer came after 7.6 s for 1 s asked.
    answer, went_on = runtime.answer, asyncio.Event()

    async def slow(queries: Any) -> Any:
        await asyncio.sleep(2.5)  # longer than the 1 s the request allows
        try:
            return await answer(queries)
        finally:
            went_on.set()

    monkeypatch.setattr(runtime, "answer", slow)
    status, body = await ask(loopback, IN_SCOPE, query_id="late", timeout_s=1)
    assert status == 504
    assert (body["error"], body["query_id"]) == ("timeout", "late")
    async with asyncio.timeout(60):
        await went_on.wait()  # the answer was made all the same
    found = await loopback.get("/v1/queries/late", params={"tenant_id": "acme"})
    assert found.status == 200


@pytest.mark.parametrize("tenant", ["../x", "", "a b"])
async def test_a_read_naming_no_tenant_id_is_a_422_not_a_404(
    loopback: TestClient[Any, Any], tenant: str
) -> None:
    # It was 404 not_found, as if the id had been looked up; a body's is a 422.
    got = await loopback.get("/v1/queries/poll-me", params={"tenant_id": tenant})
    assert got.status == 422
    assert (await got.json())["error"] == "invalid_tenant"


async def test_a_query_without_a_tenant_on_loopback_says_the_field_is_missing(
    loopback: TestClient[Any, Any],
) -> None:
    # It said "tenant_id must match ^[A-Za-z0-9]...", of a field that was not there.
    got = await loopback.post("/v1/query", json={"query": IN_SCOPE})
    assert got.status == 422
    body = await got.json()
    assert body["fields"] == [
        {"loc": ["tenant_id"], "msg": "Field required: no credential names one"}
    ]


async def test_an_answer_failing_after_its_504_is_logged_not_lost_in_silence(
    loopback: TestClient[Any, Any],
    runtime: EmbeddedRuntime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # asyncio.shield marks a shielded answer's error retrieved once the request gives
    # up, so an answer failing after its 504 left no trace at all.
    failed = asyncio.Event()

    async def failing(queries: Any) -> Any:
        await asyncio.sleep(2.5)
        failed.set()
        raise RuntimeError("the index went away")

    monkeypatch.setattr(runtime, "answer", failing)
    status, _ = await ask(loopback, IN_SCOPE, query_id="doomed", timeout_s=1)
    assert status == 504
    async with asyncio.timeout(60):
        await failed.wait()
    await asyncio.sleep(0.05)  # its done callbacks run
    failures = [r for r in caplog.records if r.levelname == "ERROR" and "doomed" in r.message]
    assert failures
    assert "the index went away" in failures[0].message


async def test_closing_the_console_waits_for_answers_past_their_504(
    runtime: EmbeddedRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 504 says the answer can be polled; a console shut down meanwhile dropped it.
    answer = runtime.answer

    async def slow(queries: Any) -> Any:
        await asyncio.sleep(2.5)
        return await answer(queries)

    monkeypatch.setattr(runtime, "answer", slow)
    auth = Authenticator(None, None, insecure=True)
    async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
        status, _ = await ask(client, IN_SCOPE, query_id="kept", timeout_s=1)
        assert status == 504
    assert runtime.find_answer("kept", "acme") is not None


async def test_the_console_pins_the_tenants_the_metrics_pin(tmp_path: Path) -> None:
    """`ragsift console` bounded its counters by RAGSIFT_WORKER_METRICS_MAX_TENANTS but
    ignored RAGSIFT_WORKER_METRICS_TENANTS: with every slot taken, a pinned tenant's
    counters went to (other tenants), which its own page never reads."""
    worker = WorkerSettings(metrics_max_tenants=0, metrics_tenants=("acme",))
    settings = embedded_settings(tmp_path).model_copy(update={"worker": worker})
    async with EmbeddedRuntime(settings) as runtime:
        await runtime.ingest("acme", sample_documents())
        await runtime.ingest("beta", sample_documents())
        auth = Authenticator(None, None, insecure=True)
        async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
            for tenant in ("beta", "acme"):
                resp = await client.post("/v1/query", json={"query": IN_SCOPE, "tenant_id": tenant})
                assert resp.status == 200
            events = await client.get("/console/events")  # the backlog, then the counters
            message: dict[str, Any] = {}
            async with asyncio.timeout(10):
                while message.get("kind") != "counters":
                    line = (await events.content.readline()).decode()
                    if line.startswith("data: "):
                        message = json.loads(line[6:])
            events.close()
    counters = message["data"]
    assert set(counters) == {"acme", OTHER_TENANT}
    assert counters["acme"]["queries"] == 1


def test_the_apis_console_pins_the_tenants_the_metrics_pin() -> None:
    """`ragsift api` builds its console hub from the same settings."""
    worker = WorkerSettings(metrics_max_tenants=0, metrics_tenants=("acme",))
    hub = _console_hub(Settings(worker=worker))
    hub.accept("retrievals", build_result("b1", "beta"))
    hub.accept("retrievals", build_result("a1", "acme"))
    assert set(hub.counters(None)) == {"acme", OTHER_TENANT}


async def test_a_stored_answer_that_does_not_read_is_answered_without_the_servers_path(
    loopback: TestClient[Any, Any], runtime: EmbeddedRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    # The 500 carried the store's error word for word: the result store's full path on
    # the server (as the feedback store's 503 carried its path, or Redis's host:port).
    import sqlite3

    status, _ = await ask(loopback, IN_SCOPE, query_id="damaged")
    assert status == 200
    with sqlite3.connect(runtime.store.path) as db:
        db.execute("UPDATE answers SET result = '{bad' WHERE query_id = 'damaged'")
    with caplog.at_level("ERROR", logger="ragsift"):
        resp = await loopback.get("/v1/queries/damaged")
    assert resp.status == 500
    detail = (await resp.json())["detail"]
    assert "does not read" in detail
    assert str(runtime.data_dir) not in detail
    assert str(runtime.store.path) in caplog.text  # the operator's log keeps it


async def test_a_feedback_store_that_fails_is_a_503_without_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragsift.errors import ServiceUnavailableError

    runtime = EmbeddedRuntime(
        Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
    )
    await runtime.ingest("acme", sample_documents())
    assert runtime.feedback is not None
    held = f"feedback store {tmp_path}/feedback.sqlite3: locked (another ragsift process holds it)"

    def locked(_: Any) -> None:
        raise ServiceUnavailableError(held, service="sqlite")

    monkeypatch.setattr(runtime.feedback, "apply", locked)
    auth = Authenticator(None, None, insecure=True)
    try:
        async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
            label = {"query_id": "to-label", "relevant": True, "tenant_id": "acme"}
            resp = await client.post("/v1/feedback", json=label)
            assert resp.status == 503
            answer = await resp.json()
            assert answer["error"] == "feedback_store"
            assert str(tmp_path) not in answer["detail"]
    finally:
        await runtime.close()


@pytest.mark.parametrize("kind", ["down", "refused"])
async def test_a_calibration_store_that_fails_says_the_label_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # Redis's calibration store fails with a service error (down) or a refusal, both
    # ragsift errors: read as the feedback store's, the caller was told the label was
    # not stored, where it was and only its re-fit was not.
    from ragsift.retrieval.redis_calibration import (
        CalibrationStoreDownError,
        CalibrationStoreRefusedError,
    )

    runtime = EmbeddedRuntime(
        Settings(data_dir=tmp_path, embedder=EmbedderSettings(kind="hashing"))
    )
    await runtime.ingest("acme", sample_documents())
    assert runtime.feedback is not None
    failure = (
        CalibrationStoreDownError("redis calibration store: down", service="redis")
        if kind == "down"
        else CalibrationStoreRefusedError(
            "redis calibration store: refused", store="calibration", key_kind="write", code="ERR"
        )
    )

    def fails(_: Any) -> None:
        raise failure

    monkeypatch.setattr(runtime.feedback, "apply", fails)
    auth = Authenticator(None, None, insecure=True)
    try:
        async with TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
            label = {"query_id": "to-label", "relevant": True, "tenant_id": "acme"}
            resp = await client.post("/v1/feedback", json=label)
            assert resp.status == 503
            assert (await resp.json())["error"] == "refit_not_stored"
    finally:
        await runtime.close()


async def test_a_bug_in_a_route_is_the_apis_json_500_and_logged(
    loopback: TestClient[Any, Any],
    runtime: EmbeddedRuntime,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The API answers an unexpected error with its JSON 500; the console left it to
    # aiohttp: a text/plain 500, where every other answer of the console is JSON.
    def broken(*_: Any, **__: Any) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(runtime, "find_answer", broken)
    with caplog.at_level("ERROR"):
        resp = await loopback.get("/v1/queries/q1")
    assert resp.status == 500
    assert resp.content_type == "application/json"
    answer = await resp.json()
    assert answer["error"] == "internal_error"
    assert "a bug" not in answer["detail"]
    assert "TypeError: a bug" in caplog.text
