"""The Faust runtime's ``follows``: feedback is read after the results it joins to.

The plain loop pauses a following topic's partitions while a partition of the topic
it follows is behind (:class:`ragsift.streams.loop.BatchLoop`). Faust had no such
rule: a calibration worker started on a backlog read the labels before their
results and refused 554 of 600 as unknown queries (helper-23, 2026-12-02). Here the
Faust consumer thread leaves the following partitions out of a read while the topic
they follow is behind: not fetched to the end, or fetched but not yet handled (Faust
queues fetched records for its agents, so a fetch position alone would let the
labels overtake results still in a queue). As in the plain loop, a hold lasts
:data:`~ragsift.streams.loop.MAX_HOLD_S` at most, so a topic that never catches up
cannot starve the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Set
from typing import Any, Protocol

from aiokafka import TopicPartition

from ragsift.streams.loop import MAX_HOLD_S

__all__ = ["Follows"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


class _Consumer(Protocol):
    """What :class:`Follows` reads of an ``AIOKafkaConsumer``."""

    def assignment(self) -> Set[TopicPartition]: ...

    def highwater(self, partition: TopicPartition) -> int | None: ...


class Follows:
    """Which following partitions a read leaves out, and for how long it has.

    Args:
        follows: following topic -> the topic it follows (full names).
        handled: per (topic, partition), the offset after the last record an agent
            handled (the agents keep it up to date, on the app's loop).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        follows: Mapping[str, str],
        handled: Mapping[Key, int],
        clock: Any = time.monotonic,
    ) -> None:
        self.follows = dict(follows)
        self.handled = handled
        self._clock = clock
        self._fetched: dict[Key, int] = {}  # offset after the last leader record fetched
        self._held_since: float | None = None

    def held(
        self,
        consumer: _Consumer,
        active: Iterable[Any],
        positions: Mapping[TopicPartition, int],
    ) -> set[Any]:
        """The partitions of ``active`` to leave out of this read."""
        followers = {tp for tp in active if tp.topic in self.follows}
        if not followers:
            return set()
        leaders = set(self.follows.values())
        behind = False
        for tp in consumer.assignment():
            if tp.topic not in leaders:
                continue
            end, at = consumer.highwater(tp), positions.get(tp)
            key = (tp.topic, tp.partition)
            unhandled = self._fetched.get(key, 0) > self.handled.get(key, 0)
            behind |= end is None or at is None or end > at or unhandled
        now = self._clock()
        if not behind:
            if self._held_since is not None:
                log.info("reading %s again: %s caught up", _names(followers), _names(leaders))
            self._held_since = None
            return set()
        if self._held_since is None:
            self._held_since = now
            log.info("holding %s while %s is behind", _names(followers), _names(leaders))
        if now - self._held_since >= MAX_HOLD_S:
            return set()  # held long enough: this read takes both
        return followers

    def fetched(self, records: Mapping[Any, list[Any]]) -> None:
        """Note how far each leader partition's records were read."""
        leaders = set(self.follows.values())
        for tp, part in records.items():
            if tp.topic in leaders and part:
                key = (tp.topic, tp.partition)
                self._fetched[key] = max(self._fetched.get(key, 0), part[-1].offset + 1)


def _names(partitions: Iterable[Any]) -> str:
    """The topics of ``partitions`` (or topic names), for a log line."""
    return ", ".join(sorted({getattr(tp, "topic", tp) for tp in partitions}))
