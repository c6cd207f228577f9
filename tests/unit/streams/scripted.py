"""A scripted handler and a recording sender, for driving both runtimes without Kafka."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.schemas import DeadLetter, FeedbackEvent, QueryEvent
from ragsift.streams.codec import EventCodec
from ragsift.workers.base import Emit, Outcome

# Long enough that only the deadline can end it; the tests' deadlines are far shorter.
HANG_S = 3600.0
# Longer than the tests' deadlines, short enough to wait for.
SLOW_S = 0.5


class ScriptedHandler:
    """Consumes ``queries``; emits one feedback event per query (same query id).

    What it does depends on the query text, and on the whole batch, like a
    handler bug would: a ``crash`` query makes the batch call raise, ``recurse``
    raise RecursionError, ``hang`` never return, ``slow`` take SLOW_S.
    """

    name = "scripted"
    source = "queries"
    #: where outputs go: a topic no handler of these tests consumes
    OUT_TOPIC = "feedback"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @property
    def model(self) -> type[BaseModel]:
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        self.calls.append([e.query_id for e in events])
        texts = {e.query for e in events}
        if "crash" in texts:
            raise RuntimeError("handler bug triggered by one input")
        if "recurse" in texts:
            raise RecursionError("maximum recursion depth exceeded")
        if "hang" in texts:
            await asyncio.sleep(HANG_S)
        if "slow" in texts:
            await asyncio.sleep(SLOW_S)
        return [[Emit(self.OUT_TOPIC, e.query_id, feedback(e))] for e in events]

    async def close(self) -> None:
        return None


def feedback(event: QueryEvent) -> FeedbackEvent:
    return FeedbackEvent(
        event_id=event.query_id, query_id=event.query_id, tenant_id=event.tenant_id, relevant=True
    )


def query(query_id: str, text: str = "what is the refund policy?") -> QueryEvent:
    return QueryEvent(query_id=query_id, tenant_id="acme", query=text)


def raw(query_id: str, text: str = "what is the refund policy?") -> bytes:
    return EventCodec(QueryEvent).encode(query(query_id, text))


def nested_brackets() -> bytes:
    return b"[" * 5000 + b"]" * 5000


def long_integer() -> bytes:
    return b'{"query_id": "digits", "tenant_id": "acme", "query": "x", "k": ' + b"9" * 5000 + b"}"


def huge_query(size: int = 950_000) -> bytes:
    return json.dumps({"query_id": "huge", "tenant_id": "acme", "query": "y" * size}).encode()


class RecordingSender:
    """A broker stand-in: records what is sent; refuses what a rule says it must."""

    def __init__(self, max_message_bytes: int = 1_000_000, fail_dead_letters: int = 0):
        self.max_message_bytes = max_message_bytes
        self.fail_dead_letters = fail_dead_letters  # the first N dead-letter sends fail
        self.fail_outputs_for: set[bytes] = set()  # output keys whose send fails
        self.sent: list[tuple[str, bytes, bytes]] = []

    def _check(self, topic: str, key: bytes, value: bytes) -> None:
        if len(key) + len(value) > self.max_message_bytes:
            raise ValueError(f"message of {len(value)} bytes is too large")
        if topic != "deadletter" and key in self.fail_outputs_for:
            raise ConnectionError(f"cannot send {key!r}")

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self._check(topic, key, value)
        self.sent.append((topic, key, value))

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        if topic == "deadletter" and self.fail_dead_letters > 0:
            self.fail_dead_letters -= 1
            raise TimeoutError("no acknowledgement")
        await self.send(topic, key, value)

    def on(self, topic: str) -> list[bytes]:
        return [value for t, _, value in self.sent if t == topic]

    def dead_letters(self) -> list[DeadLetter]:
        codec = EventCodec(DeadLetter)
        return [codec.decode(value) for value in self.on("deadletter")]

    def output_ids(self) -> list[str]:
        codec = EventCodec(FeedbackEvent)
        return [codec.decode(value).query_id for value in self.on(ScriptedHandler.OUT_TOPIC)]


def record_key(logical: str, value: bytes | None, default: bytes | None) -> bytes | None:
    """The key a producer writes ``value`` under on topic ``logical`` where the topic is
    compacted and the value an event (the router refuses another key there); else
    ``default``, as a test feeds any key to any other record."""
    from ragsift.errors import DecodeError
    from ragsift.streams.codec import EventCodec
    from ragsift.streams.topics import TOPICS

    spec = TOPICS[logical]
    if spec.cleanup_policy != "compact" or value is None:
        return default
    try:
        return spec.key_of(EventCodec(spec.model).decode(value)).encode()
    except DecodeError:
        return default
