"""A topic that follows another is read after it: feedback after the results it joins to.

Before: a calibration worker started on a backlog read both topics at once, and the
labels whose results were still unread were dead-lettered as unknown queries (101
of 101 on a real broker). The plain loop now pauses the following topic's partitions
while the topic it follows has unread records, for at most ``MAX_HOLD_S`` at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import TopicPartition

from ragsift.observability.metrics import Metrics
from ragsift.streams import loop as loop_module
from ragsift.streams.loop import BatchLoop
from ragsift.streams.routing import BatchRouter
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler, raw
from tests.unit.streams.test_loop import Record

LEAD, FOLLOW = "unit.retrievals.v1", "unit.feedback.v1"
LEAD_TP, FOLLOW_TP = TopicPartition(LEAD, 0), TopicPartition(FOLLOW, 0)


class Logs:
    """One partition per topic; ``getmany`` serves the follower first (the order that
    hurt), at most ``max_records``, skipping paused partitions, as aiokafka does."""

    def __init__(self, lead: int, follow: int):
        self.logs = {
            LEAD_TP: [Record(LEAD, 0, o, b"k", raw(f"r{o}")) for o in range(lead)],
            FOLLOW_TP: [Record(FOLLOW, 0, o, b"k", raw(f"f{o}")) for o in range(follow)],
        }
        self.positions = dict.fromkeys(self.logs, 0)
        self.fetched: set[TopicPartition] = set()  # highwater is known after a fetch
        self.held: set[TopicPartition] = set()

    def subscribe(self, topics: list[str], listener: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.logs)

    def highwater(self, tp: TopicPartition) -> int | None:
        return len(self.logs[tp]) if tp in self.fetched else None

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    def pause(self, *tps: TopicPartition) -> None:
        self.held.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.held.difference_update(tps)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        await asyncio.sleep(0)
        out: dict[TopicPartition, list[Any]] = {}
        budget = max_records
        for tp in (FOLLOW_TP, LEAD_TP):
            self.fetched.add(tp)
            if tp in self.held or budget <= 0:
                continue
            taken = self.logs[tp][self.positions[tp] :][:budget]
            if taken:
                out[tp] = taken
                self.positions[tp] += len(taken)
                budget -= len(taken)
        if not out:
            await asyncio.sleep(timeout_ms / 1000)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        pass


class Named(ScriptedHandler):
    def __init__(self, name: str, order: list[str]):
        super().__init__()
        self.name = name
        self.order = order

    async def handle_batch(self, events: Any) -> Any:
        self.order.extend(e.query_id for e in events)
        return await super().handle_batch(events)


async def consume(logs: Logs) -> list[str]:
    order: list[str] = []
    sender, metrics = RecordingSender(), Metrics()

    def router(name: str) -> BatchRouter:
        return BatchRouter(Named(name, order), sender, metrics=metrics, deadline_s=5)

    async def flush(*, partial: bool) -> None:
        return None

    loop = BatchLoop(
        logs,  # type: ignore[arg-type]  # the consumer's part the loop uses
        {LEAD: [router("lead")], FOLLOW: [router("follow")]},
        flush,
        batch_size=16,
        within_s=0.001,
        follows={FOLLOW: LEAD},
    )
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    async with asyncio.timeout(10):
        while len(order) < sum(len(log) for log in logs.logs.values()):  # noqa: ASYNC110
            await asyncio.sleep(0.005)
    stop.set()
    await task
    return order


async def test_the_following_topic_waits_for_the_backlog_it_follows() -> None:
    order = await consume(Logs(lead=100, follow=20))
    assert order[:100] == [f"r{o}" for o in range(100)]
    assert sorted(order[100:]) == sorted(f"f{o}" for o in range(20))


async def test_a_leader_that_stays_behind_holds_the_follower_no_longer_than_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loop_module, "MAX_HOLD_S", 0.0)
    order = await consume(Logs(lead=100, follow=20))
    first_follower = min(i for i, q in enumerate(order) if q.startswith("f"))
    assert first_follower < 100  # not held: read while the leader was still behind


def test_a_pair_this_loop_does_not_consume_both_of_is_dropped() -> None:
    async def flush(*, partial: bool) -> None:
        return None

    router = BatchRouter(ScriptedHandler(), RecordingSender(), metrics=Metrics(), deadline_s=5)
    loop = BatchLoop(
        Logs(0, 0),  # type: ignore[arg-type]
        {FOLLOW: [router]},
        flush,
        batch_size=4,
        within_s=0.001,
        follows={FOLLOW: LEAD},
    )
    assert loop.follows == {}
