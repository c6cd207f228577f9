"""The HTTP API over a real socket, and decisions/review through the real broker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragsift.api import Authenticator, KeyStore
from ragsift.schemas import Decision, ReviewItem
from tests.e2e.harness import (
    REPO,
    TENANT,
    Stack,
    TopicReader,
    WorkerProcess,
    free_port,
    wait_for,
)


@pytest.fixture(scope="module")
def workers(stack: Stack, template_index: Path) -> Iterator[WorkerProcess]:
    # the calibration worker (labels sent over HTTP) writes re-fits where retrieval reads
    # them: the worker's own calibrations folder, named so the two agree
    stack.extra_env["RAGSIFT_CALIBRATION_STORE_DIR"] = str(
        stack.base_dir / "api-w" / "calibrations"
    )
    proc = WorkerProcess(
        stack, ["retrieval", "decision", "report", "audit", "calibration"], template_index, "api-w"
    )
    proc.start().wait_ready()
    yield proc
    proc.stop()


#: API keys the module's API accepts: one for the test tenant, one for another tenant
KEYS: dict[str, str] = {}
OTHER_TENANT = "other-tenant"


@pytest.fixture(scope="module")
def api(
    stack: Stack, workers: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    port, metrics_port = free_port(), free_port()
    home = tmp_path_factory.mktemp("api")
    log = home / "api.log"
    store = KeyStore(home / "api-keys.json")
    KEYS[TENANT] = store.create([TENANT], ["query", "read"], "e2e")[0]
    KEYS[OTHER_TENANT] = store.create([OTHER_TENANT], ["query", "read"], "e2e")[0]
    env = {**stack.env(workers.dir), "RAGSIFT_API_KEYS_FILE": str(store.path)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragsift",
                "api",
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--metrics-port",
                str(metrics_port),
            ],
            env=env,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if call("GET", f"http://127.0.0.1:{metrics_port}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def call(
    method: str, url: str, body: object | None = None, tenant: str | None = TENANT
) -> tuple[int, Any]:
    """One request with the key of ``tenant`` (None: no credential)."""
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    headers = {"content-type": "application/json"}
    if tenant is not None and tenant in KEYS:
        headers["authorization"] = f"Bearer {KEYS[tenant]}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=70) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_post_query_returns_its_result_and_get_finds_it(api: str) -> None:
    status, body = call(
        "POST",
        f"{api}/v1/query",
        {
            "tenant_id": TENANT,
            "query": "What are the API rate limits per key?",
            "query_id": "api-1",
        },
    )
    assert status == 200, body
    assert body["query_id"] == "api-1"
    assert body["result"]["status"] == "high_confidence"
    assert body["result"]["hits"][0]["citation"]["source"] == "handbook/api-rate-limits.md"
    status, again = call("GET", f"{api}/v1/queries/api-1")
    assert status == 200
    assert again["result_id"] == body["result"]["result_id"]


def test_credentials_decide_the_tenant_over_a_real_socket(api: str) -> None:
    """No key: 401. Another tenant's key: 403 on the body, 404 on the id, its own result."""
    body = {"tenant_id": TENANT, "query": "What are the API rate limits per key?"}
    status, _ = call("POST", f"{api}/v1/query", {**body, "query_id": "t-1"}, tenant=None)
    assert status == 401
    status, _ = call("POST", f"{api}/v1/query", {**body, "query_id": "t-1"}, tenant=OTHER_TENANT)
    assert status == 403
    status, mine = call("POST", f"{api}/v1/query", {**body, "query_id": "t-1"})
    assert status == 200, mine
    assert call("GET", f"{api}/v1/queries/t-1", tenant=OTHER_TENANT)[0] == 404
    # the other tenant reusing the id searches its own (empty) documents, never ours
    status, theirs = call(
        "POST",
        f"{api}/v1/query",
        {"query": body["query"], "query_id": "t-1"},
        tenant=OTHER_TENANT,
    )
    assert status == 200, theirs
    assert theirs["result"]["tenant_id"] == OTHER_TENANT
    assert not theirs["result"]["hits"]


def test_reports_answer_in_scope_and_refuse_out_of_scope(api: str) -> None:
    status, body = call(
        "POST",
        f"{api}/v1/query",
        {
            "tenant_id": TENANT,
            "want_report": True,
            "query_id": "rep-in",
            "query": "How many days do I have to return the Orbit thermostat for a full refund?",
        },
    )
    assert status == 200, body
    report = body["report"]
    assert not report["is_refusal"]
    assert report["citations"]
    assert report["disclaimer"] is None
    assert "[1]" in report["answer"]
    status, body = call(
        "POST",
        f"{api}/v1/query",
        {
            "tenant_id": TENANT,
            "want_report": True,
            "query_id": "rep-out",
            "query": "Who won the football world cup in 2014?",
        },
    )
    assert status == 200, body
    assert body["report"]["answer"] == "I cannot answer this based on the provided documents."
    assert body["report"]["is_refusal"]


def test_errors_are_clear(api: str) -> None:
    status, body = call("POST", f"{api}/v1/query", {"tenant_id": "bad tenant", "query": ""})
    assert status == 422
    assert {tuple(f["loc"]) for f in body["fields"]} >= {("tenant_id",), ("query",)}
    status, body = call("POST", f"{api}/v1/query", b"{not json")
    assert status == 400
    assert body["error"] == "bad_json"
    status, body = call("GET", f"{api}/v1/queries/never-seen")
    assert status == 404


async def test_no_result_in_time_is_a_504_with_the_query_id(stack: Stack) -> None:
    """An API whose topics no worker reads: the caller gets 504 and an id to poll."""
    from aiohttp import ClientSession
    from aiohttp.test_utils import TestServer

    from ragsift.api import QueryApi, create_web_app
    from ragsift.settings import KafkaSettings
    from ragsift.streams.admin import ensure_topics

    kafka = KafkaSettings(bootstrap_servers=stack.bootstrap, topic_prefix=f"{stack.prefix}-idle")
    await ensure_topics(kafka)
    auth = Authenticator(keys=None, jwt_verifier=None, insecure=True)
    query_api = QueryApi(kafka, auth=auth)
    server = TestServer(create_web_app(query_api), host="127.0.0.1")
    await server.start_server()
    try:
        for _ in range(300):  # Kafka connects in the background; /readyz gates traffic
            if query_api.ready:
                break
            await asyncio.sleep(0.1)
        assert query_api.ready
        async with ClientSession() as session:
            body = {"tenant_id": TENANT, "query": "anyone there?", "timeout_s": 1.0}
            async with session.post(server.make_url("/v1/query"), json=body) as response:
                assert response.status == 504
                data = await response.json()
        assert data["error"] == "timeout"
        assert data["query_id"].startswith("api-")
        assert data["query_id"] in data["detail"]
    finally:
        await server.close()


async def test_decisions_and_review_items(stack: Stack, api: str) -> None:
    high = call(
        "POST",
        f"{api}/v1/query",
        {
            "tenant_id": TENANT,
            "query": "What are the API rate limits per key?",
            "query_id": "d-high",
        },
    )
    low = call(
        "POST",
        f"{api}/v1/query",
        {
            "tenant_id": TENANT,
            "query": "What is the boiling point of ethanol?",
            "query_id": "d-low",
        },
    )
    assert high[0] == low[0] == 200
    async with TopicReader(stack, "decisions") as decisions, TopicReader(stack, "review") as review:
        await decisions.until(lambda ev: {"d-high", "d-low"} <= {e.query_id for e in ev})
        await review.until(lambda ev: "d-low" in {e.query_id for e in ev})
    got = {e.query_id: e for e in decisions.events if isinstance(e, Decision)}
    assert got["d-high"].use_context
    assert "context used" in got["d-high"].reason
    assert not got["d-low"].use_context
    assert "decided without retrieved context" in got["d-low"].reason
    item = next(e for e in review.events if isinstance(e, ReviewItem) and e.query_id == "d-low")
    assert item.queue == "expert_review"


def test_a_label_sent_over_http_reaches_the_calibration_worker(
    api: str, workers: WorkerProcess
) -> None:
    """POST /v1/feedback for a scored query: 202, then the worker joins it; a retry of
    the same label is the same event and changes nothing."""
    status, body = call(
        "POST",
        f"{api}/v1/query",
        {"query": "What are the API rate limits per key?", "query_id": "fb-http"},
    )
    assert status == 200, body
    before = workers.metric("ragsift_feedback_total", {"result": "labelled"})
    label = {"query_id": "fb-http", "relevant": True}
    status, taken = call("POST", f"{api}/v1/feedback", label)
    assert status == 202, taken
    assert taken["tenant_id"] == TENANT
    wait_for(
        lambda: workers.metric("ragsift_feedback_total", {"result": "labelled"}) == before + 1,
        "the label joined to its result",
    )
    status, again = call("POST", f"{api}/v1/feedback", label)
    assert status == 202
    assert again["event_id"] == taken["event_id"]
    wait_for(
        lambda: workers.metric("ragsift_feedback_total", {"result": "unchanged"}) >= 1,
        "the retried label seen and changing nothing",
    )
    assert workers.metric("ragsift_feedback_total", {"result": "labelled"}) == before + 1


def test_openapi_contract_holds_under_schemathesis(api: str, tmp_path: Path) -> None:
    """Property-based requests from the OpenAPI document; every response must match it."""
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{api}/openapi.json",
        "--max-examples",
        "25",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {KEYS[TENANT]}",
        "--request-timeout",
        "70",
        "--suppress-health-check",
        "all",
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
