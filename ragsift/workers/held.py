"""Waiting out a service that does not answer, instead of dead-lettering good events.

A valid event whose store is down (Redis paused, restarting, failing over) is not
bad input: dead-lettering it loses it (a result the feedback join never saw, so
its label was refused later). A handler that writes to such a store retries the
write here, holding its batch: the runtime reads nothing more meanwhile, and
nothing is committed, so the wait is back-pressure, like the audit sink's on a
failing disk. Such a handler has no deadline (``deadline_s = None``), which would
turn the wait into dead letters.

While it holds, the handler is ``stalled`` (its :class:`Hold` says so): /readyz
answers 503 naming it. A worker hosting several handlers holds all of them with
the batch (one loop), so a retrieval hosted next to a holding indexer answers
nothing meanwhile: its readiness must not say otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from ragsift.errors import ServiceUnavailableError
from ragsift.workers.audit import Backoff

__all__ = ["HELD_CHECK_S", "STORE_BACKOFF", "Hold", "Holds", "holding", "until_available"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Waits between tries: short at the most, so the backlog moves soon after the store is back.
STORE_BACKOFF = Backoff(initial_s=0.25, max_s=2.0)
#: How often a runtime stopping with a batch in flight checks whether a handler holds it.
HELD_CHECK_S = 0.25


class Hold:
    """Whether a handler is holding its batch for a store (what its ``stalled`` reports)."""

    def __init__(self) -> None:
        self.holding = 0

    @property
    def active(self) -> bool:
        """True while some wait of :func:`until_available` with this hold goes on."""
        return self.holding > 0


class Holds:
    """A handler that holds its batch for a store: ``stalled`` while it does."""

    hold: Hold

    @property
    def stalled(self) -> bool:
        """True while a batch is held for the store (/readyz answers 503)."""
        return self.hold.active


def holding(handlers: Iterable[object]) -> bool:
    """True while one of ``handlers`` holds its batch for a store (its ``stalled``): a
    runtime stopping meanwhile gives the batch up, uncommitted, instead of waiting."""
    return any(getattr(handler, "stalled", False) for handler in handlers)


async def until_available(
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    backoff: Backoff = STORE_BACKOFF,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    hold: Hold | None = None,
) -> T:
    """``op()``, tried again after each :class:`ServiceUnavailableError` until it
    answers; any other error is raised at once (it is the event's). ``hold`` is active
    from the first refusal until the op answers (or the wait ends otherwise)."""
    attempt, since = 0, time.monotonic()
    try:
        while True:
            try:
                done = await op()
            except ServiceUnavailableError as exc:
                attempt += 1
                if attempt == 1:
                    log.error(
                        "%s: %s; holding the batch and retrying, nothing is dropped", what, exc
                    )
                    if hold is not None:
                        hold.holding += 1
                await sleep(backoff.delay(attempt))
                continue
            break
    finally:
        if attempt and hold is not None:
            hold.holding -= 1
    if attempt:
        log.warning(
            "%s: done after %d tries (%.1f s held)", what, attempt + 1, time.monotonic() - since
        )
    return done
