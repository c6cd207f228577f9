"""Handlers driven by one plain aiokafka consumer: batch, route, flush, commit (ADR 018).

The plain runtime's counterpart of :func:`ragsift.streams.agents.attach_handler`,
with the same contract (ADR 004, at-least-once). One consumer per worker
process, subscribed to every hosted handler's source topic, so a process is one
member of its group, as a Faust worker is (a consumer per handler made each
replica's start a cascade of rebalances, one per member):

1. ``getmany(max_records=batch_size)`` hands over what is already fetched at
   once and waits up to ``within_s`` only when nothing is (what
   :class:`~ragsift.streams.batching.AdaptiveStream` does for Faust);
2. each topic's records go to the
   :class:`~ragsift.streams.routing.BatchRouter` of every handler that
   consumes it (decision and report both read results; the handlers of one
   batch run concurrently), which decodes, handles, publishes and
   dead-letters, and never raises for what one event does;
3. the producer is flushed: at once for a partial batch (the worker is
   keeping up), after its linger for a full one (a backlog);
4. only then do the batch's offsets count as done, and done offsets are
   committed every ``commit_interval_s``, when partitions are revoked, and at
   stop. An offset is never committed past an event whose outputs are not on
   the broker.

A record the client cannot read (a header name that is not UTF-8:
:mod:`ragsift.streams.unreadable`) makes ``getmany`` raise: every partition is
rewound to where this loop's work stands (that call may have moved others past
records it never returned), each is read alone, and the span of the one that
fails is dead-lettered (stage ``decode``) and skipped; the other partitions go on.

A rebalance waits for the batch in flight: the revocation callback takes the
same lock as a batch, so it commits what is done, never a position the
consumer has fetched past. A batch that fails as a whole (the producer's flush
raising, a bug) is not counted done: its partitions are sought back to the
batch's first offsets and it runs again; after a few unexpected failures in a row
it runs event by event, and the event that fails alone is dead-lettered
(:mod:`ragsift.streams.poison`). Output ids are deterministic, so the replays this
allows are harmless downstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from ragsift.streams.poison import DEFAULT_POISON_AFTER_FAILURES, PoisonGuard, isolate_batch
from ragsift.streams.routing import BatchRouter, Received, agent_name
from ragsift.streams.unreadable import UnreadableRecordsError, readable_from
from ragsift.workers.held import HELD_CHECK_S, holding

__all__ = ["COMMIT_INTERVAL_S", "MAX_HOLD_S", "BatchLoop", "Flusher"]

log = logging.getLogger(__name__)

#: Seconds between two commits of done offsets (Faust's ``broker_commit_interval``).
COMMIT_INTERVAL_S = 2.8
#: Longest a following topic is held while the topic it follows is behind; then one
#: fetch takes both, so a leader that never catches up cannot starve it.
MAX_HOLD_S = 30.0
#: First pause after a batch or a fetch failed as a whole, doubled up to the maximum.
RETRY_INITIAL_S = 0.5
RETRY_MAX_S = 30.0
FIRST = asyncio.FIRST_COMPLETED


class Flusher(Protocol):
    """Waits until every output sent so far is on the broker."""

    async def __call__(self, *, partial: bool) -> None:
        """``partial``: the batch was not full, so nothing should wait for the linger."""
        ...


class BatchLoop:
    """Consume the handlers' source topics in batches (see the module docstring).

    A handler that waits (the audit sink on a failing disk) holds the other
    handlers of its process with it: deployments run the audit sink in a
    process of its own.

    Args:
        consumer: subscribed by :meth:`subscribe`; never auto-commits.
        routers: the batch routers of each source topic (full name).
        flush: waits for the producer (see :class:`Flusher`).
        batch_size: most records a batch takes.
        within_s: how long an empty fetch waits.
        commit_interval_s: seconds between commits of done offsets.
        follows: topics (full names) that wait for another: a following topic's
            partitions are paused while a partition of the topic it follows has
            records this loop has not read, for up to :data:`MAX_HOLD_S` at a time.
            Feedback follows results: read first in a backlog, a label found no
            result to join and was dead-lettered (101 of 101 labels, at a
            calibration worker's start).
    """

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        routers: Mapping[str, Sequence[BatchRouter]],
        flush: Flusher,
        *,
        batch_size: int,
        within_s: float,
        commit_interval_s: float = COMMIT_INTERVAL_S,
        follows: Mapping[str, str] | None = None,
        poison_after: int = DEFAULT_POISON_AFTER_FAILURES,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not any(routers.values()):
            raise ValueError("a batch loop needs at least one router")
        self.consumer = consumer
        self.routers = {topic: list(each) for topic, each in routers.items() if each}
        self.flush = flush
        self.batch_size = batch_size
        self.timeout_ms = max(1, int(within_s * 1000))
        self.commit_interval_s = commit_interval_s
        #: True from the loop's start until it ends or fails; /readyz reads it.
        self.running = False
        #: True between a revocation and the next assignment.
        self.rebalancing = False
        #: Set once the group has given this consumer its first assignment (maybe empty).
        self.joined = asyncio.Event()
        self._lock = asyncio.Lock()  # a batch, or a revocation's commit
        self._done: dict[TopicPartition, int] = {}  # next offset to commit, outputs flushed
        self._committed: dict[TopicPartition, int] = {}
        self.follows = {f: lead for f, lead in (follows or {}).items() if {f, lead} <= set(routers)}
        self._held_since: float | None = None
        self._poison = PoisonGuard(poison_after)  # a batch that keeps failing: isolate

    @property
    def names(self) -> list[str]:
        """The hosted agents' names on /readyz (``ragsift.retrieval``...), sorted."""
        routers = [router for each in self.routers.values() for router in each]
        return sorted(agent_name(router.handler) for router in routers)

    def subscribe(self) -> None:
        """Subscribe to every router's topic, with the listener that commits before a rebalance."""
        self.consumer.subscribe(sorted(self.routers), listener=_CommitBeforeRebalance(self))

    @property
    def assigned(self) -> int | None:
        """Partitions assigned now; None before the first assignment."""
        return len(self.consumer.assignment()) if self.joined.is_set() else None

    async def run(self, stop: asyncio.Event) -> None:
        """Batches until ``stop`` is set; then what is done is committed."""
        pause = RETRY_INITIAL_S
        last_commit = time.monotonic()
        self.running = True
        try:
            while not stop.is_set():
                try:
                    await self._hold_followers()
                    records = await self._fetch()
                    if records:
                        async with self._lock:
                            await self._process_until_stopped_while_held(records, stop)
                        self._poison.succeeded()
                    pause = RETRY_INITIAL_S
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the loop outlives any one failure
                    self.running = False
                    self._poison.failed(exc)
                    log.error(
                        "batch failed, retrying in %.1f s: %s: %.500s",
                        pause,
                        type(exc).__name__,
                        exc,
                    )
                    await _sleep_unless(stop, pause)
                    pause = min(pause * 2, RETRY_MAX_S)
                    self.running = True
                    continue
                if time.monotonic() - last_commit >= self.commit_interval_s:
                    await self.commit()
                    last_commit = time.monotonic()
            await self.commit()
        finally:
            self.running = False

    async def _hold_followers(self) -> None:
        """Pause each following topic's partitions while the topic it follows is behind
        (see ``follows``); resume them once it is not, or after :data:`MAX_HOLD_S`."""
        if not self.follows:
            return
        assigned = self.consumer.assignment()
        leaders = set(self.follows.values())
        behind = False
        for tp in assigned:
            if tp.topic in leaders:
                end = self.consumer.highwater(tp)  # None until a fetch has told
                behind |= end is None or end > await self.consumer.position(tp)
        now = time.monotonic()
        if behind and self._held_since is None:
            self._held_since = now
        hold = behind and now - (self._held_since or now) < MAX_HOLD_S
        followers = [tp for tp in assigned if tp.topic in self.follows]
        if hold:
            self.consumer.pause(*followers)
            return
        self.consumer.resume(*followers)
        self._held_since = None

    async def _fetch(self) -> list[ConsumerRecord[bytes, bytes]]:
        try:
            fetched = await self.consumer.getmany(
                timeout_ms=self.timeout_ms, max_records=self.batch_size
            )
        except UnicodeDecodeError as exc:  # a record the client cannot read
            log.warning("a fetched record could not be read (%s): reading partitions alone", exc)
            async with self._lock:
                return await self._read_around()
        return [record for part in fetched.values() for record in part]

    async def _read_around(self) -> list[ConsumerRecord[bytes, bytes]]:
        """After a fetch that raised: rewind, then read partition by partition, skipping
        the unreadable span of the one that fails (see the module docstring)."""
        assigned = sorted(self.consumer.assignment())
        for tp in assigned:  # that fetch may have moved any of them past what it returned
            if tp in self._done:
                self.consumer.seek(tp, self._done[tp])
            elif (committed := await self.consumer.committed(tp)) is not None:
                self.consumer.seek(tp, committed)
            else:
                await self.consumer.seek_to_beginning(tp)
        records: list[ConsumerRecord[bytes, bytes]] = []
        for tp in assigned:
            records.extend(await self._read_alone(tp, self.batch_size - len(records)))
        return records

    async def _read_alone(
        self, tp: TopicPartition, most: int
    ) -> list[ConsumerRecord[bytes, bytes]]:
        """Up to ``most`` records of ``tp``, one a call: a call that raises returns none."""
        mine: list[ConsumerRecord[bytes, bytes]] = []
        while len(mine) < most:
            try:
                wait_ms = 0 if mine else self.timeout_ms
                part = await self.consumer.getmany(tp, timeout_ms=wait_ms, max_records=1)
            except UnicodeDecodeError as exc:
                if not mine:  # the work done stands right before it: skip it now
                    await self._skip(tp, exc)
                break  # else its readable records go first; it fails again next time
            if not part.get(tp):
                break
            mine.extend(part[tp])
        return mine

    async def _skip(self, tp: TopicPartition, exc: UnicodeDecodeError) -> None:
        """Dead-letter the unreadable span that starts where ``tp`` stands, and pass it."""
        first = await self.consumer.position(tp)
        end = await readable_from(self.consumer, tp, first)
        error = UnreadableRecordsError(tp, first, end, exc)
        for router in self.routers.get(tp.topic, ()):
            await router.dead_letter(Received(None, None, tp.topic, tp.partition, first), error)
        self._done[tp] = end

    async def _process_until_stopped_while_held(
        self, records: Sequence[ConsumerRecord[bytes, bytes]], stop: asyncio.Event
    ) -> None:
        """:meth:`_process`, given up when ``stop`` is set while a handler holds the batch
        for a store (``stalled``: Redis or the audit disk down, which may last for ever).
        A batch that is not held is finished first, as always. A given-up batch is not
        done, so not committed: the next member of the group reads it again."""
        batch = asyncio.ensure_future(self._process(records))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({batch, stopping}, return_when=FIRST)  # no polling till stop
            while not batch.done():  # stopping: give the batch up once it is held
                if self._held():
                    log.warning(
                        "stopping with a batch of %d held for a store: not committed,"
                        " read again by the next member of the group",
                        len(records),
                    )
                    batch.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await batch
                    return
                await asyncio.wait({batch}, timeout=HELD_CHECK_S)
            batch.result()
        finally:
            stopping.cancel()
            if not batch.done():  # this task itself was cancelled
                batch.cancel()

    def _held(self) -> bool:
        return holding(router.handler for each in self.routers.values() for router in each)

    async def _process(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        by_topic: dict[str, list[Received]] = {}
        for r in records:
            received = Received(r.value, r.key, r.topic, r.partition, r.offset)
            by_topic.setdefault(r.topic, []).append(received)
        pairs = [
            (r, batch) for topic, batch in by_topic.items() for r in self.routers.get(topic, ())
        ]
        try:
            if self._poison.isolating:  # failed again and again: event by event (poison)
                for router, batch in pairs:
                    await isolate_batch(router, batch, lambda: self.flush(partial=True))
            else:
                await asyncio.gather(*(router.process(batch) for router, batch in pairs))
                await self.flush(partial=len(records) < self.batch_size)
        except BaseException:
            self._rewind(records)
            raise
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            self._done[tp] = max(self._done.get(tp, 0), record.offset + 1)

    def _rewind(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        """Seek each partition of a failed batch back to its first record there."""
        first: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            first[tp] = min(first.get(tp, record.offset), record.offset)
        assigned = self.consumer.assignment()
        for tp, offset in first.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)

    async def commit(self, only: Sequence[TopicPartition] | None = None) -> None:
        """Commit the done offsets that moved (of ``only``, if given); failures are logged.

        A failed commit loses nothing: the next one, or the partition's next
        owner, starts from the last committed offset and replays.
        """
        assigned = self.consumer.assignment()
        chosen = self._done
        if only is not None:
            chosen = {tp: self._done[tp] for tp in only if tp in self._done}
        offsets = {
            tp: offset
            for tp, offset in chosen.items()
            if tp in assigned and self._committed.get(tp) != offset
        }
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("commit failed (the events will be replayed): %s", exc)
            return
        self._committed.update(offsets)

    async def on_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        """Before a rebalance: wait for the batch in flight, commit the revoked partitions."""
        self.rebalancing = True
        async with self._lock:
            await self.commit(only=list(revoked))
            for tp in revoked:
                self._done.pop(tp, None)
                self._committed.pop(tp, None)

    def on_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """After a rebalance: consuming again."""
        self.rebalancing = False
        self.joined.set()
        log.info("assigned %d partitions", len(assigned))


class _CommitBeforeRebalance(ConsumerRebalanceListener):
    def __init__(self, loop: BatchLoop):
        self.loop = loop

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.loop.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.loop.on_assigned(list(assigned))


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
