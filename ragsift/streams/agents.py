"""Faust agents around handlers: take batches, hand them to a router, flush. No domain logic.

One agent per handler, ``concurrency=1`` (faust #606: with more, an offset can
be committed past an event still in flight), batching inside the agent with
``stream.take_events``. Each batch goes through a
:class:`~ragsift.streams.routing.BatchRouter` (decode, handle with a deadline,
emit, dead-letter, count), which never raises for what one event does, so one
poison message cannot stop the agent. Events of a batch are acknowledged only
when the next batch is requested, and the producer is flushed before that, so
a crash re-delivers the batch instead of losing it (at-least-once; output ids
are deterministic, so the replay is harmless). A batch that fails as a whole
anyway (the flush raises, a bug outside event handling) runs again in the
agent, never acknowledged meanwhile, as the plain loop runs it again, and after a
few unexpected failures in a row event by event (:mod:`ragsift.streams.poison`).
Outputs go straight to the app's producer without waiting for each delivery: the
flush waits for all.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any, cast

import faust

from ragsift.gc_policy import settle as settle_gc
from ragsift.observability.metrics import Metrics
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES
from ragsift.streams.app import PagesOnlyApp, declare_topic
from ragsift.streams.loop import RETRY_INITIAL_S, RETRY_MAX_S
from ragsift.streams.poison import (
    DEFAULT_POISON_AFTER_FAILURES,
    PoisonGuard,
    TransientError,
    isolate_batch,
)
from ragsift.streams.routing import BatchRouter, Received, agent_name
from ragsift.streams.topics import TOPICS
from ragsift.workers.base import Handler

__all__ = ["AgentHealth", "attach_handler", "flush_now"]

log = logging.getLogger(__name__)
#: Between two runs of a batch whose outputs the broker did not all take.
REDELIVERY_PAUSE_S = 1.0


class AgentHealth:
    """Which agents are consuming right now; /readyz is false while one is not.

    An agent counts as running from the moment its loop starts until it leaves
    it (a crash, a cancellation, a stop). Faust restarts a crashed agent; until
    it is back, the worker is not ready.
    """

    def __init__(self) -> None:
        self._running: dict[str, bool] = {}
        self._lock = threading.Lock()

    def expect(self, name: str) -> None:
        """Register an agent that must be running for the worker to be ready."""
        with self._lock:
            self._running.setdefault(name, False)

    def set_running(self, name: str, running: bool) -> None:
        """Record that the agent's loop started (True) or ended (False)."""
        with self._lock:
            self._running[name] = running

    def not_running(self) -> list[str]:
        """Names of the expected agents that are not consuming, sorted."""
        with self._lock:
            return sorted(name for name, running in self._running.items() if not running)


class _ProducerSender:
    """Publishing for the router through the app's producer, by logical topic.

    The producer itself, not ``Topic.send``: its per-message future, channel
    event and sensor calls cost more than encoding the event. The topics exist
    (workers create the registry's topics at start), and in exactly-once mode
    ``app.producer`` is the transaction manager either way.
    """

    def __init__(self, app: faust.App, prefix: str):
        self.app = app
        self.names = {name: spec.name(prefix) for name, spec in TOPICS.items()}
        self.deliveries: list[Any] = []  # each output's future, until its batch is checked

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        producer = await self.app.maybe_start_producer()
        self.deliveries.append(
            await producer.send(
                self.names[topic], key, value, partition=None, timestamp=None, headers=None
            )
        )

    async def undelivered(self) -> list[str]:
        """Why each output sent since the last call was not taken (after a flush: each
        has its answer); empty when the broker took them all. A flush waits for the
        answers and raises none of them."""
        deliveries, self.deliveries = self.deliveries, []
        if deliveries:
            await asyncio.wait([asyncio.ensure_future(d) for d in deliveries])
        return [
            "cancelled" if d.cancelled() else repr(d.exception())
            for d in deliveries
            if d.cancelled() or d.exception() is not None
        ]

    async def send_and_wait(self, topic: str, key: bytes, value: bytes, timeout_s: float) -> None:
        producer = await self.app.maybe_start_producer()
        delivery = await producer.send(
            self.names[topic], key, value, partition=None, timestamp=None, headers=None
        )
        await asyncio.wait_for(delivery, timeout_s)


async def flush_now(producer: Any) -> None:
    """Wait until every output sent so far is on the broker, sending lingering ones now.

    aiokafka's ``flush()`` waits for its batches but leaves each one to its linger
    (``RAGSIFT_KAFKA_PRODUCER_LINGER_MS``): every batch of events paid the linger
    before its offsets could be committed, though nothing more was coming for it.
    Java's ``flush()`` sends at once; aiokafka does that only for a transaction
    (``flush_for_commit``: close the open batches, wake the sender, wait). That is
    what this uses, so the linger still gathers a batch's outputs into few
    requests and no longer delays the batch. The agents use it for a batch that
    is not full (the worker is keeping up, and latency is what the linger costs);
    a full batch, a backlog, keeps the plain flush. Faust's own flush is kept where its
    producer is not the plain aiokafka one this reads (exactly-once's transaction
    producers, another driver, or an aiokafka without that method).
    """
    inner = getattr(producer, "_producer", None)
    accumulator = getattr(inner, "_message_accumulator", None)
    flush_for_commit = getattr(accumulator, "flush_for_commit", None)
    if flush_for_commit is None or getattr(producer, "_transaction_producers", None):
        await producer.flush()
        return
    await producer.buffer.flush()  # what Faust's flush does first (its own send buffer)
    await flush_for_commit()


async def _end_worker(app: faust.App, name: str, exc: BaseException) -> None:
    """Crash the app, so the worker exits non-zero and is restarted, its batch read again.

    An agent leaves its loop with a batch in hand, unacknowledged, only by a bug (what one
    event does, and a batch that fails as a whole, stay inside it). Faust restarts such an
    agent on an ``Exception`` or a cancellation that is not its stop, behind the batch
    generator the crash keeps open, so it read nothing more; on a ``BaseException`` that is
    not one (``SystemExit`` and ``KeyboardInterrupt`` stop the event loop, and the worker,
    by themselves), it left the agent dead: either way the worker stayed up, not ready,
    its partitions held and unread, until it was restarted by hand. A restarted worker
    reads the batch again (it was never committed), as the next member of the group does.

    Had that generator been closed while a restarted agent ran, the agent would have
    acknowledged the events after the batch, and Faust 0.15.3 commits past an
    unacknowledged batch of one event at the head of a partition, or past any batch when
    nothing was committed yet (docs/reliability.md, "Faust's commit past an
    unacknowledged head"): ending the worker keeps ragsift out of that state for good.
    """
    log.critical(
        "%s: left its loop (%s: %.500s); stopping the worker: its batch is not committed,"
        " read again once the worker is restarted",
        name,
        type(exc).__name__,
        exc,
    )
    await app.crash(exc)


def attach_handler(
    app: faust.App,
    handler: Handler[Any],
    *,
    prefix: str,
    metrics: Metrics,
    batch_size: int,
    within_s: float,
    deadline_s: float,
    max_original_bytes: int = DEFAULT_MAX_ORIGINAL_BYTES,
    health: AgentHealth | None = None,
    poison_after: int = DEFAULT_POISON_AFTER_FAILURES,
) -> BatchRouter:
    """Register an agent on ``app`` that drives ``handler`` over its source topic; its
    router (which dead-letters what the consumer could not read, too)."""
    source = declare_topic(app, handler.source, prefix)
    declare_topic(app, "deadletter", prefix)
    sender = _ProducerSender(app, prefix)
    router = BatchRouter(
        handler,
        sender,
        metrics=metrics,
        deadline_s=deadline_s,
        max_original_bytes=max_original_bytes,
    )
    name = agent_name(handler)
    if health is not None:
        health.expect(name)
    poison = PoisonGuard(poison_after)  # a batch that keeps failing runs event by event
    # A stop gives up a batch its handler holds for a store, or one that keeps failing.
    failing: set[str] = set()
    if isinstance(app, PagesOnlyApp):
        app.hosted.append(handler)
        failing = app.failing

    async def _run_once(received: list[Received], batch_full: bool) -> list[str]:
        """Route the batch and flush; why each output the broker did not take was not."""
        await router.process(received)
        if batch_full:
            # A backlog: the next batch is already waiting, and the linger
            # (~1% of a full batch's time) is left to gather outputs.
            await app.producer.flush()
        else:
            # Keeping up with the stream: nothing more is coming for these
            # outputs, and each millisecond is a user's.
            await flush_now(app.producer)
        return await sender.undelivered()

    async def _flush_one() -> None:
        """After one event of a batch run event by event: its outputs are all on the broker."""
        await flush_now(app.producer)
        failed = await sender.undelivered()
        if failed:
            raise TransientError(f"{len(failed)} outputs not delivered: {failed[0]}")

    async def _run_until_done(received: list[Received], batch_full: bool) -> None:
        """Run the batch until its outputs are all on the broker; only then may its
        offsets be committed (output ids are deterministic, so a run again is harmless).

        An output the broker did not take runs the batch again after
        :data:`REDELIVERY_PAUSE_S`: until 2026-11-30 the flush was taken for delivery,
        and such an output was lost with its offset. A batch that fails as a whole (the
        flush raises, a bug outside what one event does: the router keeps those with
        their event) runs again after a pause, doubled up to :data:`RETRY_MAX_S`, as on
        the plain runtime, the agent down meanwhile, and a stop gives it up unacknowledged.
        Until 2026-12-03 the error left the agent's loop: the agent Faust restarted read
        nothing more (the crashed one's batch generator, unfinished, stood before it), and
        that generator, once closed, acknowledged the batch, committed unanswered.
        """
        pause = RETRY_INITIAL_S
        try:
            while True:
                try:
                    if poison.isolating:  # failed again and again: event by event
                        await isolate_batch(router, received, _flush_one)
                        failed = []
                    else:
                        failed = await _run_once(received, batch_full)
                except Exception as exc:  # the batch outlives any one failure
                    poison.failed(exc)
                    sender.deliveries.clear()  # the run again sends every output anew
                    failing.add(name)  # a stop gives it up meanwhile (PagesOnlyApp)
                    if health is not None:
                        health.set_running(name, False)
                    log.error(
                        "%s: batch of %d failed, running it again in %.1f s: %s: %.500s",
                        name,
                        len(received),
                        pause,
                        type(exc).__name__,
                        exc,
                    )
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, RETRY_MAX_S)
                    if health is not None:
                        health.set_running(name, True)
                    continue
                if not failed:
                    poison.succeeded()
                    return
                log.warning(
                    "%s: %d outputs of a batch of %d not delivered (%s); it runs again",
                    name,
                    len(failed),
                    len(received),
                    failed[0],
                )
                await asyncio.sleep(REDELIVERY_PAUSE_S)
        finally:
            failing.discard(name)

    async def run(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        # Start-up is done: freeze it, and keep the collector off the batches in
        # flight (ragsift.gc_policy has the figures).
        settle_gc()
        if health is not None:
            health.set_running(name, True)
        try:
            # take_events is on the concrete Stream, not on the StreamT protocol.
            batches = cast(faust.Stream[bytes], stream).take_events(batch_size, within=within_s)
            async for events in batches:
                received = [
                    Received(
                        value=event.value if isinstance(event.value, bytes) else None,
                        key=event.key if isinstance(event.key, bytes) else None,
                        topic=event.message.topic,
                        partition=event.message.partition,
                        offset=event.message.offset,
                    )
                    for event in events
                ]
                await _run_until_done(received, batch_full=len(events) >= batch_size)
                handled = getattr(app, "handled", None)  # PagesOnlyApp's (faust_follows)
                if handled is not None:
                    for message in received:
                        if message.offset is not None:
                            key = (message.topic, message.partition)
                            handled[key] = max(handled.get(key, 0), message.offset + 1)
                yield None
        except GeneratorExit:
            raise  # the generator closed: a stop
        except asyncio.CancelledError as exc:
            agent = app.agents.get(name)
            if not (app.should_stop or agent is None or agent.should_stop):
                # Not a stop: Faust would restart the agent, as on an Exception.
                await _end_worker(app, name, exc)
            raise
        except BaseException as exc:
            await _end_worker(app, name, exc)
            raise
        finally:
            if health is not None:
                health.set_running(name, False)

    app.agent(source, name=name, concurrency=1)(run)
    return router
