"""A TCP site for the HTTP API and the console that a slow client cannot exhaust.

aiohttp reads a request's headers with no deadline and takes every connection it is
offered. A client with no credential (the check runs once the headers are in) held
20,000 connections open by sending a header line every 5 s: the process ran out of
file descriptors, answered nobody, and asyncio logged the failed accept 5 million
times (2.1 GB of log in a minute). Here each connection must finish its first
request's headers within :data:`HEADER_TIMEOUT_S` or is closed, and connections past
:func:`max_connections` (under the process's descriptor limit) are closed as they
arrive, so the server keeps descriptors to answer with. A request's body has its own
deadline (``RAGSIFT_API_BODY_TIMEOUT_S``); a kept-alive connection's idle time is
aiohttp's keep-alive timeout.

A request aiohttp cannot parse (a request line over 8 KB, a broken header) is
answered with the API's JSON error and logged on one line; aiohttp answered plain
text and logged a traceback each time, so any client could flood the log.

Each of the three refusals is counted by reason (:func:`refused_counter`), as the
routes' answers are.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CollectorRegistry, Counter

from ragsift.observability.zeroed import zeroed_counter

__all__ = ["HEADER_TIMEOUT_S", "REFUSALS", "GuardedSite", "max_connections", "refused_counter"]

log = logging.getLogger(__name__)

#: Seconds a new connection has to send its first request's headers.
HEADER_TIMEOUT_S = 10.0
#: Connections at most, whatever the descriptor limit allows.
MOST_CONNECTIONS = 4_096
#: Descriptors kept for everything else the process opens (shards, stores, Kafka).
SPARE_DESCRIPTORS = 256
#: Seconds between two warnings that connections are being refused.
_WARN_EVERY_S = 60.0
#: Why the site refused, before any route ran: the ``reason`` label's values.
REFUSALS = ("bad_request", "header_timeout", "too_many_connections")


def refused_counter(registry: CollectorRegistry) -> Counter:
    """The counter of what the sites refuse before any route runs, by reason (pass it
    to each :class:`GuardedSite` of the registry's process)."""
    return zeroed_counter(
        "ragsift_http_refused_total",
        "Connections and requests an HTTP site refused before any route ran, by reason.",
        ["reason"],
        [(reason,) for reason in REFUSALS],
        registry,
    )


def max_connections() -> int:
    """Connections the site takes at once: under the soft descriptor limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MOST_CONNECTIONS
    return max(16, min(MOST_CONNECTIONS, soft - SPARE_DESCRIPTORS))


class _Gate:
    """The site's live connections, when it last warned of refusing one, and the count
    of what it refused."""

    def __init__(self, most: int, refused: Counter | None = None) -> None:
        self.most = most
        self.live = 0
        self.warned = 0.0
        self.refused = refused

    def count(self, reason: str) -> None:
        """One refusal, by one of :data:`REFUSALS`."""
        if self.refused is not None:
            self.refused.labels(reason).inc()

    def refuse(self) -> None:
        self.count("too_many_connections")
        now = time.monotonic()
        if now - self.warned >= _WARN_EVERY_S:
            self.warned = now
            log.warning("refusing connections: %d are open, the most this process takes", self.live)


class _AnswersBadRequests(RequestHandler):
    """aiohttp's handler, but a request it cannot parse gets the API's JSON 400 and
    one log line, not plain text and a traceback."""

    __slots__ = ()
    #: the site's gate, which counts the request (a class of this one per site holds it)
    gate: _Gate | None = None

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status != 400 or not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        # aiohttp's message, with the start of what did not parse (repr'd): kept short
        detail = (exc.message or "").splitlines()[0][:160] if exc.message else "no detail"
        log.info("bad request from %s: %s", request.remote, detail)
        if self.gate is not None:
            self.gate.count("bad_request")
        body = {"error": "bad_request", "detail": f"the request does not parse: {detail}"}
        response = web.json_response(body, status=400)
        response.force_close()
        return response


class _Guarded(asyncio.Protocol):
    """aiohttp's request handler behind a header deadline and the site's gate."""

    def __init__(self, inner: asyncio.Protocol, gate: _Gate, header_timeout_s: float) -> None:
        self.inner = inner
        self.gate = gate
        self.header_timeout_s = header_timeout_s
        self.timer: asyncio.TimerHandle | None = None
        self.admitted = False
        self.tail = b""  # the last bytes seen, for a header end split across reads

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP site's
        if self.gate.live >= self.gate.most:
            self.gate.refuse()
            transport.abort()  # connection_lost follows; inner never saw it
            return
        self.admitted = True
        self.gate.live += 1
        self.timer = asyncio.get_running_loop().call_later(
            self.header_timeout_s, self._too_slow, transport
        )
        self.inner.connection_made(transport)

    def _too_slow(self, transport: asyncio.Transport) -> None:
        self.gate.count("header_timeout")
        transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.timer is not None:
            if b"\r\n\r\n" in self.tail + data:
                self.timer.cancel()
                self.timer = None
            self.tail = (self.tail + data)[-3:]
        if self.admitted:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def pause_writing(self) -> None:
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.admitted:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.admitted:
            self.admitted = False
            self.gate.live -= 1
            self.inner.connection_lost(exc)


class GuardedSite(web.TCPSite):
    """``web.TCPSite`` whose connections are gated (see the module's docstring)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        most_connections: int | None = None,
        refused: Counter | None = None,
    ) -> None:
        super().__init__(runner, host, port)
        self.header_timeout_s = header_timeout_s
        self.gate = _Gate(most_connections or max_connections(), refused)

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        made: Callable[[], asyncio.Protocol] | None = self._runner.server
        assert made is not None  # the runner was set up
        site_gate = self.gate

        class _Answers(_AnswersBadRequests):
            """The site's own (a handler is slotted: its gate is a class attribute)."""

            __slots__ = ()
            gate = site_gate

        def guarded() -> asyncio.Protocol:
            handler = made()
            if type(handler) is RequestHandler:  # aiohttp's own: answer bad requests
                handler.__class__ = _Answers
            return _Guarded(handler, self.gate, self.header_timeout_s)

        self._server = await asyncio.get_running_loop().create_server(
            guarded, self._host, self._port, backlog=self._backlog
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port
