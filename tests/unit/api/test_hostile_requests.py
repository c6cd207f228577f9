"""Hostile requests on every route of the API and of the embedded console: a 4xx with a JSON
error (or the answer), never a 5xx.

Property tests draw bodies of any shape (each field of the contract given any JSON value:
NaN, huge numbers, deep nesting, control, bidi and non-Latin text, lone surrogate escapes,
paths), raw bytes, other content types, odd query ids and tenant parameters, and garbage
credentials. A keys file edited into something unreadable answered every request with a
500 before; it is now a 503 naming the cause.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.api import Authenticator, QueryApi, create_web_app
from ragsift.api.openapi import QueryRequest
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import DeadLetter, QueryEvent
from tests.factories import embedded_settings
from tests.unit.api.conftest import Keys, RecordingApi, build_result

# A hypothesis test is synchronous: each serves its app on a loop of its own for all examples.
_FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
_ODD_TEXT = [
    "\x00\x07\x1b",
    "\u202eevil\u202c",
    "../../etc/passwd",
    "日本語の質問",
    "Которая?",
    "x" * 3_000,
    "\ufeff",
    "%00%2F",
]
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(),  # NaN and infinities included: json.dumps writes them as literals
    st.text(max_size=20),
    st.sampled_from(_ODD_TEXT),
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_FIELDS = [*QueryRequest.model_fields, "vector", "schema_version"]
_PLAUSIBLE = {
    "query": st.text(min_size=1, max_size=40) | _VALUE,
    "timeout_s": st.just(1) | _VALUE,
    "tenant_id": st.sampled_from(["alpha", "beta", "ALPHA", "alpha/x"]) | _VALUE,
    "collection": st.sampled_from(["default", "nope", "a" * 65]) | _VALUE,
}
_OBJECT = st.fixed_dictionaries(
    {}, optional={name: _PLAUSIBLE.get(name, _VALUE) for name in _FIELDS}
).map(lambda body: json.dumps(body).encode())
# Bodies the contract lets through, odd in every way it allows: these reach the pipeline.
_QUERY_TEXT = st.text(min_size=1, max_size=60).filter(str.strip) | st.sampled_from(_ODD_TEXT[:5])
_VALID = st.fixed_dictionaries(
    {"query": _QUERY_TEXT, "tenant_id": st.just("alpha"), "timeout_s": st.just(1)},
    optional={
        "collection": st.sampled_from(["default", "nope", "A-b_9"]),
        "collections": st.lists(st.sampled_from(["default", "x", "y"]), max_size=3, unique=True),
        "k": st.integers(1, 50),
        "mode": st.sampled_from(["hybrid", "dense", "keyword"]),
        "selection": st.sampled_from(["threshold", "adaptive", "top_k"]),
        "similarity_threshold": st.floats(0, 1),
        "entities": st.lists(st.text(min_size=1, max_size=10), max_size=4),
        "want_report": st.booleans(),
    },
).map(lambda body: json.dumps(body).encode())
_RAW = st.one_of(
    st.binary(max_size=64),
    st.sampled_from(
        [
            b'{"query": "a \\ud800 b", "timeout_s": 1}',
            b'{"query": "q"}' + b"\x00",
            b"[" * 50_000,
            b'{"query": ' + b"[" * 40 + b"]" * 40 + b"}",
            b'{"query": "q", "k": ' + b"9" * 5_000 + b"}",
            b'\xef\xbb\xbf{"query": "q", "timeout_s": 1}',
        ]
    ),
)
_CONTENT_TYPES = st.sampled_from(
    ["application/json"] * 4 + ["text/plain", "", "application/json; charset=latin-1", "a/b"]
)
_OK = {200, 400, 403, 404, 408, 413, 415, 422}


class _Served:
    """An aiohttp app built and served on a loop of its own, driven one request at a time."""

    def __init__(self, build: Callable[[], Awaitable[web.Application]]):
        self.loop = asyncio.new_event_loop()
        app = self.loop.run_until_complete(build())
        self.client: TestClient[Any, Any] = TestClient(TestServer(app), loop=self.loop)
        self.loop.run_until_complete(self.client.start_server())

    def request(self, method: str, path: str, **kwargs: Any) -> tuple[int, bytes]:
        async def call() -> tuple[int, bytes]:
            response = await self.client.request(method, path, **kwargs)
            return response.status, await response.read()

        return self.loop.run_until_complete(call())

    def close(self, *after: Callable[[], Awaitable[None]]) -> None:
        self.loop.run_until_complete(self.client.close())
        for step in after:
            self.loop.run_until_complete(step())
        self.loop.close()


def _json_error(status: int, body: bytes) -> None:
    assert status < 500, (status, body[:300])
    if status >= 400:
        error = json.loads(body)
        assert isinstance(error["error"], str)
        assert isinstance(error["detail"], str)


def _answer(api: QueryApi, event: QueryEvent, payload: bytes) -> None:
    """Answer at once: a result, or (for a report it cannot build) a dead letter."""
    if not event.want_report:
        api.accept_result(build_result(event.query_id, event.tenant_id))
        return
    letter = DeadLetter.build(
        original=payload,
        stage="validate",
        error_type="InvalidEventError",
        error="no reports here",
        worker="retrieval",
        topic="queries",
        query_id=event.query_id,
    )
    api.accept_dead_letter(letter)


@pytest.fixture
def served_api(make_api: Callable[..., RecordingApi]) -> Iterator[_Served]:
    async def build() -> web.Application:
        api = make_api()
        api.answer = _answer
        return create_web_app(api)

    served = _Served(build)
    yield served
    served.close()


@settings(max_examples=150, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(body=_OBJECT | _VALID | _RAW, content_type=_CONTENT_TYPES)
def test_any_query_body_is_answered_or_refused_in_json(
    served_api: _Served, keys: Keys, body: bytes, content_type: str
) -> None:
    headers = {**keys.header(keys.alpha), "Content-Type": content_type}
    status, answer = served_api.request("POST", "/v1/query", data=body, headers=headers)
    assert status in _OK, (status, answer[:300])
    _json_error(status, answer)
    if status == 200:
        assert json.loads(answer)["result"]["tenant_id"] == "alpha"


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(body=_OBJECT | _RAW, content_type=_CONTENT_TYPES)
def test_any_feedback_body_is_taken_or_refused_in_json(
    served_api: _Served, keys: Keys, body: bytes, content_type: str
) -> None:
    headers = {**keys.header(keys.alpha), "Content-Type": content_type}
    status, answer = served_api.request("POST", "/v1/feedback", data=body, headers=headers)
    assert status in _OK | {202}, (status, answer[:300])
    _json_error(status, answer)
    if status == 202:
        assert json.loads(answer)["tenant_id"] == "alpha"


# Within aiohttp's 8,190-byte request line (past it, its parser answers 400 in plain text
# before any route runs): up to 12 bytes per character once quoted, two of them.
_ID = st.text(min_size=1, max_size=300) | st.sampled_from([*_ODD_TEXT, "a" * 3_000])


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(query_id=_ID, tenant=st.none() | _ID)
def test_any_query_id_or_tenant_parameter_is_a_json_answer(
    served_api: _Served, keys: Keys, query_id: str, tenant: str | None
) -> None:
    params = {} if tenant is None else {"tenant_id": tenant}
    path = "/v1/queries/" + quote(query_id, safe="")
    status, answer = served_api.request("GET", path, params=params, headers=keys.header(keys.multi))
    assert status in {200, 403, 404, 422}, (status, answer[:300])
    _json_error(status, answer)


_HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=300,
)


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(
    authorization=st.none() | _HEADER_TEXT | _HEADER_TEXT.map(lambda t: f"Bearer {t}"),
    api_key=st.none() | _HEADER_TEXT | _HEADER_TEXT.map(lambda t: f"rsk_{t}"),
    route=st.sampled_from(["POST /v1/query", "GET /v1/queries/q1", "GET /console/events"]),
)
def test_garbage_credentials_are_a_401_in_json(
    served_api: _Served, authorization: str | None, api_key: str | None, route: str
) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    if api_key is not None:
        headers["X-API-Key"] = api_key
    method, path = route.split(" ")
    status, answer = served_api.request(method, path, data=b'{"query": "q"}', headers=headers)
    assert status in {401, 404}, (status, answer[:300])  # 404: no console on this API
    _json_error(status, answer)


@pytest.mark.parametrize("body", [b"{keys: []", b'{"keys": [{"key_id": ["a"]}]}', b"\xff"])
async def test_an_unreadable_keys_file_is_a_503_naming_the_cause(
    make_api: Callable[..., RecordingApi], keys: Keys, body: bytes
) -> None:
    api = make_api()
    async with TestClient(TestServer(create_web_app(api))) as client:
        keys.store.path.write_bytes(body)  # edited by hand while the API runs
        for method, path in (("POST", "/v1/query"), ("GET", "/v1/queries/q1")):
            response = await client.request(
                method, path, json={"query": "q", "timeout_s": 1}, headers=keys.header(keys.alpha)
            )
            assert response.status == 503
            answer = await response.json()
            assert answer["error"] == "auth_unavailable"
            assert "keys file is unreadable" in answer["detail"]
        assert api.sent == []


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(body=_OBJECT | _VALID | _RAW, content_type=_CONTENT_TYPES)
def test_the_embedded_console_answers_any_body_in_json(
    console: _Served, body: bytes, content_type: str
) -> None:
    """The console's POST /v1/query runs the embedded pipeline itself: whatever a
    body holds that the contract lets through, the pipeline answers or refuses."""
    headers = {"Content-Type": content_type}
    status, answer = console.request("POST", "/v1/query", data=body, headers=headers)
    assert status in _OK, (status, answer[:300])
    _json_error(status, answer)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[_Served]:
    runtime = EmbeddedRuntime(embedded_settings(tmp_path))

    async def build() -> web.Application:
        await runtime.ingest("alpha", sample_documents()[:3])
        auth = Authenticator(None, None, insecure=True)  # `ragsift console` on loopback
        return create_console_app(runtime, auth=auth)

    served = _Served(build)
    yield served
    served.close(runtime.close)
