"""The embedded runtime's event bus: the same handlers, in one process, no Kafka.

Events travel as bytes through the same codec the Faust agents use, so a
payload that would be dead-lettered in production is dead-lettered here too.
Every published event is handed to the bus's listeners (the embedded runtime
collects results, reports and dead letters that way), remembered in a bounded
per-topic window (``published``: a long-running process does not grow), and
queued for each handler of its topic, drained in batches.
Batches go through the same :class:`~ragsift.streams.routing.BatchRouter` as the
agents': a handler call has a deadline, a failing batch is retried event by
event, and only the events that fail on their own are dead-lettered.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any, SupportsIndex

from pydantic import BaseModel

from ragsift.errors import DecodeError
from ragsift.observability.metrics import Metrics
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.streams.codec import EventCodec
from ragsift.streams.routing import BatchRouter, Received
from ragsift.streams.topics import TOPICS
from ragsift.workers.base import Handler

__all__ = ["DEFAULT_RECENT_EVENTS", "InProcessBus", "Listener", "RecentWindow"]

#: events remembered per topic when no bound is given (RuntimeSettings' default)
DEFAULT_RECENT_EVENTS = 1_024
#: called with (logical topic, decoded event) for every event published on the bus
Listener = Callable[[str, BaseModel], None]


class RecentWindow(list[BaseModel]):
    """A list that keeps only its last ``maxlen`` items: the bus's per-topic memory."""

    def __init__(self, maxlen: int):
        if maxlen < 1:
            raise ValueError(f"maxlen must be >= 1, got {maxlen}")
        super().__init__()
        self.maxlen = maxlen

    def append(self, item: BaseModel, /) -> None:
        """Append, forgetting the oldest item past ``maxlen``."""
        super().append(item)
        if len(self) > self.maxlen:
            del self[0]

    def insert(self, index: SupportsIndex, item: BaseModel, /) -> None:
        """Not supported: the window only grows at its end."""
        raise TypeError("RecentWindow only appends")


class InProcessBus:
    """Routes events between handlers in-process.

    Args:
        handlers: each consumes its source topic on its own (like separate consumer
            groups): two handlers of one topic both see every event.
        metrics: where drops and batch sizes are counted.
        batch_size: most events handed to a handler at once (like ``stream.take``).
        prefix: topic name prefix, for dead letters' ``topic`` field.
        deadline_s: total time one handler call may take (an event that overruns it
            alone is dead-lettered with stage ``deadline``).
        max_original_bytes: bytes of a failed event a dead letter keeps.
        recent_events: events ``published`` remembers per topic (older ones are
            forgotten; listeners see every event as it is published).
    """

    #: a handler call's deadline when none is given (LimitSettings' default)
    DEFAULT_DEADLINE_S = 30.0

    def __init__(
        self,
        handlers: Sequence[Handler[Any]],
        *,
        metrics: Metrics,
        batch_size: int = 64,
        prefix: str = "ragsift",
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_original_bytes: int = DEFAULT_MAX_ORIGINAL_BYTES,
        recent_events: int = DEFAULT_RECENT_EVENTS,
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
        if recent_events < 1:
            raise ValueError(f"recent_events must be >= 1, got {recent_events}")
        self.published: dict[str, RecentWindow] = defaultdict(lambda: RecentWindow(recent_events))
        self._listeners: list[Listener] = []
        sender = _BusSender(self)
        self._routers = {
            handler.name: BatchRouter(
                handler,
                sender,
                metrics=metrics,
                deadline_s=deadline_s,
                max_original_bytes=max_original_bytes,
            )
            for handler in handlers
        }
        self._lock = asyncio.Lock()

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every event published from now on; returns its unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def queued(self) -> int:
        """Events waiting for a handler (0 once drained)."""
        return sum(len(queue) for queue in self._queues.values())

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
            decoded = self._codecs[topic].decode(raw)
        except DecodeError:
            if not handlers:
                raise  # nobody would dead-letter it: the publisher must hear about it
            return  # else each handler dead-letters it when it reads it
        self.published[topic].append(decoded)
        for listener in list(self._listeners):
            listener(topic, decoded)

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
        name = TOPICS[topic].name(self.prefix)
        await self._routers[handler.name].process(
            [Received(raw, key.encode(), name, 0, offset) for key, raw, offset in batch]
        )


class _BusSender:
    """Publishing for the routers: straight onto the bus, delivered at once."""

    def __init__(self, bus: InProcessBus):
        self.bus = bus

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.bus.publish(topic, key.decode("utf-8", "replace"), value)

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        await self.send(topic, key, value)
