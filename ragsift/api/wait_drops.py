"""``POST /v1/query`` waits that end with no answer for their caller, and how they are counted.

Two reasons, each a ``reason`` of ``ragsift_api_waits_dropped_total``: ``tenant_limit``
(the tenant had ``RAGSIFT_API_MAX_WAITING_PER_TENANT`` requests waiting: a 429 with
Retry-After, the query never sent) and ``client_gone`` (the client left while its
request waited: the wait ends and frees the tenant's slot; the query was already sent,
and its result, when it comes, is kept for ``GET /v1/queries/{id}`` as any other).
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from ragsift.api.body import CLIENT_CLOSED_REQUEST
from ragsift.api.query_input import error_response
from ragsift.api.retry_later import retry_later
from ragsift.api.waiters import TenantBusyError
from ragsift.observability.zeroed import zeroed_counter

__all__ = [
    "WAIT_DROPS",
    "client_gone_response",
    "client_left",
    "tenant_busy_response",
    "timeout_response",
    "waits_dropped_counter",
]

#: The ``reason`` label's values.
WAIT_DROPS = ("tenant_limit", "client_gone")


def waits_dropped_counter(registry: CollectorRegistry) -> Counter:
    """The counter of waits ended with no answer for their caller, by reason."""
    return zeroed_counter(
        "ragsift_api_waits_dropped_total",
        "POST /v1/query requests not waited out to an answer, by reason (tenant_limit:"
        " answered 429, never sent; client_gone: the client left while waiting).",
        ["reason"],
        [(reason,) for reason in WAIT_DROPS],
        registry,
    )


def tenant_busy_response(exc: TenantBusyError) -> web.Response:
    """The 429 for a tenant at its bound, with the JSON error and a Retry-After."""
    response = error_response(429, "tenant_busy", exc.message, query_id=exc.query_id)
    return retry_later(response, exc.retry_after)


def timeout_response(query_id: str, timeout_s: float) -> web.Response:
    """The 504 for a request whose result did not come within its ``timeout_s``."""
    detail = f"no result within {timeout_s} s; poll GET /v1/queries/{query_id}"
    return error_response(504, "timeout", detail, query_id=query_id)


def client_left(request: web.Request) -> bool:
    """Whether ``request``'s connection is gone (or going): no answer can reach it."""
    transport = request.transport
    return transport is None or transport.is_closing()


def client_gone_response(query_id: str) -> web.Response:
    """What is counted for a request whose client left while it waited (nobody reads it)."""
    detail = f"the client left; the result is kept: GET /v1/queries/{query_id}"
    return error_response(CLIENT_CLOSED_REQUEST, "client_closed_request", detail, query_id=query_id)
