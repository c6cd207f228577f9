"""Adaptive batches for the agents: take what has arrived and go, wait only while more is coming.

Faust's ``Stream.take_events(max_, within)`` hands over a batch when it holds
``max_`` events or when a timer of ``within`` seconds fires, and the timer
runs from the last batch, not from the first event: on an idle stream a lone
query waits for the tick (up to ``RAGSIFT_LIMITS_BATCH_TIMEOUT_S``, 50 ms),
which was most of one worker's latency floor (docs/benchmarks.md, "The
latency floor"). :class:`AdaptiveStream` keeps that method's contract (at
most ``max_`` events, acknowledged only when the next batch is requested)
and adds one rule: a batch also goes as soon as the events already delivered
to the stream are all in it. Under load the queue behind the batch is not
empty, so batches still fill up to ``max_`` (smart batching: their size
follows the load); idle, an event goes at once. ``within`` stays the bound
on how long a partial batch waits.

A batch its caller leaves unfinished is never acknowledged, so no offset past it
is committed: the agent cancelled at stop after the stop gave up a batch held for
a store (the next member of the group reads it again), or an agent that left its
loop by an error. Faust's own method acknowledged such a batch when the generator
was closed, and the consumer committed it (the events lost).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any, cast

import faust
from faust.streams import _tracks_buffer_agen
from faust.types import ChannelT, EventT
from mode import Seconds, want_seconds
from mode.utils.aiter import aiter
from mode.utils.futures import notify

__all__ = ["AdaptiveStream"]


class AdaptiveStream(faust.Stream[Any]):
    """A Faust stream whose ``take_events`` goes as soon as nothing more is waiting.

    Installed as the app's stream class (``Stream=`` in
    :func:`ragsift.streams.app.create_app`), so every agent's
    ``stream.take_events`` gets it.
    """

    # Registered like Faust's own take methods, so Stream.on_stop closes it.
    @_tracks_buffer_agen
    async def take_events(
        self, max_: int, within: Seconds
    ) -> AsyncGenerator[Sequence[EventT], None]:
        """Yield lists of up to ``max_`` events: full, drained, or ``within`` after the last."""
        if max_ < 1:
            raise ValueError(f"max_ must be >= 1, got {max_}")
        events: list[EventT] = []
        ready = asyncio.Event()  # a batch can go: full, or nothing more queued
        consumed = asyncio.Event()  # the full batch was handed over: add more
        handing_over: asyncio.Future[None] | None = None
        timeout = want_seconds(within) if within else None
        queue = self.channel.queue if isinstance(self.channel, ChannelT) else None
        enable_acks = self.enable_acks

        async def add_to_batch(value: Any) -> Any:
            nonlocal handing_over
            if handing_over is not None:
                # The batch is being handed over: this event belongs to the next one.
                try:
                    await handing_over
                finally:
                    handing_over = None
            event = self.current_event
            if event is None:
                raise RuntimeError("take_events found current_event is None")
            events.append(event)
            if len(events) >= max_:
                ready.set()
                consumed.clear()
                # Never more than max_: the next event waits until this batch is taken.
                await self.wait(cast(Any, consumed))
            elif queue is not None and queue.empty():
                # Nothing more delivered to this stream yet: waiting would only delay.
                ready.set()
            return value

        # Events are acknowledged here, after the caller has finished with their batch.
        self.enable_acks = False
        self.add_processor(add_to_batch)
        self._enable_passive(cast(ChannelT, aiter(self.channel)))
        try:
            while not self.should_stop:
                # mode types these as its own Event and a non-None Seconds; it takes
                # asyncio.Event and None ("no timeout") alike, as Faust's take_events does.
                await self.wait_for_stopped(cast(Any, ready), timeout=cast(Any, timeout))
                if events:
                    handing_over = self.loop.create_future()
                    finished = False
                    try:
                        yield list(events)
                        finished = True  # the caller is back for the next batch
                    finally:
                        taken = list(events)
                        events.clear()
                        # Faust acknowledges a batch its caller left too (closing this
                        # generator): a batch given up at stop while a handler held it
                        # (ragsift.streams.app), or left by an agent that failed; once
                        # acknowledged it was committed, its events lost.
                        if finished:
                            for event in taken:
                                await self.ack(event)
                        notify(handing_over)
                        ready.clear()
                        consumed.set()
        finally:
            self.enable_acks = enable_acks
            self._processors.remove(add_to_batch)
