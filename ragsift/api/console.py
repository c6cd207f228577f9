"""The web console (X8): live results, evidence and per-tenant counters, in a browser.

:class:`ConsoleHub` turns pipeline events (results, reports, decisions,
evidence, dead letters) into small JSON messages
(:mod:`ragsift.api.console_messages`), keeps a bounded backlog for a
page that connects late, counts per tenant, and fans messages out to each open
page over server-sent events, only those of the tenants the page's credential
covers. :class:`ConsoleRoutes` serves the page and its static assets (shipped
in ``ragsift/api/static``; no CDN, no build step) and the event stream. Both
``ragsift api`` (fed from Kafka) and ``ragsift console`` (fed from the embedded
bus) mount them.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel

from ragsift.api.console_messages import Message, message_of
from ragsift.observability.labels import BoundedLabeler

__all__ = [
    "CONSOLE_PATH",
    "PUBLIC_CONSOLE_ROUTES",
    "ConsoleHub",
    "ConsoleRoutes",
    "Message",
    "dropped_messages_counter",
]

CONSOLE_PATH = "/console"
#: the page and its assets carry no data: a browser loads them before it holds a key
PUBLIC_CONSOLE_ROUTES = frozenset({CONSOLE_PATH, CONSOLE_PATH + "/static/{name}"})
#: the shipped assets, by name, with their content types (anything else is a 404)
STATIC_FILES = {
    "console.html": "text/html",
    "console.css": "text/css",
    "console.js": "text/javascript",
}
#: messages an open page may fall behind by before it misses some (each one is counted)
CLIENT_QUEUE_SIZE = 256
#: tenants counted apart besides the pinned; later ones share OTHER_TENANT, so hostile
#: tenant ids cannot grow memory
DEFAULT_MAX_TENANTS = 50
#: No tenant id can be this (TENANT_PATTERN has no space or parenthesis): a tenant called
#: "other" read the overflow tenants' counters when the bucket was named so.
OTHER_TENANT = "(other tenants)"
#: a comment line this often keeps proxies from closing an idle stream
HEARTBEAT_S = 15.0
#: How often an idle stream checks that its client is still there. ``ragsift api`` does
#: not cancel the handler of a client that left; it lingered to the next heartbeat, its
#: page in the hub and outside the connection cap (2,000 pages, 43 MB, in 13 s).
GONE_CHECK_S = 1.0


def dropped_messages_counter(registry: CollectorRegistry) -> Counter:
    """The counter of console messages slow pages missed (the hub's ``on_drop``)."""
    return Counter(
        "ragsift_console_dropped_messages_total",
        "Console messages a slow page did not get (its queue was full).",
        registry=registry,
    )


@dataclass
class _Counts:
    queries: int = 0
    answers: int = 0
    refusals: int = 0
    cache_hits: int = 0

    def add(self, other: _Counts) -> None:
        self.queries += other.queries
        self.answers += other.answers
        self.refusals += other.refusals
        self.cache_hits += other.cache_hits

    def view(self) -> dict[str, float | int]:
        reports = self.answers + self.refusals
        return {
            "queries": self.queries,
            "answer_rate": self.answers / reports if reports else 0.0,
            "refusal_rate": self.refusals / reports if reports else 0.0,
            "cache_hits": self.cache_hits,
        }


@dataclass(eq=False)
class _Client:
    tenants: frozenset[str] | None
    #: messages for the page; ``None`` ends its stream (the server is stopping)
    queue: asyncio.Queue[Message | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=CLIENT_QUEUE_SIZE)
    )

    def sees(self, tenant: str | None) -> bool:
        return self.tenants is None or (tenant is not None and tenant in self.tenants)

    def end(self) -> None:
        """Queue the end of the stream, making room for it in a full queue."""
        while True:
            try:
                self.queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                self.queue.get_nowait()  # the server is stopping: the oldest message goes


class ConsoleHub:
    """Console messages from pipeline events; bounded backlog, bounded tenants.

    Args:
        backlog: messages replayed to a page that connects, ``>= 1``.
        max_tenants: tenants with their own counters besides ``pinned_tenants``, the first
            seen; later ones share :data:`OTHER_TENANT`.
        pinned_tenants: tenants that always have their own counters, outside the bound
            (``RAGSIFT_WORKER_METRICS_TENANTS``, as for the metrics).
        on_drop: called once per message a slow page did not get (count it).
    """

    def __init__(
        self,
        *,
        backlog: int,
        max_tenants: int = DEFAULT_MAX_TENANTS,
        pinned_tenants: Iterable[str] = (),
        on_drop: Callable[[], None] | None = None,
    ):
        if backlog < 1:
            raise ValueError(f"backlog must be >= 1, got {backlog}")
        self._backlog: deque[Message] = deque(maxlen=backlog)
        self._counts: dict[str, _Counts] = {}
        # the metrics' bound, so slots are taken (and pins kept) as for the tenant label
        self._tenant = BoundedLabeler(max_tenants, pinned=pinned_tenants)
        if OTHER_TENANT in self._tenant.pinned:
            raise ValueError(f"{OTHER_TENANT!r} cannot be pinned: it is the shared bucket")
        self._clients: set[_Client] = set()
        #: The pages by tenant they see (``None``: those that see every tenant): an event
        #: goes past its tenant's pages only. It went past every page, 4,000 of one key
        #: cost 1.5 ms per event of every other tenant.
        self._watching: dict[str | None, set[_Client]] = {}
        self.on_drop = on_drop

    def accept(self, topic: str, event: BaseModel) -> None:
        """Take one pipeline event (a bus listener; the API calls it per record read)."""
        message = message_of(event)
        if message is None:
            return
        self._count(message)
        self._backlog.append(message)
        # Read once per set of tenants, not per page: 4,000 pages of one key read them
        # 4,000 times, 59 ms of the shared event loop per result.
        views: dict[frozenset[str] | None, Message] = {}
        for client in self._audience(message["tenant_id"]):
            self._send(client, message)
            # Only to pages that see the tenant: another's page would learn when it asked.
            if message["kind"] in ("result", "report") and client.sees(message["tenant_id"]):
                if (view := views.get(client.tenants)) is None:
                    view = views[client.tenants] = self._counters_message(client.tenants)
                self._send(client, view)

    def counters(self, tenants: frozenset[str] | None) -> dict[str, dict[str, float | int]]:
        """Per-tenant counters the caller may see (every tenant for ``None``)."""
        return {
            tenant: counts.view()
            for tenant, counts in sorted(self._counts.items())
            if tenants is None or tenant in tenants
        }

    def open(self, tenants: frozenset[str] | None) -> tuple[_Client, list[Message]]:
        """Register a page: its live queue, and the backlog (then counters) it may see."""
        client = _Client(tenants)
        self._clients.add(client)
        for tenant in _watched(tenants):
            self._watching.setdefault(tenant, set()).add(client)
        replay = [m for m in self._backlog if client.sees(m["tenant_id"])]
        return client, [*replay, self._counters_message(tenants)]

    def close(self, client: _Client) -> None:
        """Forget a page that went away."""
        self._clients.discard(client)
        for tenant in _watched(client.tenants):
            pages = self._watching.get(tenant, set())
            pages.discard(client)
            if not pages:
                self._watching.pop(tenant, None)

    def end_streams(self) -> None:
        """End every page's stream now: a stopping server does not wait for them."""
        for client in list(self._clients):
            client.end()

    @property
    def pages(self) -> int:
        """Pages connected now."""
        return len(self._clients)

    def _audience(self, tenant: str | None) -> list[_Client]:
        """The pages that see ``tenant``'s messages (every-tenant pages alone for none)."""
        pages = [*self._watching.get(None, ())]
        if tenant is not None:
            pages += self._watching.get(tenant, ())
        return pages

    def _send(self, client: _Client, message: Message) -> None:
        if not client.sees(message["tenant_id"]) and message["kind"] != "counters":
            return
        try:
            client.queue.put_nowait(message)
        except asyncio.QueueFull:
            if self.on_drop is not None:
                self.on_drop()

    def _counters_message(self, tenants: frozenset[str] | None) -> Message:
        return {
            "kind": "counters",
            "tenant_id": None,
            "query_id": None,
            "data": self.counters(tenants),
        }

    def _count(self, message: Message) -> None:
        tenant = message["tenant_id"]
        if tenant is None or message["kind"] not in ("result", "report"):
            return
        label = self._tenant(tenant)
        counts = self._counts.setdefault(
            OTHER_TENANT if label == BoundedLabeler.OTHER else label, _Counts()
        )
        data = message["data"]
        if message["kind"] == "result":
            counts.queries += 1
            counts.cache_hits += int(data["cache_hit"])
        elif data["is_refusal"]:
            counts.refusals += 1
        elif data["generated_by"] != "bypass":  # greetings are not answers from the sources
            counts.answers += 1


class ConsoleRoutes:
    """The page, its assets and its event stream.

    Args:
        hub: where messages come from.
        tenants_of: the tenants a request's caller may see (``None``: all), or raises
            the application's authentication error; it runs for the event stream only.
    """

    def __init__(
        self,
        hub: ConsoleHub,
        tenants_of: Callable[[web.Request], frozenset[str] | None],
    ):
        self.hub = hub
        self._tenants_of = tenants_of

    def add_to(self, app: web.Application) -> None:
        """Mount ``/console``, ``/console/static/{name}`` and ``/console/events``."""
        app.router.add_get(CONSOLE_PATH, self.page)
        app.router.add_get(CONSOLE_PATH + "/static/{name}", self.static)
        # No HEAD: aiohttp answers one with the GET handler, which streamed events to it.
        app.router.add_get(CONSOLE_PATH + "/events", self.events, allow_head=False)
        # An open page's stream never ends by itself: without this, a stopping server
        # waited for the next heartbeat's failed write (15 s) or its shutdown timeout.
        app.on_shutdown.append(self._end_streams)

    async def _end_streams(self, _: web.Application) -> None:
        self.hub.end_streams()

    async def page(self, request: web.Request) -> web.Response:
        """GET /console: the page (no data in it; it asks for a key when one is needed)."""
        return _asset("console.html")

    async def static(self, request: web.Request) -> web.Response:
        """GET /console/static/{name}: a shipped asset, else 404."""
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound(text=f"no console asset {name!r}")
        return _asset(name)

    async def events(self, request: web.Request) -> web.StreamResponse:
        """GET /console/events: server-sent events, the backlog first, then live."""
        tenants = self._tenants_of(request)
        client, replay = self.hub.open(tenants)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",  # nginx: do not hold events back
            }
        )
        try:
            await response.prepare(request)
            for old in replay:
                await response.write(_sse(old))
            loop = asyncio.get_running_loop()
            beat = loop.time() + HEARTBEAT_S
            while True:
                try:
                    async with asyncio.timeout(min(GONE_CHECK_S, HEARTBEAT_S)):
                        message = await client.queue.get()
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        break  # the page went away
                    if loop.time() >= beat:
                        await response.write(b": keep-alive\n\n")
                        beat = loop.time() + HEARTBEAT_S
                    continue
                if message is None:
                    break  # the server is stopping (ConsoleHub.end_streams)
                await response.write(_sse(message))
                beat = loop.time() + HEARTBEAT_S
        except ConnectionResetError:
            pass  # the page went away
        finally:
            self.hub.close(client)
        return response


def _watched(tenants: frozenset[str] | None) -> Iterable[str | None]:
    """The keys a page is filed under among the watching pages."""
    return (None,) if tenants is None else tenants


def _sse(message: Message) -> bytes:
    return b"data: " + json.dumps(message, separators=(",", ":")).encode() + b"\n\n"


def _asset(name: str) -> web.Response:
    body = resources.files("ragsift.api").joinpath("static", name).read_bytes()
    return web.Response(
        body=body,
        content_type=STATIC_FILES[name],
        charset="utf-8",
        headers={
            "Cache-Control": "no-cache",
            # the page loads only its own assets and talks only to this server
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:;"
            " frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff",
        },
    )
