"""The HTTP API: POST a query, get its result when the pipeline publishes it.

The API publishes the query event to Kafka and reads the results (and
reports) topics itself, with every partition assigned to it (no consumer
group: each API replica sees every result; :mod:`ragsift.api.kafka_link`),
matching them to waiting requests by (tenant, query id). A request that gets
no result within its timeout gets a 504 with the query id, which
``GET /v1/queries/{id}`` can poll later (a query the retrieval worker dead-letters
gets a 422, one whose report is dead-lettered its result and a ``report_error``;
:mod:`ragsift.api.waiters`), on any replica: results and reports
are also kept in Redis with a TTL (:class:`~ragsift.api.store.SharedResults`).
With a console hub the API also reads the decisions and audit topics and
serves the web console at ``/console`` (:mod:`ragsift.api.console`).

Every query route needs a credential (see :mod:`ragsift.api.auth`); the tenant
comes from it, and the body is read by :mod:`ragsift.api.query_input`.
``/metrics``, ``/healthz`` and ``/readyz`` are served by a separate
application (:func:`~ragsift.api.admin.create_admin_app`) on its own bind;
what a request passes before its route runs is :mod:`ragsift.api.admission`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from typing import Any

from aiohttp import web
from aiokafka.errors import KafkaError
from prometheus_client import Counter, Gauge, Histogram

from ragsift.api.admin import create_admin_app
from ragsift.api.admission import PRINCIPAL, Admission
from ragsift.api.auth import Authenticator
from ragsift.api.console import (
    ConsoleHub,
    ConsoleRoutes,
    dropped_messages_counter,
)
from ragsift.api.feedback_input import publish_feedback
from ragsift.api.guarded_site import refused_counter
from ragsift.api.kafka_link import DROP_REASONS, KafkaLink
from ragsift.api.openapi import openapi_document
from ragsift.api.query_input import (
    bad_tenant_param,
    check_limits,
    error_response,
    query_id_reused,
    read_query,
    reused_query_id,
    stored_answer,
)
from ragsift.api.retry_later import kafka_unavailable_response
from ragsift.api.store import RecentEvents, SharedResults, StoreKey
from ragsift.api.wait_drops import (
    client_gone_response,
    client_left,
    tenant_busy_response,
    timeout_response,
    waits_dropped_counter,
)
from ragsift.api.waiters import Pending, TenantBusyError, Waiters
from ragsift.errors import shown_value
from ragsift.observability.metrics import Metrics
from ragsift.observability.zeroed import zeroed_counter
from ragsift.schemas import DeadLetter, QueryEvent, Report, RetrievalResult
from ragsift.settings import ApiSettings, KafkaSettings, LimitSettings
from ragsift.streams.codec import EventCodec

__all__ = [
    "QueryApi",
    # re-exported from query_input, where the embedded console also reads them
    "check_limits",
    "create_admin_app",  # re-exported from admin
    "create_web_app",
    "error_response",
    "read_query",
]


class QueryApi(KafkaLink):
    """Owns the requests waiting for results, the stores that answer them, and the routes.

    Publishing and reading are its :class:`~ragsift.api.kafka_link.KafkaLink`'s.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        *,
        auth: Authenticator,
        settings: ApiSettings | None = None,
        metrics: Metrics | None = None,
        limits: LimitSettings | None = None,
        shared: SharedResults | None = None,
        hub: ConsoleHub | None = None,
    ):
        # what the reader decodes, by logical topic: the console also wants decisions and audit
        reads = ["retrievals", "reports", "deadletter"]
        if hub is not None:
            reads += ["decisions", "audit"]
        super().__init__(kafka, reads)
        self.shared = shared
        self.hub = hub
        self.auth = auth
        self.settings = settings or ApiSettings()
        self.limits = limits or LimitSettings()
        self.metrics = metrics or Metrics()
        self.waiters = Waiters(self.settings.max_waiting_per_tenant)
        self._query_codec = EventCodec(QueryEvent)
        self._writer: asyncio.Task[None] | None = None
        r = self.metrics.registry
        self.requests = Counter(
            "ragsift_api_requests_total",
            "HTTP API requests by route and status.",
            ["route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "ragsift_api_request_duration_seconds",
            "Time to answer a POST /v1/query.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.evictions = Counter(
            "ragsift_api_store_evictions_total",
            "Recent results/reports dropped to keep the store under its byte bound.",
            registry=r,
        )
        self.store_bytes = Gauge(
            "ragsift_api_store_bytes", "Bytes held by the recent results/reports store.", registry=r
        )
        self.store = RecentEvents(self.settings.store_bytes, on_evict=self.evictions.inc)
        self.store_bytes.set_function(lambda: self.store.bytes)
        self.shared_errors = Counter(
            "ragsift_api_shared_store_errors_total",
            "Results/reports not written to (or not read from) Redis: dropped or failed.",
            registry=r,
        )
        if shared is not None:
            shared.on_error = self.shared_errors.inc
        self.admission = Admission(auth, self.requests, max_body_bytes=self.settings.max_body_bytes)
        #: what the API's sites refuse before a route runs (``GuardedSite(refused=...)``)
        self.refused = refused_counter(r)
        self.waits_dropped = waits_dropped_counter(r)
        dropped = zeroed_counter(
            "ragsift_api_dropped_events_total",
            "Records read from Kafka the API skipped, by logical topic and reason"
            " (decode: not the topic's event; unusable: taking it failed).",
            ["topic", "reason"],
            [(topic, reason) for topic in self._reads for reason in DROP_REASONS],
            r,
        )
        self.on_drop = lambda topic, reason: dropped.labels(topic, reason).inc()
        if hub is not None:
            hub.on_drop = dropped_messages_counter(r).inc

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start connecting in the background: the API serves (503s) while Kafka is away."""
        self._runner = asyncio.create_task(self._run(), name="ragsift-api-kafka")
        if self.shared is not None:
            self._writer = asyncio.create_task(self.shared.run(), name="ragsift-api-redis")

    async def stop(self) -> None:
        """Stop reading and disconnect."""
        for task in (self._runner, self._writer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._disconnect()
        if self.shared is not None:
            await self.shared.close()

    def accept(self, topic: str, event: Any) -> None:
        """One event read from a topic: keep it, wake its waiters, show it on the console."""
        if isinstance(event, RetrievalResult):
            self.accept_result(event)
        elif isinstance(event, Report):
            self.accept_report(event)
        elif isinstance(event, DeadLetter):
            self.accept_dead_letter(event)
        if self.hub is not None:
            self.hub.accept(topic, event)

    def _keep(self, key: StoreKey, value: bytes) -> None:
        self.store.put(key, value)
        if self.shared is not None:
            self.shared.put(key, value)

    def accept_result(self, result: RetrievalResult) -> None:
        """Keep a result for its (tenant, query id) and wake that tenant's waiters only."""
        key = (result.tenant_id, result.query_id)
        value = result.model_dump_json().encode()
        self._keep(("result", *key), value)
        self.waiters.wake(key, result=value)

    def accept_report(self, report: Report) -> None:
        """Keep a report for its (tenant, query id)."""
        key = (report.tenant_id, report.query_id)
        value = report.model_dump_json().encode()
        self._keep(("report", *key), value)
        self.waiters.wake(key, report=value)

    def accept_dead_letter(self, letter: DeadLetter) -> None:
        """A rejected query answers only the request that sent those exact bytes; a
        failed report, the requests of its tenant and query id that want one."""
        self.waiters.dead_letter(letter)

    def _held(self, kind: str, key: tuple[str, str], pending: Pending) -> bytes | None:
        """The request's own copy (see Pending.result), else the store's (a retry's)."""
        held = pending.result if kind == "result" else pending.report
        return held if held is not None else self.store.get((kind, *key))

    def _answered(self, key: tuple[str, str], pending: Pending) -> bool:
        if self._held("result", key, pending) is None:
            return False
        if not pending.want_report or pending.report_letter is not None:
            return True
        return self._held("report", key, pending) is not None

    # -- handlers ---------------------------------------------------------------------

    async def post_query(self, request: web.Request) -> web.Response:
        """POST /v1/query."""
        with self.latency.time():
            return await self._post_query(request)

    async def _post_query(self, request: web.Request) -> web.Response:
        principal = request[PRINCIPAL]
        principal.require("query")
        read = await read_query(request, principal, self.settings, self.limits, id_prefix="api")
        if isinstance(read, web.Response):
            return read
        req, event = read
        key = (event.tenant_id, event.query_id)
        reused = reused_query_id(self.store.get(("result", *key)), event.query, event.query_id)
        if reused is not None:
            return reused
        if self.waiters.asked_otherwise(key, event.query):  # sent at once: one result for both
            return query_id_reused(event.query_id, "has a request waiting")
        sent = self._query_codec.encode(event)
        try:
            waiting = self.waiters.waiting(key, sent, req.want_report, event.query, req.timeout_s)
            with waiting as pending:
                try:
                    await self._publish(event, sent, req.timeout_s)
                except KafkaError as exc:
                    return kafka_unavailable_response(str(exc), event.query_id)
                answered = partial(self._answered, key, pending)
                gone = partial(client_left, request)  # AppRunner does not cancel us
                ended = await self.waiters.wait(pending, answered, req.timeout_s, gone)
                if ended == "gone":  # the query was sent: its result is kept as any
                    self.waits_dropped.labels("client_gone").inc()
                    return client_gone_response(event.query_id)
                if ended == "timeout":
                    return timeout_response(event.query_id, req.timeout_s)
        except TenantBusyError as exc:  # raised on entry: nothing was sent
            self.waits_dropped.labels("tenant_limit").inc()
            return tenant_busy_response(exc)
        return self._answer(key, pending)

    def _answer(self, key: tuple[str, str], pending: Pending) -> web.Response:
        letter = pending.letter
        query_id = key[1]
        if letter is not None and "unknown collection" in letter.error:
            return error_response(404, "collection_not_found", letter.error, query_id=query_id)
        if letter is not None:
            return error_response(
                422,
                "rejected",
                f"the pipeline rejected the query at {letter.stage}: {letter.error}",
                query_id=query_id,
            )
        result = self._held("result", key, pending)
        report = self._held("report", key, pending) if pending.want_report else None
        if result is None:  # _answered said otherwise, with no await between: never
            return error_response(
                504, "timeout", "the result was evicted; retry", query_id=query_id
            )
        failed = pending.report_letter if report is None else None
        return stored_answer(query_id, result, report, failed)

    async def post_feedback(self, request: web.Request) -> web.Response:
        """POST /v1/feedback: a label on a result, for the calibration worker (X2)."""
        return await publish_feedback(request, request[PRINCIPAL], self.settings, self.send)

    async def get_query(self, request: web.Request) -> web.Response:
        """GET /v1/queries/{query_id}: the caller's tenants only; others' ids are 404."""
        principal = request[PRINCIPAL]
        principal.require("read")
        query_id = request.match_info["query_id"]
        asked = request.query.get("tenant_id")
        if (bad := bad_tenant_param(asked)) is not None:
            return bad
        if asked is None and principal.tenants is None:  # it looked under the tenant ""
            detail = "give ?tenant_id=: no credential names one (--insecure-no-auth)"
            return error_response(422, "invalid_tenant", detail)
        tenants = (
            [principal.tenant_for(asked)] if asked is not None else sorted(principal.tenants or ())
        )
        if (result := await self._first_result(tenants, query_id)) is not None:
            return web.Response(body=result, content_type="application/json")
        detail = f"no result seen for query id {shown_value(query_id)}"
        return error_response(404, "not_found", detail)

    async def _first_result(self, tenants: list[str], query_id: str) -> bytes | None:
        """The result of the first of ``tenants`` (in order) that has one for the query
        id: this replica's, else Redis's (another replica's, or from before), read for
        the tenants before this replica's first in one round trip (a JWT may name many
        tenants: it was one read per tenant per poll)."""
        keys: list[StoreKey] = [("result", tenant, query_id) for tenant in tenants]
        held = [self.store.get(key) for key in keys]
        # the tenants before the first this replica holds one for: only they come first
        ask = next((n for n, value in enumerate(held) if value is not None), len(keys))
        if ask and self.shared is not None:
            found = await self.shared.get_many(keys[:ask])
            if (first := next((value for value in found if value is not None), None)) is not None:
                return first
        return held[ask] if ask < len(keys) else None

    async def openapi(self, request: web.Request) -> web.Response:
        """The OpenAPI document."""
        return web.json_response(openapi_document(self.limits.max_k, self.limits.max_query_chars))

    def console_tenants(self, request: web.Request) -> frozenset[str] | None:
        """The tenants a console page may watch: its credential's (``read`` scope)."""
        principal = request[PRINCIPAL]
        principal.require("read")
        return principal.tenants


def create_web_app(api: QueryApi) -> web.Application:
    """The query API; Kafka connects on start-up, disconnects on clean-up."""
    app = web.Application(
        middlewares=[api.admission.middleware], client_max_size=api.settings.max_body_bytes
    )
    # Expect: 100-continue is answered after the checks the route applies first
    with_body, without = api.admission.expect_body, api.admission.expect
    app.router.add_post("/v1/query", api.post_query, expect_handler=with_body)
    app.router.add_post("/v1/feedback", api.post_feedback, expect_handler=with_body)
    app.router.add_get("/v1/queries/{query_id}", api.get_query, expect_handler=without)
    app.router.add_get("/openapi.json", api.openapi, expect_handler=without)
    if api.hub is not None:
        ConsoleRoutes(api.hub, api.console_tenants).add_to(app)

    async def lifecycle(_: web.Application) -> Any:
        await api.start()
        yield
        await api.stop()

    app.cleanup_ctx.append(lifecycle)
    return app
