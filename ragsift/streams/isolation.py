"""Errors stay with the event that caused them: how both runtimes call a handler.

A handler call gets a total deadline. When a batch call raises, overruns the
deadline or breaks the handler contract, the batch's events are run again one
by one, each with the deadline: only the events that fail on their own become
failures (and dead letters), the rest of the batch goes on. The Faust agents
and the in-process bus both call :func:`handle_isolated`, so the rule has one
implementation.

A deadline interrupts a handler at its next ``await``: work that blocks the
event loop (a long CPU-bound call) is only cut off once it yields. A handler
may set its own ``deadline_s`` attribute; ``None`` means no deadline: the audit
sink waits for a failing disk instead of letting evidence be dead-lettered. A
handler whose work grows with its events says so with ``deadline_for(events,
default)``, asked for each call: the indexer's grows with the text it embeds, where
a flat 30 s dead-lettered a 300-chunk page of a manual on a busy machine.

A handler may also have ``settle()``: what its handled events still owe a service
(the indexer's new index version, which Redis did not take), awaited after the
events are handled and before their outcomes go back, with no deadline. It is
back-pressure: the batch is not done, so not committed, until the service takes
it; a deadline would turn an outage into dead letters of events already applied.
Its ``prepare(events)`` is the same before the events are handled: what the
service must hold before anything is written (the indexer's pending marks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ragsift.errors import RagsiftError
from ragsift.observability.metrics import Metrics
from ragsift.workers.base import Handler, Outcome

__all__ = [
    "EmitFailedError",
    "HandlerContractError",
    "HandlerDeadlineError",
    "failure_stage",
    "handle_isolated",
]

log = logging.getLogger(__name__)


class HandlerDeadlineError(RagsiftError):
    """A handler call took longer than its deadline (RAGSIFT_LIMITS_HANDLER_DEADLINE_S)."""

    stage = "deadline"


class HandlerContractError(RagsiftError):
    """A handler returned the wrong number of outcomes for its events."""

    stage = "handler"


class EmitFailedError(RagsiftError):
    """An event was handled but one of its outputs could not be published."""

    stage = "emit"


def failure_stage(exc: BaseException) -> str:
    """The stage a dead letter records for ``exc`` (``handler`` when it says none)."""
    return exc.stage if isinstance(exc, RagsiftError) else "handler"


async def handle_isolated(
    handler: Handler[Any],
    events: Sequence[BaseModel],
    *,
    deadline_s: float,
    metrics: Metrics,
) -> list[Outcome]:
    """One outcome per event, in order; never raises for what one event does.

    The batch is handed to the handler at once; if that call fails as a whole,
    each event is handed over alone, and an event that fails alone gets its
    exception as its outcome (a :class:`HandlerDeadlineError` if it overran).
    """
    if deadline_s <= 0:
        raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
    prepare = getattr(handler, "prepare", None)
    if prepare is not None:
        await prepare(events)  # no deadline: back-pressure (module docstring)
    outcomes = await _handle(handler, events, deadline_s, metrics)
    settle = getattr(handler, "settle", None)
    if settle is not None:
        await settle()  # no deadline: back-pressure (module docstring)
    return outcomes


async def _handle(
    handler: Handler[Any], events: Sequence[BaseModel], deadline_s: float, metrics: Metrics
) -> list[Outcome]:
    try:
        return await _call(handler, events, _deadline(handler, events, deadline_s))
    except Exception as exc:
        if len(events) == 1:
            return [exc]
        reason = "deadline" if isinstance(exc, HandlerDeadlineError) else "error"
        metrics.batch_retries.labels(handler.name, reason).inc()
        log.warning(
            "%s: batch of %d failed (%s: %s); retrying event by event",
            handler.name,
            len(events),
            type(exc).__name__,
            exc,
        )
    outcomes: list[Outcome] = []
    for event in events:
        try:
            outcomes.extend(await _call(handler, [event], _deadline(handler, [event], deadline_s)))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _deadline(handler: Handler[Any], events: Sequence[BaseModel], default: float) -> float | None:
    """The deadline of one call: the handler's ``deadline_for(events, default)`` where it
    has one, else its ``deadline_s`` attribute, else ``default`` (module docstring)."""
    deadline_for = getattr(handler, "deadline_for", None)
    if deadline_for is not None:
        return float(deadline_for(events, default))
    return getattr(handler, "deadline_s", default)


async def _call(
    handler: Handler[Any], events: Sequence[BaseModel], deadline_s: float | None
) -> list[Outcome]:
    scope = asyncio.timeout(deadline_s)
    try:
        async with scope:
            outcomes = await handler.handle_batch(events)
    except TimeoutError as exc:
        if not scope.expired():
            raise  # the handler's own timeout (a client's), not the deadline
        raise HandlerDeadlineError(
            f"handler {handler.name!r} did not finish {len(events)} event(s) within {deadline_s} s"
        ) from exc
    if len(outcomes) != len(events):
        raise HandlerContractError(
            f"handler {handler.name!r} returned {len(outcomes)} outcomes for {len(events)} events"
        )
    return outcomes
