"""Faust agents around handlers: decode, call, route, dead-letter, count. No domain logic.

One agent per handler, ``concurrency=1`` (faust #606: with more, an offset can
be committed past an event still in flight), batching inside the agent with
``stream.take_events``. Events of a batch are acknowledged only when the next
batch is requested, and the producer is flushed before that, so a crash
re-delivers the batch instead of losing it (at-least-once; output ids are
deterministic, so the replay is harmless). Outputs go straight to the app's
producer without waiting for each delivery: the flush waits for all of them.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import faust
from pydantic import BaseModel

from ragsift.errors import DecodeError, RagsiftError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import DeadLetter
from ragsift.streams.app import declare_topic
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from ragsift.workers.base import Emit, Handler

__all__ = ["attach_handler"]

log = logging.getLogger(__name__)


def attach_handler(
    app: faust.App,
    handler: Handler[Any],
    *,
    prefix: str,
    metrics: Metrics,
    batch_size: int,
    within_s: float,
) -> None:
    """Register an agent on ``app`` that drives ``handler`` over its source topic."""
    source = declare_topic(app, handler.source, prefix)
    dead_letters = declare_topic(app, "deadletter", prefix)
    codecs = {name: EventCodec(spec.model) for name, spec in TOPICS.items()}
    names = {name: spec.name(prefix) for name, spec in TOPICS.items()}
    decode = EventCodec(handler.model)

    async def dead_letter(event: Any, exc: Exception, query_id: str | None = None) -> None:
        stage = exc.stage if isinstance(exc, RagsiftError) else "handler"
        if isinstance(exc, RagsiftError) and exc.query_id:
            query_id = exc.query_id
        message = event.message
        letter = DeadLetter.build(
            original=event.value if isinstance(event.value, bytes) else b"",
            stage=stage,
            error_type=type(exc).__name__,
            error=str(exc),
            worker=handler.name,
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            key=event.key if isinstance(event.key, bytes) else None,
            query_id=query_id,
        )
        metrics.dead_letters.labels(handler.name, stage).inc()
        metrics.events.labels(handler.name, "dead_letter").inc()
        log.warning(
            "dead-lettered %s[%s]@%s at %s: %s",
            message.topic,
            message.partition,
            message.offset,
            stage,
            exc,
        )
        await dead_letters.send(
            key=letter.dead_letter_id.encode(), value=codecs["deadletter"].encode(letter)
        )

    async def publish(emits: list[Emit]) -> None:
        # The producer itself, not Topic.send: its per-message future, channel
        # event and sensor calls cost more than encoding the event. The topics
        # exist (workers create the registry's topics at start), and in
        # exactly-once mode app.producer is the transaction manager either way.
        producer = await app.maybe_start_producer()
        for emit in emits:
            await producer.send(
                names[emit.topic],
                emit.key.encode(),
                codecs[emit.topic].encode(emit.event),
                partition=None,
                timestamp=None,
                headers=None,
            )

    async def run(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        # What exists when the agent starts (app, index, engines, modules) lives as
        # long as the process: take it out of the cyclic collector, whose full
        # collections otherwise rescan it every few batches.
        gc.freeze()
        # take_events is on the concrete Stream, not on the StreamT protocol.
        batches = cast(faust.Stream[bytes], stream).take_events(batch_size, within=within_s)
        async for events in batches:
            decoded: list[tuple[Any, BaseModel]] = []
            for event in events:
                try:
                    decoded.append((event, decode.decode(event.value)))
                except DecodeError as exc:
                    await dead_letter(event, exc)
            if decoded:
                metrics.batch_size.labels(handler.name).observe(len(decoded))
                try:
                    outcomes = await handler.handle_batch([m for _, m in decoded])
                except Exception as exc:
                    # A failing batch must not kill the worker or vanish: the handler
                    # failed as a whole, so each of its events is dead-lettered.
                    outcomes = [exc for _ in decoded]
                for (event, model), outcome in zip(decoded, outcomes, strict=True):
                    if isinstance(outcome, Exception):
                        await dead_letter(event, outcome, getattr(model, "query_id", None))
                        continue
                    metrics.events.labels(handler.name, "ok").inc()
                    await publish(outcome)
            # Outputs are on the broker before this batch's offsets can be committed.
            await app.producer.flush()
            yield None

    app.agent(source, name=f"ragsift.{handler.name}", concurrency=1)(run)
