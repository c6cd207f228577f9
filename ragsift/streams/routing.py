"""One batch's failure path, for both runtimes: decode, handle, emit, dead-letter, count.

The Faust agents and the in-process bus hand each batch of raw messages to a
:class:`BatchRouter`; only how a message is sent differs (a :class:`Sender`).
Per event, in order:

1. decode: any failure is a :class:`~ragsift.errors.DecodeError` (stage ``decode``);
   on a topic whose spec reads tombstones (the documents topic) a null value is the
   event its key stands for (:mod:`~ragsift.streams.tombstones`: the delete of the
   document it names), or passed over and counted when its key names none, and a
   refused record withdraws the document its key names (:meth:`BatchRouter._withdraw`);
2. handle: :func:`~ragsift.streams.isolation.handle_isolated` keeps a failure
   (or an overrun deadline) with the event that caused it;
3. emit the event's outputs: one that cannot be sent fails its event (stage ``emit``);
4. a failed event becomes a dead letter, counted; the batch goes on.

Nothing one event does escapes :meth:`BatchRouter.process`. A dead letter that
cannot be published is retried with backoff, then sent without the original,
then dropped and counted (``ragsift_dead_letters_dropped_total``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from ragsift.errors import DecodeError, InvalidEventError, RagsiftError, shown_value
from ragsift.observability.metrics import Metrics
from ragsift.schemas import DeadLetter
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.streams.codec import EventCodec
from ragsift.streams.isolation import EmitFailedError, failure_stage, handle_isolated
from ragsift.streams.tombstones import TOMBSTONE_SKIPPED
from ragsift.streams.topics import TOPICS
from ragsift.streams.unreadable import UnreadableRecordsError
from ragsift.workers.base import Emit, Handler

__all__ = ["BatchRouter", "Received", "Sender", "agent_name"]

log = logging.getLogger(__name__)

#: Full-letter attempts before the minimal letter: a broker hiccup passes in a
#: few seconds; a letter refused for its size fails at once every time.
DEAD_LETTER_ATTEMPTS = 3
#: First pause between attempts, doubled after each (0.5 s, 1 s).
DEAD_LETTER_BACKOFF_S = 0.5
#: How long one attempt waits for the broker's acknowledgement: long enough to
#: ride out a broker restart, bounded so a lost broker cannot stall the agent.
DEAD_LETTER_DELIVERY_TIMEOUT_S = 30.0


def agent_name(handler: Handler[Any]) -> str:
    """The name of a handler's consuming loop on /readyz (``ragsift.retrieval``)."""
    return f"ragsift.{handler.name}"


@dataclass(frozen=True, slots=True)
class Received:
    """One raw message as consumed: value and key bytes, and where it was read."""

    value: bytes | None
    key: bytes | None
    topic: str
    partition: int | None
    offset: int | None


class Sender(Protocol):
    """How a runtime publishes to a logical topic (``retrievals``, ``deadletter``...)."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """Queue a message; delivery is awaited later (the runtime's flush)."""
        ...

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        """Publish a message and wait until the broker has it; raise if it does not."""
        ...


#: The topic a dead letter names for a message read from no Kafka topic.
NO_TOPIC = "(none)"
#: Characters of a mismatched record key a dead letter's reason shows.
SHOWN_KEY_CHARS = 200


def _named(event: BaseModel | None, field: str) -> Any:
    """``event``'s ``field`` (``tenant_id``, ``query_id``), or its ``data``'s: evidence
    keeps them there (CloudEvents), and its letters named neither, so ``ragsift
    deadletters --tenant`` never took a tenant's refused evidence."""
    data = getattr(event, "data", None)
    return getattr(event, field, getattr(data, field, None))


class BatchRouter:
    """Drives one handler over batches of raw messages (see the module docstring).

    Args:
        handler: the processing step.
        sender: where outputs and dead letters go.
        metrics: where outcomes, drops and retries are counted.
        deadline_s: total time one handler call may take.
        max_original_bytes: bytes of a failed message a dead letter keeps.
    """

    def __init__(
        self,
        handler: Handler[Any],
        sender: Sender,
        *,
        metrics: Metrics,
        deadline_s: float,
        max_original_bytes: int = DEFAULT_MAX_ORIGINAL_BYTES,
    ):
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        if max_original_bytes < 0:
            raise ValueError(f"max_original_bytes must be >= 0, got {max_original_bytes}")
        if handler.source not in TOPICS:
            raise ValueError(f"handler {handler.name!r} consumes unknown topic {handler.source!r}")
        self.handler = handler
        self.sender = sender
        self.metrics = metrics
        self.deadline_s = deadline_s
        self.max_original_bytes = max_original_bytes
        self._decode = EventCodec(handler.model)
        # On a compacted topic a null value is a tombstone, not a broken message, and
        # the key is what compaction keeps: it must name the event (_mismatched_key).
        spec = TOPICS[handler.source]
        self._tombstone = spec.tombstone
        self._compacted = spec if spec.cleanup_policy == "compact" else None
        self._codecs = {name: EventCodec(spec.model) for name, spec in TOPICS.items()}

    async def process(self, batch: Sequence[Received]) -> None:
        """Decode, handle and route every message of ``batch``; never raises for one."""
        name = self.handler.name
        decoded: list[tuple[Received, BaseModel]] = []
        withdrawals: set[int] = set()  # ids of the messages whose delete is a withdrawal
        for message in batch:
            if message.value is None and self._tombstone is not None:
                deleted = self._tombstone(message.key)
                if deleted is None:
                    # The key is the producer's: shown cut, as every value an error names.
                    log.warning(
                        "passed over a tombstone whose key names nothing: %s",
                        shown_value(message.key),
                    )
                    self.metrics.events.labels(name, TOMBSTONE_SKIPPED).inc()
                else:
                    decoded.append((message, deleted))
                continue
            try:
                event = self._decode.decode(message.value)
            except DecodeError as exc:
                await self.dead_letter(message, exc)
                self._withdraw(message, decoded, withdrawals)
                continue
            mismatch = self._mismatched_key(message.key, event)
            if mismatch is not None:
                await self.dead_letter(message, mismatch, event)
                self._withdraw(message, decoded, withdrawals)
                continue
            decoded.append((message, event))
        if not decoded:
            return
        self.metrics.batch_size.labels(name).observe(len(decoded))
        outcomes = await handle_isolated(
            self.handler,
            [event for _, event in decoded],
            deadline_s=self.deadline_s,
            metrics=self.metrics,
        )
        for (message, event), outcome in zip(decoded, outcomes, strict=True):
            query_id = getattr(event, "query_id", None)
            if isinstance(outcome, Exception):
                await self.dead_letter(message, outcome, event)
                continue
            try:
                await self._emit(outcome)
            except Exception as exc:
                failure = EmitFailedError(
                    f"could not publish an output ({type(exc).__name__}: {exc})",
                    query_id=query_id,
                )
                await self.dead_letter(message, failure, event)
                continue
            if id(message) in withdrawals:  # its dead letter counted the event
                self.metrics.documents_withdrawn.labels(name).inc()
            else:
                self.metrics.events.labels(name, "ok").inc()

    def _withdraw(
        self,
        message: Received,
        decoded: list[tuple[Received, BaseModel]],
        withdrawals: set[int],
    ) -> None:
        """On a topic that reads tombstones (the compacted documents topic): a refused
        record withdraws the document its key names, as a tombstone would.

        Compaction keeps a key's last record, and this one is refused: an indexer
        rebuilt from the topic (a new replica) has no version of that document. The
        live index kept the version before, so replicas answered from different
        corpora. Withdrawn, every index agrees with the topic; the dead letter says
        why, and sending a valid version restores the document. A key that names no
        document (``doc_id`` alone, written before the topic was keyed by tenant and
        collection) withdraws nothing, as such a tombstone deletes nothing.
        """
        if self._tombstone is None:
            return
        delete = self._tombstone(message.key)
        if delete is not None:
            decoded.append((message, delete))
            withdrawals.add(id(message))

    def _mismatched_key(self, key: bytes | None, event: BaseModel) -> InvalidEventError | None:
        """On a compacted topic, a record whose key names another event than its body:
        compaction keeps the last record per key, so such a record would take another
        document's place in a rebuild while the live index kept both. Refused, it
        withdraws the document its key names (:meth:`_withdraw`). A key of the
        ``doc_id`` alone (as the topic was keyed before 2026-11-30) is refused too:
        two tenants' documents of one id shared it, and compaction kept only the
        last of them (helper-23, 2026-12-02)."""
        spec = self._compacted
        if spec is None:
            return None
        wanted = spec.key_of(event)
        got = key.decode("utf-8", "replace") if key is not None else None
        if got == wanted:
            return None
        shown = got if got is None or len(got) <= SHOWN_KEY_CHARS else got[:SHOWN_KEY_CHARS] + "…"
        remedy = (
            ": the doc id alone names no tenant, so another tenant's document of that id"
            " would replace it; publish it again with `ragsift submit`, which keys it so"
            if got is not None and got == getattr(event, "doc_id", None)
            else ": on a compacted topic it would replace the record of another key's event"
        )
        return InvalidEventError(  # a key of any length leaves the reason readable
            f"the record's key {shown!r} is not its event's {wanted!r} ({spec.key_name})" + remedy
        )

    async def _emit(self, emits: list[Emit]) -> None:
        for emit in emits:
            value = self._codecs[emit.topic].encode(emit.event)
            await self.sender.send(emit.topic, emit.key.encode(), value)

    def decoded(self, message: Received) -> BaseModel | None:
        """``message``'s event, or None when it has none that decodes (a tombstone too)."""
        if message.value is None:
            return None
        try:
            return self._decode.decode(message.value)
        except DecodeError:
            return None

    async def dead_letter(
        self, message: Received, exc: Exception, event: BaseModel | None = None
    ) -> None:
        """Publish (or, failing that, count the drop of) a dead letter for ``message``;
        ``event``, when it decoded, names the letter's query and tenant."""
        name = self.handler.name
        stage = failure_stage(exc)
        query_id = _named(event, "query_id")
        if isinstance(exc, RagsiftError) and exc.query_id:
            query_id = exc.query_id
        try:
            letter = DeadLetter.build(
                original=message.value or b"",
                stage=stage,
                error_type=type(exc).__name__,
                error=str(exc),
                worker=name,
                # A message of a channel that is not a Kafka topic (Faust's in-memory
                # channels) has none: the letter failed to build and escaped process().
                topic=message.topic or NO_TOPIC,
                partition=message.partition,
                offset=message.offset,
                key=message.key,
                query_id=query_id,
                tenant_id=_named(event, "tenant_id"),
                max_original_bytes=self.max_original_bytes,
            )
        except (ValueError, TypeError) as build_error:  # ValidationError is a ValueError
            self.metrics.dead_letters_dropped.labels(name).inc()
            log.error("dropped a dead letter that could not be built: %.500s", build_error)
            return
        self.metrics.dead_letters.labels(name, stage).inc()
        # One letter for a span the Kafka client could not read, whose every record is
        # an event not processed: counted one, whatever the span. Offsets are records
        # on a topic that is not compacted (ragsift writes no transaction markers); on
        # a compacted one a span may cross a gap of millions, so it stays one there.
        lost = 1
        if isinstance(exc, UnreadableRecordsError) and self._compacted is None:
            lost = max(exc.end - exc.first, 1)
        self.metrics.events.labels(name, "dead_letter").inc(lost)
        log.warning(
            "dead-lettered %s[%s]@%s at %s: %.500s",
            message.topic,
            message.partition,
            message.offset,
            stage,
            exc,
        )
        await self._send_dead_letter(letter)

    async def _send_dead_letter(self, letter: DeadLetter) -> None:
        name = self.handler.name
        key = letter.dead_letter_id.encode()
        codec = self._codecs["deadletter"]
        attempts = [("full", letter)] * DEAD_LETTER_ATTEMPTS + [("minimal", letter.minimal())]
        pause = DEAD_LETTER_BACKOFF_S
        for n, (kind, candidate) in enumerate(attempts, start=1):
            try:
                await self.sender.send_and_wait(
                    "deadletter", key, codec.encode(candidate), DEAD_LETTER_DELIVERY_TIMEOUT_S
                )
                return
            except Exception as exc:
                self.metrics.dead_letter_send_failures.labels(name, kind).inc()
                log.warning(
                    "dead letter %s (%s) not published, attempt %d/%d: %s: %.300s",
                    letter.dead_letter_id,
                    kind,
                    n,
                    len(attempts),
                    type(exc).__name__,
                    exc,
                )
            if n < DEAD_LETTER_ATTEMPTS:
                await asyncio.sleep(pause)
                pause *= 2
        self.metrics.dead_letters_dropped.labels(name).inc()
        log.error(
            "dropped dead letter %s: %s[%s]@%s, %s bytes, sha256 %s",
            letter.dead_letter_id,
            letter.topic,
            letter.partition,
            letter.offset,
            letter.original_length,
            letter.original_sha256,
        )
