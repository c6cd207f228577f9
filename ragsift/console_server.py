"""``ragsift console``: the web console on the embedded runtime, no Kafka (X5, X8).

The page and its event stream are the API's (:mod:`ragsift.api.console`); the
bus feeds the hub as events are published, and ``POST /v1/query`` runs the
question through the embedded pipeline and answers as the API does.
``GET /v1/queries/{id}`` reads the runtime's result store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial

from aiohttp import web

from ragsift.api.admission import PRINCIPAL, Admission
from ragsift.api.auth import Authenticator
from ragsift.api.console import (
    CONSOLE_PATH,
    PUBLIC_CONSOLE_ROUTES,
    ConsoleHub,
    ConsoleRoutes,
    dropped_messages_counter,
)
from ragsift.api.feedback_input import feedback_accepted, read_feedback
from ragsift.api.openapi import ErrorBody, QueryAnswer
from ragsift.api.query_input import (
    bad_tenant_param,
    error_response,
    read_query,
)
from ragsift.embedded import EmbeddedRuntime, Outcome
from ragsift.errors import RagsiftError, shown_value
from ragsift.gc_policy import settle as settle_gc
from ragsift.schemas import DeadLetter, QueryEvent
from ragsift.wiring import MIX_SAVE_INTERVAL_S
from ragsift.workers.calibration import FeedbackRefused

__all__ = ["create_console_app"]

log = logging.getLogger(__name__)


def _log_failure(query_id: str, done: asyncio.Future[list[Outcome]]) -> None:
    """An answer no request waits for any more failed: say so, as nobody else will
    (``asyncio.shield`` marks its error retrieved, so asyncio stays silent)."""
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.error("query %r: its answer failed after its request gave up: %s", query_id, exc)


class _ConsoleApi:
    """The console's query routes on the embedded runtime."""

    def __init__(self, runtime: EmbeddedRuntime, auth: Authenticator):
        self.runtime = runtime
        # The API's checks before a route runs (and before an Expect's 100 Continue);
        # the page, its assets and the home page's redirect need no credential.
        self.admission = Admission(
            auth,
            None,
            max_body_bytes=runtime.settings.api.max_body_bytes,
            public=PUBLIC_CONSOLE_ROUTES | {"/"},
        )
        # Labels are applied one at a time, as the calibration worker takes them.
        self._labelling = asyncio.Lock()
        #: answers still being made for requests that timed out (kept from the GC)
        self._answering: set[asyncio.Future[list[Outcome]]] = set()

    async def settle(self) -> None:
        """Wait for the answers still being made, so each lands in the result store
        before the runtime closes (a 504 promised it could be polled)."""
        if self._answering:
            await asyncio.wait(list(self._answering))

    def tenants_of(self, request: web.Request) -> frozenset[str] | None:
        """The tenants the caller may watch."""
        principal = request[PRINCIPAL]
        principal.require("read")
        return principal.tenants

    async def post_query(self, request: web.Request) -> web.Response:
        """POST /v1/query: the API's contract, answered by the embedded pipeline."""
        principal = request[PRINCIPAL]
        principal.require("query")
        settings = self.runtime.settings
        read = await read_query(
            request, principal, settings.api, settings.limits, id_prefix="console"
        )
        if isinstance(read, web.Response):
            return read
        req, event = read
        # Answered on its own task, waited for up to the request's timeout_s (it was
        # ignored: 7.6 s for timeout_s 1 under load). Past it the answer still lands in
        # the result store, for GET /v1/queries/{id}, as the API's 504 says.
        answering = asyncio.ensure_future(self.runtime.answer([event]))
        self._answering.add(answering)
        answering.add_done_callback(self._answering.discard)
        try:
            [outcome] = await asyncio.wait_for(asyncio.shield(answering), req.timeout_s)
        except TimeoutError:
            return error_response(
                504,
                "timeout",
                f"no result within {req.timeout_s} s; poll GET /v1/queries/{event.query_id}",
                query_id=event.query_id,
            )
        except RagsiftError as exc:
            return error_response(422, "rejected", str(exc), query_id=event.query_id)
        finally:
            if not answering.done():  # the request gave up (504, or its client left)
                answering.add_done_callback(partial(_log_failure, event.query_id))
        if isinstance(outcome, DeadLetter):
            status, error = (
                (404, "collection_not_found")
                if "unknown collection" in outcome.error
                else (422, "rejected")
            )
            detail = f"the pipeline rejected the query at {outcome.stage}: {outcome.error}"
            return error_response(status, error, detail, query_id=event.query_id)
        answer = QueryAnswer(
            query_id=event.query_id,
            result=outcome.result,
            report=outcome.report,
            report_error=None if outcome.report else self._report_error(event),
        )
        return web.json_response(text=answer.model_dump_json())

    def _report_error(self, event: QueryEvent) -> ErrorBody | None:
        """Why the query has no report: its dead letter, as the API's ``report_error``
        (the console answered ``"report": null`` without a word why)."""
        for letter in self.runtime.bus.published["deadletter"]:
            if (
                isinstance(letter, DeadLetter)
                and letter.worker == "report"
                and (letter.tenant_id, letter.query_id) == (event.tenant_id, event.query_id)
            ):
                detail = (
                    f"the pipeline could not build the report at {letter.stage}: {letter.error}"
                )
                return ErrorBody(error="report_failed", detail=detail, query_id=event.query_id)
        return None

    async def post_feedback(self, request: web.Request) -> web.Response:
        """POST /v1/feedback: the API's contract, applied by the embedded feedback loop
        (as ``ragsift feedback``): 202 once the label is stored (and a re-fit run when
        due); a query this runtime did not score is a 404, as it can tell. The label is
        stored and any re-fit run on a thread, so the page's stream and queries go on
        meanwhile (a re-fit takes hundreds of milliseconds)."""
        principal = request[PRINCIPAL]
        principal.require("query")
        read = await read_feedback(request, principal, self.runtime.settings.api)
        if isinstance(read, web.Response):
            return read
        loop = self.runtime.feedback
        if loop is None:
            detail = "feedback re-fits need RAGSIFT_CONFIDENCE_SCORER=calibrated"
            return error_response(409, "no_feedback_loop", detail, query_id=read.query_id)
        try:
            async with self._labelling:
                await asyncio.to_thread(loop.apply, read)
        except FeedbackRefused as exc:
            if exc.reason == "tenant_mismatch":
                # Answered as a query never asked: a caller must not learn that another
                # tenant asked this id (the metric still counts it as a mismatch).
                detail = (  # word for word what an id never asked gets
                    f"feedback for query {read.query_id!r}: no scored result within the join"
                    f" window ({loop.settings.join_ttl_s}s)"
                )
                return error_response(404, "unknown_query", detail, query_id=read.query_id)
            return error_response(404, exc.reason, str(exc), query_id=read.query_id)
        except ValueError as exc:  # as `ragsift feedback` refuses it
            return error_response(422, "rejected", str(exc), query_id=read.query_id)
        except OSError as exc:  # the label is stored; its re-fit could not be written
            # Before RagsiftError: Redis's calibration store fails with errors that are both
            # (down: a service error; refused), and the label is stored all the same.
            log.error("feedback for %r: re-fit not stored: %s", read.query_id, exc)
            detail = "the label is stored, but its re-fit could not be: sending it again retries"
            return error_response(503, "refit_not_stored", detail, query_id=read.query_id)
        except RagsiftError as exc:  # the feedback store is held by another process, or damaged
            # Its error names the store's file or Redis's address: the log's, not the caller's.
            log.error("feedback for %r: not stored: %s", read.query_id, exc)
            detail = "the label is not stored: the feedback store is unavailable; send it again"
            return error_response(503, "feedback_store", detail, query_id=read.query_id)
        return feedback_accepted(read)

    async def get_query(self, request: web.Request) -> web.Response:
        """GET /v1/queries/{id}: a stored result of the caller's tenants."""
        principal = request[PRINCIPAL]
        principal.require("read")
        query_id = request.match_info["query_id"]
        asked = request.query.get("tenant_id")
        if (bad := bad_tenant_param(asked)) is not None:
            return bad
        # As the API reads it: per tenant the caller may act for (ids are the clients'
        # own, so another tenant's newer query of the same id must not hide this one).
        tenants: list[str | None] = (
            [principal.tenant_for(asked)]
            if asked is not None
            else [None]
            if principal.tenants is None
            else [*sorted(principal.tenants)]
        )
        for tenant in tenants:
            try:
                found = self.runtime.find_answer(query_id, tenant)
            except RagsiftError as exc:  # its stored row does not read
                # The store's error names its file: the operator's log, not the caller's.
                log.error("GET /v1/queries/%s: %s", shown_value(query_id), exc)
                detail = (
                    f"the stored answer of {shown_value(query_id)} does not read (damaged, or"
                    " written by a newer release): ask the question again"
                )
                return error_response(500, "unreadable_result", detail, query_id=query_id)
            if found is not None:
                return web.json_response(text=found.result.model_dump_json())
        detail = f"no result stored for query id {shown_value(query_id)}"
        return error_response(404, "not_found", detail)


def create_console_app(
    runtime: EmbeddedRuntime,
    *,
    auth: Authenticator,
    hub: ConsoleHub | None = None,
    mix_save_interval_s: float = MIX_SAVE_INTERVAL_S,
) -> web.Application:
    """The console on ``runtime``: ``/console`` (the page), its events, and the query API.

    While it runs, the scopes' mix estimates are saved every ``mix_save_interval_s``.
    """
    hub = hub or ConsoleHub(
        backlog=runtime.settings.runtime.console_backlog,
        max_tenants=runtime.settings.worker.metrics_max_tenants,
        pinned_tenants=runtime.settings.worker.metrics_tenants,
        on_drop=dropped_messages_counter(runtime.metrics.registry).inc,
    )
    api = _ConsoleApi(runtime, auth)
    unsubscribe = runtime.bus.subscribe(hub.accept)
    for stored in runtime.store.recent(runtime.settings.runtime.console_backlog):
        # answers from earlier runs: the page opens on what was asked before
        for event in (stored.result, stored.report, stored.decision):
            if event is not None:
                hub.accept("", event)
    app = web.Application(middlewares=[api.admission.middleware])
    ConsoleRoutes(hub, api.tenants_of).add_to(app)
    with_body, without = api.admission.expect_body, api.admission.expect
    app.router.add_post("/v1/query", api.post_query, expect_handler=with_body)
    app.router.add_post("/v1/feedback", api.post_feedback, expect_handler=with_body)
    app.router.add_get("/v1/queries/{query_id}", api.get_query, expect_handler=without)

    async def home(_: web.Request) -> web.Response:
        raise web.HTTPFound(CONSOLE_PATH)

    app.router.add_get("/", home)

    saving: list[asyncio.Task[None]] = []

    async def on_startup(_: web.Application) -> None:
        # Start-up is done: as a worker does, keep the collector off the batches in
        # flight (ragsift.gc_policy has the figures).
        settle_gc()
        # The mix estimates are saved as a worker saves them, not only at close (ADR 013).
        saving.append(
            asyncio.create_task(runtime.keep_mix(mix_save_interval_s), name="ragsift-console-mix")
        )

    async def on_cleanup(_: web.Application) -> None:
        await api.settle()
        unsubscribe()
        for task in saving:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
