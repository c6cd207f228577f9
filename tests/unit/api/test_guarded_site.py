"""The HTTP sites against slow clients: a header deadline and a connection cap."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from ragsift.api.guarded_site import GuardedSite, max_connections, refused_counter


async def _slow(request: web.Request) -> web.Response:
    await asyncio.sleep(0.6)  # longer than the header deadline: a request under way
    return web.Response(text="done")


@pytest.fixture
async def site() -> AsyncIterator[GuardedSite]:
    app = web.Application()
    app.router.add_get("/slow", _slow)
    runner = web.AppRunner(app)
    await runner.setup()
    guarded = GuardedSite(runner, "127.0.0.1", 0, header_timeout_s=0.3, most_connections=3)
    await guarded.start()
    try:
        yield guarded
    finally:
        await runner.cleanup()


async def _ask(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return answer


async def _dribbler(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client that starts a request and never finishes its headers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /slow HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    return reader, writer


async def test_headers_not_finished_in_time_close_the_connection(site: GuardedSite) -> None:
    # aiohttp waited for headers forever: 20,000 such connections took every descriptor.
    reader, writer = await _dribbler(site.port)
    assert await asyncio.wait_for(reader.read(), 30) == b""  # closed by the server
    writer.close()


async def test_past_the_cap_a_connection_is_closed_and_the_site_recovers(
    site: GuardedSite,
) -> None:
    held = [await _dribbler(site.port) for _ in range(3)]
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    assert await asyncio.wait_for(reader.read(), 30) == b""  # the fourth: refused
    writer.close()
    for held_reader, held_writer in held:  # the deadline closes the three
        assert await asyncio.wait_for(held_reader.read(), 30) == b""
        held_writer.close()
    assert (await _ask(site.port)).endswith(b"done")  # and it answers again


async def test_a_request_whose_headers_came_may_take_longer_than_the_deadline(
    site: GuardedSite,
) -> None:
    answer = await _ask(site.port)
    assert answer.startswith(b"HTTP/1.1 200")
    assert answer.endswith(b"done")


def test_the_cap_stays_under_the_descriptor_limit() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        assert max_connections() <= max(16, soft - 256)
    assert max_connections() >= 16


async def test_a_request_that_does_not_parse_gets_a_json_400_and_one_log_line(
    site: GuardedSite, caplog: pytest.LogCaptureFixture
) -> None:
    # aiohttp answered plain text and logged a traceback at ERROR for each: any client
    # could fill the log with a request line over 8 KB.
    caplog.set_level("DEBUG")
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    writer.write(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400"))
    assert b"application/json" in head
    assert json.loads(body)["error"] == "bad_request"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert (await _ask(site.port)).endswith(b"done")  # and it answers again


async def test_every_refusal_of_the_site_is_counted_by_reason() -> None:
    # The three were one log line a minute, one at info, and nothing: a site at its cap,
    # or a flood of requests that do not parse, showed on no dashboard.
    registry = CollectorRegistry()
    refused = refused_counter(registry)
    app = web.Application()
    app.router.add_get("/slow", _slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = GuardedSite(
        runner, "127.0.0.1", 0, header_timeout_s=0.3, most_connections=2, refused=refused
    )
    await site.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        await asyncio.wait_for(reader.read(), 30)
        writer.close()
        held = [await _dribbler(site.port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        assert await asyncio.wait_for(reader.read(), 30) == b""  # past the cap
        writer.close()
        for held_reader, held_writer in held:  # the header deadline closes both
            assert await asyncio.wait_for(held_reader.read(), 30) == b""
            held_writer.close()
    finally:
        await runner.cleanup()

    def count(reason: str) -> float | None:
        return registry.get_sample_value("ragsift_http_refused_total", {"reason": reason})

    assert count("bad_request") == 1
    assert count("too_many_connections") == 1
    assert count("header_timeout") == 2
