"""The Faust consumer thread holds feedback while the results it joins to are behind."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import TopicPartition

from ragsift.streams.faust_follows import Follows
from ragsift.streams.loop import MAX_HOLD_S

RESULTS, FEEDBACK = "p.retrievals.v1", "p.feedback.v1"
LEAD, FOLLOWER = TopicPartition(RESULTS, 0), TopicPartition(FEEDBACK, 0)


@dataclass
class Record:
    offset: int


class Consumer:
    def __init__(self, highwater: int | None) -> None:
        self.end = highwater

    def assignment(self) -> set[TopicPartition]:
        return {LEAD, FOLLOWER}

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.end if partition == LEAD else 10


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_feedback_waits_until_the_results_are_fetched_and_handled() -> None:
    handled: dict[tuple[str, int], int] = {}
    clock = Clock()
    rule = Follows({FEEDBACK: RESULTS}, handled, clock)
    consumer = Consumer(highwater=600)
    active = {LEAD, FOLLOWER}
    # 600 results to read: the labels wait (Faust read both at once and refused 554).
    assert rule.held(consumer, active, {LEAD: 0, FOLLOWER: 0}) == {FOLLOWER}
    rule.fetched({LEAD: [Record(i) for i in range(600)]})
    # All fetched, none handled yet: they are in an agent's queue, the labels still wait.
    assert rule.held(consumer, active, {LEAD: 600, FOLLOWER: 0}) == {FOLLOWER}
    handled[(RESULTS, 0)] = 600
    assert rule.held(consumer, active, {LEAD: 600, FOLLOWER: 0}) == set()
    assert rule.held(consumer, {LEAD}, {LEAD: 0}) == set()  # no follower asked: nothing held


def test_a_hold_ends_after_the_longest_wait_so_feedback_is_never_starved() -> None:
    clock = Clock()
    rule = Follows({FEEDBACK: RESULTS}, {}, clock)
    consumer = Consumer(highwater=None)  # never told its end: behind for good
    active = {LEAD, FOLLOWER}
    assert rule.held(consumer, active, {LEAD: 0}) == {FOLLOWER}
    clock.now = MAX_HOLD_S
    assert rule.held(consumer, active, {LEAD: 0}) == set()
    consumer.end = 0  # caught up: the next time it falls behind, it holds again
    assert rule.held(consumer, active, {LEAD: 0}) == set()
    consumer.end = 5
    assert rule.held(consumer, active, {LEAD: 0}) == {FOLLOWER}
