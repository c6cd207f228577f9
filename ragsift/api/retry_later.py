"""The answers that ask a caller to come back later, and their ``Retry-After``: whole
seconds (RFC 9110 section 10.2.3 has no fractions), from 1 to 60, each derived from
what the API knows of when asking again can succeed (docs/security.md)."""

from __future__ import annotations

import math

from aiohttp import web

from ragsift.api.kafka_link import BROKER_PROBE_INTERVAL_S, RECONNECT_BACKOFF_S
from ragsift.api.query_input import error_response

__all__ = [
    "KAFKA_RETRY_AFTER_S",
    "RETRY_AFTER_MAX_S",
    "RETRY_AFTER_MIN_S",
    "kafka_unavailable_response",
    "retry_after_s",
    "retry_later",
]

#: 0 would ask for the refused request again at once
RETRY_AFTER_MIN_S = 1
#: the longest a request may wait for its result (``MAX_TIMEOUT_S``): no wait the API
#: imposes outlasts it, and a longer hint would only idle a client
RETRY_AFTER_MAX_S = 60
#: A failed publish leaves the API not ready (``KafkaLink.ready``) until its next
#: connect attempt (every ``RECONNECT_BACKOFF_S`` while the brokers are away) or broker
#: probe (every ``BROKER_PROBE_INTERVAL_S``) succeeds: by then it can be ready again.
KAFKA_RETRY_AFTER_S = max(BROKER_PROBE_INTERVAL_S, RECONNECT_BACKOFF_S)


def retry_after_s(seconds: float) -> int:
    """``seconds`` as a Retry-After: rounded up, at least 1, at most 60 (NaN: 60)."""
    if not seconds < RETRY_AFTER_MAX_S:  # also NaN and infinity
        return RETRY_AFTER_MAX_S
    return max(RETRY_AFTER_MIN_S, math.ceil(seconds))


def retry_later(response: web.Response, seconds: float) -> web.Response:
    """``response`` with the Retry-After of ``seconds`` (:func:`retry_after_s`)."""
    response.headers["Retry-After"] = str(retry_after_s(seconds))
    return response


def kafka_unavailable_response(detail: str, query_id: str) -> web.Response:
    """The 503 for an event the broker did not take: nothing was published."""
    response = error_response(503, "kafka_unavailable", detail, query_id=query_id)
    return retry_later(response, KAFKA_RETRY_AFTER_S)
