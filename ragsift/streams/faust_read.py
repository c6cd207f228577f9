"""The Faust runtime's reads past records the Kafka client cannot read.

A record whose header name is not UTF-8 makes aiokafka raise ``UnicodeDecodeError``
at every read of its partition (:mod:`ragsift.streams.unreadable` has the detail).
Faust reads in a consumer thread of its own, and that error stopped the thread and
the worker with it; restarted, the worker met the same record and stopped again.

:class:`SkippingTransport` is Faust's aiokafka transport with one change: its
consumer thread (:class:`SkippingConsumerThread`) catches that error, puts every
active partition back where the failed read found it (the read may have taken
records of other partitions and lost them), reads the partitions one at a time, and
passes the unreadable span of the one that fails, as the plain runtime does. The
span is handed to the app's :attr:`~ragsift.streams.app.PagesOnlyApp.on_unreadable`
on the app's own loop (the worker dead-letters it there,
:func:`ragsift.streams.worker.faust_worker`), and the thread waits for that before
it returns any record after the span: the letter is with the producer before a
later record's batch is flushed and committed. Faust commits past the span once a
later record of its partition is processed: it reads the jump in offsets as a gap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Set
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.transport.drivers import aiokafka as driver

from ragsift.streams.faust_follows import Follows
from ragsift.streams.unreadable import PROBE_WAIT_MS, UnreadableRecordsError, readable_from

__all__ = ["SkippingConsumer", "SkippingConsumerThread", "SkippingTransport"]

log = logging.getLogger(__name__)

#: Records read after a failed read when Faust set no maximum.
_DEFAULT_MOST = 500
#: Seconds a read waits when every partition it was given is held (faust_follows).
_HOLD_POLL_S = 0.2


def _positions(
    consumer: AIOKafkaConsumer, partitions: Set[TopicPartition]
) -> dict[TopicPartition, int]:
    """Where each partition's next read starts, for those that have a position yet."""
    subscriptions = consumer._fetcher._subscriptions
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        if subscriptions.is_assigned(tp):
            state = subscriptions._assigned_state(tp)
            if state.has_valid_position:
                out[tp] = state.position
    return out


def _kafka_tp(tp: TopicPartition) -> TopicPartition:
    """aiokafka's own type for a partition: Faust hands its ``TP`` tuples, which aiokafka's
    consumer methods refuse (they check the type)."""
    return TopicPartition(tp.topic, tp.partition)


class SkippingConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread, reading past spans it cannot read."""

    async def _fetch_records(
        self,
        consumer: AIOKafkaConsumer,
        active_partitions: set[TopicPartition],
        timeout: float | None = None,  # noqa: ASYNC109  # Faust's signature
        max_records: int | None = None,
    ) -> Mapping[TopicPartition, list[Any]]:
        before = _positions(consumer, active_partitions)
        follows = self._follows()
        if follows is not None:  # feedback waits for the results it joins to
            held = follows.held(
                consumer, active_partitions, _positions(consumer, consumer.assignment())
            )
            if held:
                active_partitions = set(active_partitions) - held
                if not active_partitions:
                    await asyncio.sleep(min(timeout or _HOLD_POLL_S, _HOLD_POLL_S))
                    return {}
        try:
            records = await super()._fetch_records(
                consumer, active_partitions, timeout=timeout, max_records=max_records
            )
        except UnicodeDecodeError:
            records = await self._read_around(
                consumer, active_partitions, before, max_records or _DEFAULT_MOST
            )
        if follows is not None:
            follows.fetched(records)
        return records

    def _follows(self) -> Follows | None:
        """The app's ``follows`` rule (:mod:`ragsift.streams.faust_follows`), made once."""
        if not hasattr(self, "_follows_rule"):
            follows = getattr(self.app, "follows", None)  # PagesOnlyApp's, set by the worker
            handled = getattr(self.app, "handled", None)
            self._follows_rule = (
                Follows(follows, handled) if follows and handled is not None else None
            )
        return self._follows_rule

    async def _read_around(
        self,
        consumer: AIOKafkaConsumer,
        active: Set[TopicPartition],
        before: Mapping[TopicPartition, int],
        most: int,
    ) -> dict[TopicPartition, list[Any]]:
        """After a read that raised: rewind, then read partition by partition, passing
        the unreadable span of the one that fails."""
        for tp, offset in before.items():  # the failed read may have moved any of them
            consumer.seek(_kafka_tp(tp), offset)
        out: dict[TopicPartition, list[Any]] = {}
        for tp in sorted(active):
            mine = await self._read_alone(consumer, _kafka_tp(tp), most)
            if mine:
                out[tp] = mine
                most -= len(mine)
            if most <= 0:
                break
        return out

    async def _read_alone(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, most: int
    ) -> list[Any]:
        """Up to ``most`` records of ``tp``, one a read: a read that raises returns none."""
        fetcher = consumer._fetcher
        mine: list[Any] = []
        while len(mine) < most:
            # The first read waits for the fetch a seek starts; the rest take what is here.
            wait_s = 0.0 if mine else PROBE_WAIT_MS / 1000
            try:
                with fetcher._subscriptions.fetch_context():
                    part = await fetcher.fetched_records({tp}, timeout=wait_s, max_records=1)
            except UnicodeDecodeError as exc:
                if not mine:  # the records before it go first; it fails again next time
                    await self._skip(consumer, tp, exc)
                break
            if not part.get(tp):
                break
            mine.extend(part[tp])
        return mine

    async def _skip(self, consumer: AIOKafkaConsumer, tp: TopicPartition, exc: Exception) -> None:
        """Pass the unreadable span that starts where ``tp`` stands; queue its letter."""
        first = await consumer.position(tp)
        end = await readable_from(consumer, tp, first)
        error = UnreadableRecordsError(tp, first, end, exc)
        log.warning("skipped records the consumer could not read: %s", error)
        handler = getattr(self.app, "on_unreadable", None)  # PagesOnlyApp's, set by the worker
        if handler is not None:
            done = asyncio.run_coroutine_threadsafe(handler(tp, error), self.parent_loop)
            await asyncio.wrap_future(done)


class SkippingConsumer(driver.Consumer):
    """Faust's aiokafka consumer, with :class:`SkippingConsumerThread` as its thread."""

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        return SkippingConsumerThread(self, loop=self.loop, beacon=self.beacon)


class SkippingTransport(driver.Transport):
    """Faust's aiokafka transport, with :class:`SkippingConsumer` as its consumer."""

    Consumer = SkippingConsumer
