"""The calibration worker: feedback labels in, per-tenant calibrations out (X2).

Two handlers share one :class:`~ragsift.workers.feedback_loop.FeedbackLoop`:

* :class:`ResultJoinHandler` consumes ``ragsift.retrievals.v1`` and remembers each
  scored result's signals by query id for the join window (``RAGSIFT_FEEDBACK_JOIN_TTL_S``);
* :class:`FeedbackHandler` consumes ``ragsift.feedback.v1``, joins each label to
  its result and, once a scope (tenant, collection) has enough labels, re-fits
  its calibration (:mod:`ragsift.workers.scope_refit`) and puts it in the
  registry's store, where every worker picks it up.

What a label does, and why feedback is refused, is the loop's
(:mod:`ragsift.workers.feedback_loop`); these handlers wait out a store that does
not answer and route what is refused to the dead letters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import ClassVar

from pydantic import BaseModel

from ragsift.retrieval.redis_replies import RedisRefusedError
from ragsift.schemas import FeedbackEvent, RetrievalResult
from ragsift.workers.base import Outcome
from ragsift.workers.feedback_loop import FeedbackLoop, FeedbackRefused
from ragsift.workers.held import Hold, Holds, until_available

__all__ = ["FeedbackHandler", "FeedbackLoop", "FeedbackRefused", "ResultJoinHandler"]

Sleep = Callable[[float], Awaitable[None]]


class ResultJoinHandler(Holds):
    """Remembers scored results so later feedback can be joined to them."""

    name = "calibration-results"
    source = "retrievals"
    #: No deadline: a store that does not answer is waited out (ragsift.workers.held).
    deadline_s: ClassVar[float | None] = None

    def __init__(self, loop: FeedbackLoop, *, sleep: Sleep = asyncio.sleep):
        self.loop = loop
        self._sleep = sleep
        self.hold = Hold()

    @property
    def model(self) -> type[BaseModel]:
        """Retrieval results in."""
        return RetrievalResult

    async def handle_batch(self, events: Sequence[RetrievalResult]) -> list[Outcome]:
        """Remember the batch in one round trip, waiting out a store that does not answer;
        refused for good (a key of the wrong type), each alone: only that one is dead-lettered."""
        outcome = await self._remember(list(events))
        if isinstance(outcome, RedisRefusedError) and len(events) > 1:
            return [await self._remember([event]) for event in events]
        return [outcome for _ in events]  # the store is unusable: every event fails alike

    async def _remember(self, events: list[RetrievalResult]) -> Outcome:
        try:
            await until_available(
                partial(asyncio.to_thread, self.loop.remember, events),
                what=f"{self.name}: remembering {len(events)} result(s)",
                sleep=self._sleep,
                hold=self.hold,
            )
        except Exception as exc:
            return exc
        return []

    async def close(self) -> None:
        """Nothing held (the store is closed by its owner)."""


class FeedbackHandler(Holds):
    """Labels in; re-fit calibrations go to the registry's store (nothing is emitted)."""

    name = "calibration"
    source = "feedback"
    #: Read after the results it joins to, where the runtime can (the plain loop's
    #: ``follows``): a label read before its result was refused as an unknown query.
    follows = "retrievals"
    #: No deadline: a store that does not answer is waited out (ragsift.workers.held).
    deadline_s: ClassVar[float | None] = None

    def __init__(self, loop: FeedbackLoop, *, sleep: Sleep = asyncio.sleep):
        self.loop = loop
        self._sleep = sleep
        self.hold = Hold()

    @property
    def model(self) -> type[BaseModel]:
        """Feedback events in."""
        return FeedbackEvent

    async def handle_batch(self, events: Sequence[FeedbackEvent]) -> list[Outcome]:
        """Apply each label in order, waiting out a store that does not answer; a
        refused one is returned as its exception."""
        out: list[Outcome] = []
        for event in events:
            try:
                await until_available(
                    partial(asyncio.to_thread, self.loop.apply, event),
                    what=f"{self.name}: label for {event.query_id!r}",
                    sleep=self._sleep,
                    hold=self.hold,
                )
            except Exception as exc:  # refused, or an unusable store: dead-letter this one
                out.append(exc)
                continue
            out.append([])
        return out

    async def close(self) -> None:
        """Nothing held."""
