"""``Expect: 100-continue``: a request the API would refuse is refused before its body is
asked for, with the checks the route itself applies.

Before: aiohttp's default answered every such request ``100 Continue``; the client sent
its whole body (up to any size: the limit is only checked on the route) and only then
learnt that its credential was bad or its body too large. An unknown expectation got
aiohttp's plain-text 417, uncounted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import generate_latest

from ragsift.api import create_web_app
from tests.unit.api.conftest import Keys, RecordingApi, build_result

pytestmark = pytest.mark.unit

#: seconds a reply may take before the test calls it missing (a hang guard, not a measure)
_REPLY_S = 5.0


@pytest.fixture
def api(make_api: Callable[..., RecordingApi]) -> RecordingApi:
    """An API that answers every query it sends, with a small body limit."""
    api = make_api(max_body_bytes=4096)
    api.answer = lambda api, event, _: api.accept_result(
        build_result(event.query_id, event.tenant_id, query=event.query)
    )
    return api


@pytest.fixture
async def server(api: RecordingApi) -> AsyncIterator[TestServer]:
    async with TestServer(create_web_app(api)) as server:
        yield server


class Conn:
    """A raw HTTP/1.1 connection: headers now, the body only when asked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def head(self, path: str, headers: dict[str, str], *, version: str = "1.1") -> None:
        lines = [f"POST {path} HTTP/{version}", "Host: x"] + [
            f"{k}: {v}" for k, v in headers.items()
        ]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def reply(self) -> tuple[int, dict[str, str], bytes]:
        """The next response: status, headers (lower-cased names), body."""
        raw = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), _REPLY_S)
        status_line, *header_lines = raw.decode().split("\r\n")[:-2]
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await asyncio.wait_for(self.reader.readexactly(length), _REPLY_S)
        return int(status_line.split()[1]), headers, body

    async def closed(self) -> bool:
        """Whether the server ends the connection (nothing more, then EOF)."""
        return await asyncio.wait_for(self.reader.read(), _REPLY_S) == b""


@pytest.fixture
async def conn(server: TestServer) -> AsyncIterator[Conn]:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    yield Conn(reader, writer)
    writer.close()


def _counted(api: RecordingApi) -> dict[tuple[str, str], float]:
    counts = {}
    for line in generate_latest(api.metrics.registry).decode().splitlines():
        if line.startswith("ragsift_api_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            route = labels.split('route="')[1].split('"')[0]
            status = labels.split('status="')[1].split('"')[0]
            counts[(route, status)] = float(value)
    return counts


def _json_head(key: str | None, length: int, **more: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Content-Length": str(length)}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return {**headers, "Expect": "100-continue", **more}


@pytest.mark.parametrize("path", ["/v1/query", "/v1/feedback"])
@pytest.mark.parametrize("credential", [None, "rsk_0123456789ab_not-a-key", "not ascii é"])
async def test_a_bad_credential_is_refused_before_the_body_is_asked_for(
    api: RecordingApi, conn: Conn, path: str, credential: str | None
) -> None:
    await conn.head(path, _json_head(credential, 1000))
    status, headers, body = await conn.reply()
    assert status == 401  # not 100: the body was never asked for
    assert json.loads(body)["error"] == "unauthorized"
    assert headers["www-authenticate"].startswith("Bearer")
    assert headers["connection"] == "close"
    assert await conn.closed()
    assert _counted(api)[(path, "401")] == 1.0


@pytest.mark.parametrize("path", ["/v1/query", "/v1/feedback"])
async def test_a_body_over_the_limit_is_refused_before_it_is_sent(
    api: RecordingApi, conn: Conn, keys: Keys, path: str
) -> None:
    await conn.head(path, _json_head(keys.alpha, 10**9))
    status, headers, body = await conn.reply()
    assert status == 413
    assert json.loads(body)["error"] == "body_too_large"
    assert headers["connection"] == "close"
    assert _counted(api)[(path, "413")] == 1.0
    assert api.sent == []


async def test_a_body_that_is_not_json_is_refused_before_it_is_sent(
    api: RecordingApi, conn: Conn, keys: Keys
) -> None:
    await conn.head("/v1/query", _json_head(keys.alpha, 10, **{"Content-Type": "text/plain"}))
    status, _, body = await conn.reply()
    assert status == 415
    assert json.loads(body)["error"] == "unsupported_media_type"


@pytest.mark.parametrize("expect", ["200-ok", "100-continue, foo", "x" * 300, "\u00e9"])
async def test_an_unknown_expectation_is_the_apis_json_417(
    api: RecordingApi, conn: Conn, keys: Keys, expect: str
) -> None:
    await conn.head("/v1/query", _json_head(keys.alpha, 10, Expect=expect))
    status, headers, body = await conn.reply()
    assert status == 417
    assert headers["content-type"].startswith("application/json")
    answer = json.loads(body)
    assert answer["error"] == "expectation_failed"
    assert len(answer["detail"]) < 200  # the value is shown cut short, not echoed whole
    assert _counted(api)[("/v1/query", "417")] == 1.0


async def test_a_request_that_passes_gets_100_continue_then_its_answer(
    api: RecordingApi, conn: Conn, keys: Keys
) -> None:
    body = json.dumps({"query": "q", "query_id": "e1"}).encode()
    await conn.head("/v1/query", _json_head(keys.alpha, len(body)))
    status, _, _ = await conn.reply()
    assert status == 100
    conn.writer.write(body)
    status, _, answer = await conn.reply()
    assert status == 200
    assert json.loads(answer)["result"]["tenant_id"] == "alpha"
    # the credential was checked once, and the request counted once
    assert _counted(api)[("/v1/query", "200")] == 1.0
    assert ("/v1/query", "100") not in _counted(api)


async def test_http_1_0_ignores_the_expectation(api: RecordingApi, conn: Conn, keys: Keys) -> None:
    # RFC 9110 section 10.1.1: an HTTP/1.0 request's 100-continue is ignored; the body
    # follows the headers at once, and a refusal comes after it as without Expect.
    body = json.dumps({"query": "q", "query_id": "e2"}).encode()
    await conn.head("/v1/query", _json_head(keys.alpha, len(body)), version="1.0")
    conn.writer.write(body)
    status, _, _ = await conn.reply()
    assert status == 200
