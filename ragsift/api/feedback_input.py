"""``POST /v1/feedback``: a label on a result, published to ``ragsift.feedback.v1``.

A reviewer (the ``label_sample`` review queue, ADR 044) or an application says
whether a result's kept context held the answer; the calibration worker joins the
label to the scored result and re-fits the scope when enough exist (X2,
docs/feedback.md). The tenant comes from the credential, as for a query. The
event id is derived from tenant, query id and the label, so a client's retry is
the same event; a changed label is a new one, and the worker keeps a query's latest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from ragsift.api.auth import Principal
from ragsift.api.kafka_link import MAX_SEND_S
from ragsift.api.openapi import FeedbackAccepted, FeedbackRequest
from ragsift.api.query_input import error_response, field_errors, read_body
from ragsift.api.retry_later import kafka_unavailable_response
from ragsift.schemas import FeedbackEvent
from ragsift.settings import ApiSettings
from ragsift.streams.codec import EventCodec

__all__ = ["feedback_accepted", "publish_feedback", "read_feedback"]

_CODEC = EventCodec(FeedbackEvent)

Send = Callable[[str, str, bytes, float], Awaitable[None]]


async def read_feedback(
    request: web.Request, principal: Principal, settings: ApiSettings
) -> FeedbackEvent | web.Response:
    """The body read and checked into a feedback event, or the JSON error answer."""
    body = await read_body(request, settings)
    if isinstance(body, web.Response):
        return body
    try:
        req = FeedbackRequest.model_validate(body)
        tenant = principal.tenant_for(req.tenant_id)
        if not tenant:  # no credential to name it (--insecure-no-auth): the body must
            return _invalid(
                [{"loc": ["tenant_id"], "msg": "Field required: no credential names one"}]
            )
        return FeedbackEvent.label(
            tenant, req.query_id, relevant=req.relevant, sampled=req.sampled, comment=req.comment
        )
    except ValidationError as exc:
        return _invalid(field_errors(exc))


def _invalid(fields: list[dict[str, Any]]) -> web.Response:
    return error_response(
        422, "invalid_feedback", "the feedback breaks the contract", fields=fields
    )


async def publish_feedback(
    request: web.Request, principal: Principal, settings: ApiSettings, send: Send
) -> web.Response:
    """Read, check and publish one label: 202 with its event id once the broker has it."""
    principal.require("query")
    read = await read_feedback(request, principal, settings)
    if isinstance(read, web.Response):
        return read
    try:
        # keyed as the topic's spec says (tenant): one tenant's labels stay in order
        await send("feedback", read.tenant_id, _CODEC.encode(read), MAX_SEND_S)
    except KafkaError as exc:
        return kafka_unavailable_response(str(exc), read.query_id)
    return feedback_accepted(read)


def feedback_accepted(event: FeedbackEvent) -> web.Response:
    """The 202 answer for a label taken (by the broker, or by the embedded loop)."""
    accepted = FeedbackAccepted(
        event_id=event.event_id,
        query_id=event.query_id,
        tenant_id=event.tenant_id,
        relevant=event.relevant,
        sampled=event.sampled,
    )
    return web.json_response(accepted.model_dump(mode="json"), status=202)
