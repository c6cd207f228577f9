"""Reading a ``POST /v1/query``: the body checked into a query event, or the JSON error answer.

Shared by the HTTP API (:mod:`ragsift.api.app`) and the embedded console
(:mod:`ragsift.console_server`), so both apply one contract and one set of
limits, name the tenant from the credential the same way and answer errors in
one shape (``ErrorBody``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from ragsift.api.auth import Principal
from ragsift.api.body import BodyError, read_json_body
from ragsift.api.openapi import EVENT_FIELDS, ErrorBody, QueryRequest
from ragsift.errors import shown_value
from ragsift.schemas import DeadLetter, QueryEvent
from ragsift.schemas.base import TENANT_PATTERN, is_tenant_id
from ragsift.settings import ApiSettings, LimitSettings

__all__ = [
    "MAX_FIELD_ERRORS",
    "WWW_AUTHENTICATE",
    "check_limits",
    "error_response",
    "field_errors",
    "http_error_response",
    "query_id_reused",
    "read_body",
    "read_query",
    "reused_query_id",
    "stored_answer",
]

WWW_AUTHENTICATE = 'Bearer realm="ragsift"'
#: Field errors an answer lists at most, then how many more: one per unknown name made
#: a 64 KiB body of 8,000 names a 458 KB answer, each name echoed.
MAX_FIELD_ERRORS = 20


def error_response(status: int, error: str, detail: str, **extra: Any) -> web.Response:
    """The JSON error answer (``ErrorBody``); a 401 names the authentication scheme."""
    body = ErrorBody(error=error, detail=detail, **extra)
    headers = {"WWW-Authenticate": WWW_AUTHENTICATE} if status == 401 else None
    return web.json_response(body.model_dump(mode="json"), status=status, headers=headers)


def bad_tenant_param(asked: str | None) -> web.Response | None:
    """A 422 for a ``?tenant_id=`` that is no tenant id: it was a 404 ``not_found``,
    as if the id had been looked up and not found, where a body's is a 422."""
    if asked is None or is_tenant_id(asked):
        return None
    detail = f"tenant_id must match {TENANT_PATTERN} (got {shown_value(asked)})"
    return error_response(422, "invalid_tenant", detail)


def http_error_response(exc: web.HTTPException) -> web.Response:
    """aiohttp's own error (no route, another method, no such asset) as the JSON error
    every route answers, its ``Allow`` header kept."""
    error = exc.reason.lower().replace(" ", "_")
    response = error_response(exc.status, error, exc.text or exc.reason)
    if "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response


async def read_query(
    request: web.Request,
    principal: Principal,
    settings: ApiSettings,
    limits: LimitSettings,
    *,
    id_prefix: str,
) -> tuple[QueryRequest, QueryEvent] | web.Response:
    """A POST /v1/query body read and checked: the request and its event, or the error answer.

    Shared by the API and the embedded console, so both apply one contract and one
    set of limits, and name the tenant from the credential the same way.
    """
    body = await read_body(request, settings)
    if isinstance(body, web.Response):
        return body
    try:
        req = QueryRequest.model_validate(body)
        check_limits(req, limits)
        # the credential names the tenant; a body tenant_id must agree with it
        tenant = principal.tenant_for(req.tenant_id)
        if not tenant:  # no credential to name it (loopback, --insecure-no-auth): the body
            missing = [{"loc": ["tenant_id"], "msg": "Field required: no credential names one"}]
            return error_response(
                422, "invalid_query", "the query breaks the contract", fields=missing
            )
        event = QueryEvent(
            query_id=req.query_id or f"{id_prefix}-{uuid.uuid4().hex}",
            tenant_id=tenant,
            traceparent=request.headers.get("traceparent"),
            # unset fields stay unset: the event's defaults (collection!) apply
            **req.model_dump(include=set(EVENT_FIELDS), exclude_unset=True),
        )
    except ValidationError as exc:
        fields = field_errors(exc)
        return error_response(422, "invalid_query", "the query breaks the contract", fields=fields)
    return req, event


async def read_body(request: web.Request, settings: ApiSettings) -> Any | web.Response:
    """A request's JSON body within the deployment's bounds, or the JSON error answer
    (400 not JSON or too deep, 408 too slow, 413 too large, 415 not JSON's type)."""
    try:
        return await read_json_body(
            request, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
        )
    except BodyError as exc:
        response = error_response(exc.status, exc.error, exc.message)
        if exc.close:
            response.force_close()
        return response


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """A validation error's fields as an error body lists them: where, and what (the
    first :data:`MAX_FIELD_ERRORS`, then how many more)."""
    errors = exc.errors(include_url=False, include_input=False)
    shown: list[dict[str, Any]] = [
        {"loc": list(e["loc"]), "msg": e["msg"]} for e in errors[:MAX_FIELD_ERRORS]
    ]
    if len(errors) > MAX_FIELD_ERRORS:
        shown.append({"loc": [], "msg": f"and {len(errors) - MAX_FIELD_ERRORS} more"})
    return shown


def check_limits(req: QueryRequest, limits: LimitSettings) -> None:
    """This deployment's limits (tighter than the wire contract's), as validation errors."""
    problems = []
    if req.k is not None and req.k > limits.max_k:
        problems.append(("k", f"Input should be less than or equal to {limits.max_k}"))
    if len(req.query) > limits.max_query_chars:
        problems.append(
            ("query", f"String should have at most {limits.max_query_chars} characters")
        )
    if problems:
        raise ValidationError.from_exception_data(
            "QueryRequest",
            [
                {
                    "type": "value_error",
                    "loc": (loc,),
                    "input": None,
                    "ctx": {"error": ValueError(msg)},
                }
                for loc, msg in problems
            ],
        )


def reused_query_id(stored: bytes | None, query: str, query_id: str) -> web.Response | None:
    """A 409 when the tenant's query id has a ``stored`` result for another question:
    it was answered 200 at once with that other question's result (ids derive from
    tenant and query id, so the stream cannot tell the two apart; helper-24). The
    same question again gets its result, as a retry expects."""
    if stored is None:
        return None
    try:
        asked = json.loads(stored).get("query")
    except (ValueError, AttributeError):
        return None
    if asked is None or asked == query:
        return None
    return query_id_reused(query_id, "has a result")


def query_id_reused(query_id: str, has: str) -> web.Response:
    """The 409 for a query id that ``has`` (a result, a request waiting) another question."""
    detail = (
        f"query id {shown_value(query_id)} already {has} for another question:"
        " a query id names one question; send this one under a new id"
    )
    return error_response(409, "query_id_reused", detail, query_id=query_id)


def stored_answer(
    query_id: str, result: bytes, report: bytes | None, failed: DeadLetter | None = None
) -> web.Response:
    """The 200 ``QueryAnswer`` for a result and report kept as their models' own JSON,
    joined as they are: no decoding and re-encoding them per request. ``failed``: the
    report's dead letter, given as ``report_error`` beside ``"report": null``."""
    parts = [b'{"query_id":', json.dumps(query_id).encode(), b',"result":', result]
    parts += [b',"report":', report or b"null"]
    if failed is not None:  # the report was dead-lettered: the result, and why not it
        detail = f"the pipeline could not build the report at {failed.stage}: {failed.error}"
        error = ErrorBody(error="report_failed", detail=detail, query_id=query_id)
        parts += [b',"report_error":', error.model_dump_json().encode()]
    return web.Response(body=b"".join([*parts, b"}"]), content_type="application/json")
