"""``ragsift console`` off loopback answers ``Expect: 100-continue`` as the API does:
after the same checks, before the body is asked for (``ragsift.api.admission``).

Before: its own copy of the API's middleware, and aiohttp's default 100 Continue to
every request: a caller without a key uploaded its whole body to be told 401.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from ragsift.api.auth import Authenticator, KeyStore
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime

pytestmark = pytest.mark.unit

_REPLY_S = 5.0  # a hang guard, not a measure


async def _first_reply(server: TestServer, headers: dict[str, str]) -> tuple[int, bytes]:
    """The status and body of the first reply to ``headers`` sent with no body."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        lines = ["POST /v1/query HTTP/1.1", "Host: x", "Expect: 100-continue"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _REPLY_S)).decode()
        status = int(head.split()[1])
        length = next(
            (
                int(line.split(":")[1])
                for line in head.split("\r\n")
                if line.lower().startswith("content-length")
            ),
            0,
        )
        return status, await asyncio.wait_for(reader.readexactly(length), _REPLY_S)
    finally:
        writer.close()


async def test_off_loopback_a_bad_key_or_a_big_body_is_refused_before_the_upload(
    runtime: EmbeddedRuntime, tmp_path: Path
) -> None:
    store = KeyStore(tmp_path / "keys.json")
    acme, _ = store.create(["acme"], ["query", "read"])
    app = create_console_app(runtime, auth=Authenticator(store, None))
    limit = runtime.settings.api.max_body_bytes
    async with TestServer(app) as server:
        json_body = {"Content-Type": "application/json"}
        status, body = await _first_reply(server, {**json_body, "Content-Length": "100"})
        assert status == 401
        assert json.loads(body)["error"] == "unauthorized"
        big = {**json_body, "Content-Length": str(limit + 1), "X-API-Key": acme}
        status, body = await _first_reply(server, big)
        assert status == 413
        assert json.loads(body)["error"] == "body_too_large"
        fine = {**json_body, "Content-Length": "100", "X-API-Key": acme}
        assert (await _first_reply(server, fine))[0] == 100
