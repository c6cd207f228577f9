"""The embedded runtime's event bus: the same handlers, in one process, no Kafka.

Events travel as bytes through the same codec the Faust agents use, so a
payload that would be dead-lettered in production is dead-lettered here too.
Every published event is recorded (the caller reads results, reports and dead
letters there) and queued for each handler of its topic, drained in batches.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ragsift.errors import DecodeError, RagsiftError
from ragsift.observability.metrics import Metrics
from ragsift.schemas import DeadLetter
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS
from ragsift.workers.base import Emit, Handler

__all__ = ["InProcessBus"]


class InProcessBus:
    """Routes events between handlers in-process.

    Args:
        handlers: each consumes its source topic on its own (like separate consumer
            groups): two handlers of one topic both see every event.
        metrics: where drops and batch sizes are counted.
        batch_size: most events handed to a handler at once (like ``stream.take``).
        prefix: topic name prefix, for dead letters' ``topic`` field.
    """

    def __init__(
        self,
        handlers: Sequence[Handler[Any]],
        *,
        metrics: Metrics,
        batch_size: int = 64,
        prefix: str = "ragsift",
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._handlers: dict[str, list[Handler[Any]]] = defaultdict(list)
        names: set[str] = set()
        for handler in handlers:
            if handler.name in names:
                raise ValueError(f"two handlers are named {handler.name!r}")
            if handler.source not in TOPICS:
                raise ValueError(
                    f"handler {handler.name!r} consumes unknown topic {handler.source!r}"
                )
            names.add(handler.name)
            self._handlers[handler.source].append(handler)
        self.metrics = metrics
        self.batch_size = batch_size
        self.prefix = prefix
        self._queues: dict[tuple[str, str], deque[tuple[str, bytes, int]]] = defaultdict(deque)
        self._offsets: dict[str, int] = defaultdict(int)
        self._codecs = {name: EventCodec(spec.model) for name, spec in TOPICS.items()}
        self.published: dict[str, list[BaseModel]] = defaultdict(list)
        self._lock = asyncio.Lock()

    async def publish(self, topic: str, key: str, event: BaseModel | bytes) -> None:
        """Put one event (a model, or raw bytes as a producer would send) on a topic."""
        if topic not in TOPICS:
            raise ValueError(f"unknown topic {topic!r}; known: {sorted(TOPICS)}")
        raw = event if isinstance(event, bytes) else self._codecs[topic].encode(event)
        offset = self._offsets[topic]
        self._offsets[topic] += 1
        handlers = self._handlers.get(topic, [])
        for handler in handlers:
            self._queues[(topic, handler.name)].append((key, raw, offset))
        try:
            self.published[topic].append(self._codecs[topic].decode(raw))
        except DecodeError:
            if not handlers:
                raise  # nobody would dead-letter it: the publisher must hear about it
            # else each handler dead-letters it when it reads it

    async def drain(self) -> None:
        """Run handlers until every queue is empty (outputs may feed other handlers)."""
        async with self._lock:
            while any(self._queues.values()):
                for (topic, name), queue in list(self._queues.items()):
                    handler = next(h for h in self._handlers[topic] if h.name == name)
                    while queue:
                        batch = [queue.popleft() for _ in range(min(self.batch_size, len(queue)))]
                        await self._run(handler, topic, batch)

    async def close(self) -> None:
        """Close every handler."""
        for handlers in self._handlers.values():
            for handler in handlers:
                await handler.close()

    async def _run(
        self, handler: Handler[Any], topic: str, batch: list[tuple[str, bytes, int]]
    ) -> None:
        codec = self._codecs[topic]
        decoded: list[tuple[int, Any]] = []
        for key, raw, offset in batch:
            try:
                decoded.append((offset, codec.decode(raw)))
            except DecodeError as exc:
                await self._dead_letter(handler, topic, raw, offset, exc, key)
        if not decoded:
            return
        self.metrics.batch_size.labels(handler.name).observe(len(decoded))
        outcomes = await handler.handle_batch([event for _, event in decoded])
        if len(outcomes) != len(decoded):
            raise RuntimeError(
                f"handler {handler.name!r} returned {len(outcomes)} outcomes for"
                f" {len(decoded)} events"
            )
        raw_by_offset = {offset: (key, raw) for key, raw, offset in batch}
        for (offset, event), outcome in zip(decoded, outcomes, strict=True):
            if isinstance(outcome, Exception):
                key, raw = raw_by_offset[offset]
                await self._dead_letter(
                    handler, topic, raw, offset, outcome, key, getattr(event, "query_id", None)
                )
                continue
            self.metrics.events.labels(handler.name, "ok").inc()
            for emit in outcome:
                await self._emit(emit)

    async def _emit(self, emit: Emit) -> None:
        await self.publish(emit.topic, emit.key, emit.event)

    async def _dead_letter(
        self,
        handler: Handler[Any],
        topic: str,
        raw: bytes,
        offset: int,
        exc: Exception,
        key: str,
        query_id: str | None = None,
    ) -> None:
        stage = exc.stage if isinstance(exc, RagsiftError) else "handler"
        if isinstance(exc, RagsiftError) and exc.query_id:
            query_id = exc.query_id
        letter = DeadLetter.build(
            original=raw,
            stage=stage,
            error_type=type(exc).__name__,
            error=str(exc),
            worker=handler.name,
            topic=TOPICS[topic].name(self.prefix),
            partition=0,
            offset=offset,
            key=key.encode(),
            query_id=query_id,
        )
        self.metrics.dead_letters.labels(handler.name, stage).inc()
        self.metrics.events.labels(handler.name, "dead_letter").inc()
        await self.publish("deadletter", letter.dead_letter_id, letter)
