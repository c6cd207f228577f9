"""Finding 4 and 5: bounded memory, hostile bodies, slow bodies, an unreachable broker."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from ragsift.api import Authenticator, QueryApi, create_admin_app, create_web_app
from ragsift.api.body import MAX_JSON_DEPTH
from ragsift.api.query_input import MAX_FIELD_ERRORS
from ragsift.api.store import RecentEvents
from ragsift.errors import ConfigurationError
from ragsift.settings import ApiSettings, KafkaSettings
from tests.unit.api.conftest import Keys, RecordingApi, build_result

Client = TestClient[Any, Any]


async def _post(client: Client, keys: Keys, data: bytes | str, **headers: str) -> Any:
    headers = {"Content-Type": "application/json", **keys.header(keys.alpha), **headers}
    response = await client.post("/v1/query", data=data, headers=headers)
    return response.status, await response.json()


async def test_deep_json_is_a_400_not_a_500(client: Client, keys: Keys) -> None:
    status, body = await _post(client, keys, "[" * 10_000 + "]" * 10_000)
    assert status == 400
    assert "deeper" in body["detail"]


async def test_deep_nesting_inside_a_field_is_a_400(client: Client, keys: Keys) -> None:
    deep = "[" * 990 + "]" * 990
    status, body = await _post(client, keys, '{"query": ' + deep + "}")
    assert status == 400
    assert body["error"] == "bad_json"


async def test_brackets_inside_strings_do_not_count_as_nesting(
    client: Client, api: RecordingApi, keys: Keys
) -> None:
    text = '{"query": "[[[[%s \\"{{{{", "timeout_s": 1}' % ("[" * (MAX_JSON_DEPTH + 5))
    status, body = await _post(client, keys, text)
    assert status == 504, body  # accepted and sent; nobody answers here
    assert api.sent[0][0].query.startswith("[[[[")


@pytest.mark.parametrize(
    "text",
    [
        '{"tenant_id": "alpha", "query": "q", "tenant_id": "beta"}',
        '{"tenant_id": "beta", "query": "q", "tenant\\u005fid": "alpha"}',
        '{"query": "refunds?", "query": "q", "k": 3}',
    ],
)
async def test_a_body_that_gives_a_name_twice_is_a_400_and_nothing_is_sent(
    client: Client, api: RecordingApi, keys: Keys, text: str
) -> None:
    # Parsers disagree on which one counts: a proxy that authorized the first tenant
    # must not see the API act for the last.
    status, body = await _post(client, keys, text)
    assert status == 400, body
    assert body["error"] == "bad_json"
    assert "more than once" in body["detail"]
    assert api.sent == []


async def test_a_5000_digit_k_is_a_400(client: Client, keys: Keys) -> None:
    status, body = await _post(client, keys, '{"query": "q", "k": %s}' % ("9" * 5_000))
    assert status == 400
    assert "digits" in body["detail"]


async def test_nested_object_where_a_string_belongs_is_a_422(client: Client, keys: Keys) -> None:
    status, body = await _post(client, keys, '{"query": {"a": ["b"]}, "mode": [1]}')
    assert status == 422
    assert {tuple(f["loc"]) for f in body["fields"]} == {("query",), ("mode",)}


@pytest.mark.parametrize(
    ("field", "value"),
    [("k", "true"), ("k", '"5"'), ("similarity_threshold", "true"), ("timeout_s", '"1"')],
)
async def test_a_bool_or_a_string_where_a_number_belongs_is_a_422(
    client: Client, api: RecordingApi, keys: Keys, field: str, value: str
) -> None:
    # Read laxly, `"k": true` was k = 1 and `"similarity_threshold": true` refused every hit.
    status, body = await _post(client, keys, f'{{"query": "q", "{field}": {value}}}')
    assert status == 422, body
    assert [tuple(f["loc"]) for f in body["fields"]] == [(field,)]
    assert api.sent == []


@pytest.mark.parametrize(
    ("header", "carried"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
        ("00-" + "a" * 200, False),  # longer than the contract's 128: was a 422
        ("not-a-trace", False),
    ],
)
async def test_a_traceparent_header_is_carried_when_valid_and_ignored_when_not(
    client: Client, api: RecordingApi, keys: Keys, header: str, carried: bool
) -> None:
    status, body = await _post(client, keys, '{"query": "q", "timeout_s": 1}', traceparent=header)
    assert status == 504, body  # accepted and sent; nobody answers here
    assert api.sent[0][0].traceparent == (header if carried else None)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32-le"])
async def test_a_body_in_another_unicode_encoding_is_a_400_and_nothing_is_sent(
    client: Client, api: RecordingApi, keys: Keys, encoding: str
) -> None:
    status, body = await _post(client, keys, '{"query": "q"}'.encode(encoding))
    assert (status, body["error"]) == (400, "bad_json")
    assert "must be UTF-8" in body["detail"]
    assert api.sent == []


@pytest.mark.parametrize("data", [b"\x00\x01garbage{", b"\x00\x00\x00\x07junk"])
async def test_bytes_that_only_look_like_another_encoding_are_called_not_json(
    client: Client, api: RecordingApi, keys: Keys, data: bytes
) -> None:
    # json.detect_encoding reads the NUL bytes alone: these were "utf-16-be" and a codec
    # error about UTF-32, where the body is plain (if odd) UTF-8 that is not JSON.
    status, body = await _post(client, keys, data)
    assert (status, body["error"]) == (400, "bad_json")
    assert body["detail"].startswith("the body is not JSON: Expecting value"), body
    assert api.sent == []


async def test_text_plain_is_415(client: Client, keys: Keys) -> None:
    status, body = await _post(client, keys, '{"query": "q"}', **{"Content-Type": "text/plain"})
    assert status == 415
    assert "application/json" in body["detail"]


async def test_oversized_body_is_413(client: Client, keys: Keys) -> None:
    status, body = await _post(client, keys, '{"query": "%s"}' % ("x" * 200_000))
    assert status == 413
    assert body["error"] == "body_too_large"


async def test_a_body_that_never_finishes_gets_408(
    make_api: Callable[..., RecordingApi], keys: Keys
) -> None:
    """Slowloris: headers promise a body, a few bytes arrive, then nothing."""
    api = make_api(body_timeout_s=0.3)
    server = TestServer(create_web_app(api))
    await server.start_server()
    try:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(
            b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + keys.alpha.encode() + b"\r\n"
            b'Content-Length: 1000\r\n\r\n{"query": '
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=30)
        assert b" 408 " in status_line
        writer.close()
    finally:
        await server.close()


@pytest.mark.parametrize(
    "header", [b"X-API-Key: {key}\xff\xfe", b"Authorization: Bearer {key}\xff", b"X-API-Key: \xff"]
)
async def test_a_credential_whose_bytes_are_not_utf8_is_a_401_not_a_500(
    api: RecordingApi, keys: Keys, header: bytes
) -> None:
    """aiohttp hands such bytes on as surrogates, which hashing a key could not encode."""
    server = TestServer(create_web_app(api))
    await server.start_server()
    try:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(
            b"GET /v1/queries/q1 HTTP/1.1\r\nHost: x\r\n"
            + header.replace(b"{key}", keys.alpha.encode())
            + b"\r\nConnection: close\r\n\r\n"
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=30)
        writer.close()
    finally:
        await server.close()
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert b"printable ASCII" in answer


def test_the_store_is_bounded_by_bytes_and_counts_evictions() -> None:
    evicted: list[int] = []
    store = RecentEvents(max_bytes=10_000, on_evict=lambda: evicted.append(1))
    for n in range(100):
        store.put(("result", "alpha", f"q{n}"), b"x" * 1_000)
    assert store.bytes <= 10_000
    assert len(store) < 10
    assert len(evicted) == 100 - len(store)
    assert ("result", "alpha", "q99") in store  # the newest stay
    store.put(("result", "alpha", "huge"), b"x" * 20_000)  # larger than the store: dropped
    assert ("result", "alpha", "huge") not in store
    assert len(evicted) == 100 - len(store) + 1


async def test_big_results_evict_by_bytes_and_show_in_metrics(
    make_api: Callable[..., RecordingApi], keys: Keys
) -> None:
    api = make_api(store_bytes=1024 * 1024)
    text = "word " * 2_000
    for n in range(200):  # ~10 KiB each: ~2 MiB offered to a 1 MiB store
        api.accept_result(build_result(f"q{n}", "alpha", query=text))
    assert api.store.bytes <= 1024 * 1024
    async with TestClient(TestServer(create_admin_app(api))) as admin:
        page = await (await admin.get("/metrics")).text()
    evictions = next(
        line for line in page.splitlines() if line.startswith("ragsift_api_store_evictions_total")
    )
    assert float(evictions.split()[-1]) == 200 - len(api.store)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_broker_down_is_503_and_not_ready(api_settings: ApiSettings, keys: Keys) -> None:
    """Pointed at a closed port the API still serves: /readyz 503, queries 503 at once."""
    api = QueryApi(
        KafkaSettings(bootstrap_servers=f"127.0.0.1:{_closed_port()}"),
        auth=Authenticator.from_settings(api_settings),
        settings=api_settings,
    )
    query_server = TestServer(create_web_app(api))
    admin_server = TestServer(create_admin_app(api))
    await query_server.start_server()
    await admin_server.start_server()
    try:
        async with ClientSession() as session:
            async with session.get(admin_server.make_url("/readyz")) as ready:
                assert ready.status == 503
            async with session.post(
                query_server.make_url("/v1/query"),
                json={"query": "q", "timeout_s": 5},
                headers=keys.header(keys.alpha),
            ) as response:
                assert response.status == 503
                assert (await response.json())["error"] == "kafka_unavailable"
    finally:
        await query_server.close()
        await admin_server.close()


class _StuckBrokerApi(QueryApi):
    """Connected, but its producer's broker never acknowledges a send."""

    start = RecordingApi.start


class _StuckProducer:
    """A producer whose broker never acknowledges."""

    async def send_and_wait(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.Event().wait()

    async def stop(self) -> None:
        """Nothing to close."""


async def test_a_send_the_broker_never_takes_fails_within_the_request_timeout(
    api_settings: ApiSettings, keys: Keys
) -> None:
    api = _StuckBrokerApi(
        KafkaSettings(), auth=Authenticator.from_settings(api_settings), settings=api_settings
    )
    api._producer = _StuckProducer()  # type: ignore[assignment]  # a broker that hangs
    async with TestClient(TestServer(create_web_app(api))) as client:
        response = await client.post(
            "/v1/query", json={"query": "q", "timeout_s": 1}, headers=keys.header(keys.alpha)
        )
        assert response.status == 503
        assert "did not take the query" in (await response.json())["detail"]
        assert not api.ready  # /readyz says so until a probe reaches the brokers again


def test_no_keys_and_no_jwt_refuses_to_start(tmp_path: Any) -> None:
    settings = ApiSettings(keys_file=tmp_path / "none.json")
    with pytest.raises(ConfigurationError, match="ragsift keys create"):
        Authenticator.from_settings(settings)
    assert Authenticator.from_settings(settings, insecure=True).authenticate(None, None)


async def test_insecure_mode_still_needs_a_tenant_in_the_body(tmp_path: Any) -> None:
    settings = ApiSettings(keys_file=tmp_path / "none.json")
    api = RecordingApi(
        KafkaSettings(),
        auth=Authenticator.from_settings(settings, insecure=True),
        settings=settings,
    )
    async with TestClient(TestServer(create_web_app(api))) as client:
        response = await client.post("/v1/query", json={"query": "q"})
        assert response.status == 422
        assert ["tenant_id"] in [f["loc"] for f in (await response.json())["fields"]]
        # A poll likewise: with no credential to name the tenant, the store (by tenant)
        # was searched under the tenant "": a 404 for every id, answered or not.
        api.accept_result(build_result("q1", "alpha"))
        response = await client.get("/v1/queries/q1")
        assert response.status == 422, await response.text()
        assert "tenant_id" in (await response.json())["detail"]
        assert (await client.get("/v1/queries/q1?tenant_id=alpha")).status == 200


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_its_content_encoding_cannot_decode_is_a_400(
    client: Client, keys: Keys, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    # It was a text/plain 500 with a traceback in the log, never counted by route.
    with caplog.at_level(logging.DEBUG, logger="aiohttp"):
        status, body = await _post(client, keys, b"notgzip", **{"Content-Encoding": encoding})
        assert status == 400
        assert body["error"] == "bad_body"
        assert "cannot be read" in body["detail"]
        await asyncio.sleep(0.2)  # the server's work after the answer
        # After the 400, aiohttp read the rest of the body, met the error again and
        # logged an "Unhandled exception" traceback: a log flood for anyone to send.
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        again = await _post(client, keys, '{"query": ["q"]}')  # still served: a 422
        assert again[0] == 422


def test_the_read_routes_422_is_in_the_openapi_document() -> None:
    # A ?tenant_id= that is no tenant id is a 422 (it was a 404); schemathesis found
    # the status undocumented.
    from ragsift.api.openapi import openapi_document

    responses = openapi_document()["paths"]["/v1/queries/{query_id}"]["get"]["responses"]
    assert "422" in responses


@pytest.mark.parametrize("route", ["/v1/query", "/v1/feedback"])
async def test_a_body_of_many_bad_fields_gets_a_bounded_answer(
    client: Client, keys: Keys, route: str
) -> None:
    # One error per unknown name: a 64 KiB body of 8,000 names was answered with
    # 458 KB of errors, each echoing a name the caller chose (at the 16 MiB
    # RAGSIFT_API_MAX_BODY_BYTES, a hundred megabytes).
    names = {f"{i:x}": 0 for i in range(5_000)}  # and one more: each route has a name too many
    response = await client.post(
        route,
        json={"query": "q", "query_id": "q1", "relevant": True, **names},
        headers=keys.header(keys.alpha),
    )
    assert response.status == 422
    fields = (await response.json())["fields"]
    assert len(fields) == MAX_FIELD_ERRORS + 1
    assert fields[-1] == {"loc": [], "msg": f"and {5_001 - MAX_FIELD_ERRORS} more"}
