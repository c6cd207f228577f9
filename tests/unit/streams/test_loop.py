"""The plain runtime's batch loop without a broker: what it commits, when, and after what.

A fake consumer hands out scripted records and records seeks and commits; the
loop's contract (ADR 004, ADR 018) is that no offset is committed past an event
whose outputs are not flushed, whatever fails and whenever a rebalance comes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError

from ragsift.observability.metrics import Metrics
from ragsift.streams import loop as loop_module
from ragsift.streams.loop import BatchLoop
from ragsift.streams.routing import BatchRouter
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler, raw

TOPIC = "unit.queries.v1"
TP0, TP1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes


class FakeConsumer:
    """Hands out ``batches`` one per getmany (then nothing); records seeks and commits."""

    def __init__(
        self, batches: list[list[Record]], assigned: Sequence[TopicPartition] = (TP0, TP1)
    ):
        self.batches = list(batches)
        self.assigned = set(assigned)
        self.commits: list[dict[TopicPartition, int]] = []
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.fail_commits = 0
        self.listener: Any = None

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.listener = listener

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        if not self.batches:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        out: dict[TopicPartition, list[Any]] = {}
        for record in self.batches.pop(0)[:max_records]:
            out.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            raise CommitFailedError("the group rebalanced")
        self.commits.append(dict(offsets))


def records(partition: int, first: int, n: int) -> list[Record]:
    return [
        Record(TOPIC, partition, o, f"q{partition}-{o}".encode(), raw(f"q{partition}-{o}"))
        for o in range(first, first + n)
    ]


class Flush:
    """The producer's flush: records calls; fails the first ``fail``; call ``hold`` waits."""

    def __init__(self, fail: int = 0, hold: int | None = None):
        self.calls: list[bool] = []
        self.fail = fail
        self.hold = hold  # this call (1-based) waits for ``release``
        self.release = asyncio.Event()
        self.called = asyncio.Event()  # set at every call

    async def __call__(self, *, partial: bool) -> None:
        self.calls.append(partial)
        self.called.set()
        if self.hold == len(self.calls):
            await self.release.wait()
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the broker did not take the outputs")

    async def wait_calls(self, n: int) -> None:
        async with asyncio.timeout(5):
            while len(self.calls) < n:
                self.called.clear()
                await self.called.wait()


def batch_loop(
    consumer: FakeConsumer, flush: Flush, sender: RecordingSender | None = None, **kw: Any
) -> BatchLoop:
    router = BatchRouter(
        ScriptedHandler(), sender or RecordingSender(), metrics=Metrics(), deadline_s=1.0
    )
    options: dict[str, Any] = {"batch_size": 8, "within_s": 0.01, "commit_interval_s": 3600}
    options.update(kw)
    loop = BatchLoop(consumer, {TOPIC: [router]}, flush, **options)
    loop.subscribe()
    return loop


async def run_until(loop: BatchLoop, done: Any, timeout_s: float = 5.0) -> None:
    """Run ``loop`` until ``done()``, polled at every flush and every 10 ms, then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    async with asyncio.timeout(timeout_s):
        while not done():  # noqa: ASYNC110 (the fake consumer has no event to wait on)
            await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, timeout_s)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_module, "RETRY_INITIAL_S", 0.0)


async def test_offsets_are_committed_only_after_the_flush_and_at_stop() -> None:
    consumer, flush, sender = (
        FakeConsumer([records(0, 0, 3) + records(1, 10, 2)]),
        Flush(),
        RecordingSender(),
    )
    loop = batch_loop(consumer, flush, sender)
    await run_until(loop, lambda: flush.calls)
    assert flush.calls == [True]  # 5 of 8: a partial batch, flushed at once
    assert sorted(sender.output_ids()) == ["q0-0", "q0-1", "q0-2", "q1-10", "q1-11"]
    # The interval is an hour: the only commit is the one at stop, of what was flushed.
    assert consumer.commits == [{TP0: 3, TP1: 12}]


async def test_a_full_batch_waits_for_the_linger_and_the_interval_commits() -> None:
    consumer, flush = FakeConsumer([records(0, 0, 8), records(0, 8, 1)]), Flush()
    loop = batch_loop(consumer, flush, commit_interval_s=0.0)
    await run_until(loop, lambda: len(flush.calls) == 2)
    assert flush.calls == [False, True]
    assert consumer.commits[:2] == [{TP0: 8}, {TP0: 9}]
    assert all(c != {} for c in consumer.commits)  # nothing committed twice for nothing


async def test_a_batch_whose_flush_fails_is_rewound_not_counted_done() -> None:
    consumer, flush = FakeConsumer([records(0, 5, 2) + records(1, 0, 1)]), Flush(fail=1)
    loop = batch_loop(consumer, flush)
    await run_until(loop, lambda: consumer.seeks)
    # Every partition of the failed batch goes back to its first record there.
    assert sorted(consumer.seeks) == [(TP0, 5), (TP1, 0)]
    assert consumer.commits == []  # nothing of it is done


async def test_a_revocation_waits_for_the_batch_in_flight_and_commits_what_is_done() -> None:
    consumer, flush = FakeConsumer([records(0, 0, 2), records(0, 2, 2)]), Flush(hold=2)
    loop = batch_loop(consumer, flush)
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    await flush.wait_calls(2)  # the second batch's flush hangs until released
    revoking = asyncio.create_task(consumer.listener.on_partitions_revoked({TP0}))
    await asyncio.sleep(0.05)
    assert not revoking.done()  # held by the batch in flight
    assert loop.rebalancing
    assert consumer.commits == []
    flush.release.set()
    await asyncio.wait_for(revoking, 5)
    # Committed after the batch was flushed: both batches, not the first alone.
    assert consumer.commits == [{TP0: 4}]
    consumer.assigned = {TP1}
    await consumer.listener.on_partitions_assigned({TP1})
    assert not loop.rebalancing
    stop.set()
    await asyncio.wait_for(task, 5)
    assert consumer.commits == [{TP0: 4}]  # the revoked partition is not committed again


async def test_a_batch_of_a_revoked_partition_is_not_committed_after_the_revocation() -> None:
    consumer, flush = FakeConsumer([records(0, 0, 2)]), Flush()
    loop = batch_loop(consumer, flush)
    consumer.assigned = {TP1}  # revoked between the fetch and the commit
    await run_until(loop, lambda: flush.calls)
    assert consumer.commits == []  # IllegalStateError avoided: only assigned partitions


async def test_a_failed_commit_is_logged_and_retried_at_the_next_commit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer, flush = FakeConsumer([records(0, 0, 2)]), Flush()
    consumer.fail_commits = 1
    loop = batch_loop(consumer, flush, commit_interval_s=0.0)
    await run_until(loop, lambda: consumer.commits)
    assert consumer.commits[0] == {TP0: 2}
    assert "commit failed (the events will be replayed)" in caplog.text


async def test_every_router_of_a_topic_gets_its_records() -> None:
    consumer, flush = FakeConsumer([records(0, 0, 3)]), Flush()
    first, second = RecordingSender(), RecordingSender()
    routers = [
        BatchRouter(ScriptedHandler(), sender, metrics=Metrics(), deadline_s=1.0)
        for sender in (first, second)
    ]
    loop = BatchLoop(consumer, {TOPIC: routers}, flush, batch_size=8, within_s=0.01)
    loop.subscribe()
    assert loop.names == ["ragsift.scripted", "ragsift.scripted"]
    await run_until(loop, lambda: flush.calls)
    assert first.output_ids() == second.output_ids() == ["q0-0", "q0-1", "q0-2"]


def test_a_loop_needs_a_router_and_a_positive_batch() -> None:
    with pytest.raises(ValueError, match="at least one router"):
        BatchLoop(FakeConsumer([]), {TOPIC: []}, Flush(), batch_size=8, within_s=0.01)
    router = BatchRouter(ScriptedHandler(), RecordingSender(), metrics=Metrics(), deadline_s=1.0)
    with pytest.raises(ValueError, match="batch_size"):
        BatchLoop(FakeConsumer([]), {TOPIC: [router]}, Flush(), batch_size=0, within_s=0.01)


async def test_hostile_records_are_dead_lettered_alone_and_the_batch_is_done() -> None:
    hostile = [
        Record(TOPIC, 0, 0, b"\xff\xfe\x00key", None),  # type: ignore[arg-type]  # a tombstone
        Record(TOPIC, 0, 1, b"k", b"[" * 5000 + b"]" * 5000),  # nests too deeply
        Record(
            TOPIC,
            0,
            2,
            b"k",
            json.dumps({"query_id": "ok-\u202e\x07", "tenant_id": "acme", "query": "q"}).encode(),
        ),
        Record(TOPIC, 0, 3, b"k", raw("ok-latin", "naïve ünïcode 質問 \u0000 query")),
        Record("other.topic.v1", 1, 7, b"k", raw("elsewhere")),  # no router reads it
    ]
    consumer, flush, sender = FakeConsumer([hostile + records(1, 0, 1)]), Flush(), RecordingSender()
    consumer.assigned = {TP0, TP1, TopicPartition("other.topic.v1", 1)}
    loop = batch_loop(consumer, flush, sender)
    await run_until(loop, lambda: flush.calls)
    letters = sender.dead_letters()
    assert [d.offset for d in letters] == [0, 1, 2]
    assert all(d.error for d in letters)
    assert sorted(sender.output_ids()) == ["ok-latin", "q1-0"]
    assert consumer.seeks == []  # nothing failed as a whole
    # Every record is done, the skipped one of a topic without a router included.
    assert consumer.commits == [{TP0: 4, TP1: 1, TopicPartition("other.topic.v1", 1): 8}]


class HoldingHandler(ScriptedHandler):
    """Holds its second batch for a store that never answers, ``stalled`` meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled = False
        self.holding = asyncio.Event()

    async def handle_batch(self, events: Sequence[Any]) -> list[Any]:
        if self.calls:
            self.stalled = True
            self.holding.set()
            await asyncio.Event().wait()  # the store never comes back
        return await super().handle_batch(events)


@pytest.mark.parametrize("held", [True, False])
async def test_a_stop_gives_up_a_batch_held_for_a_store_and_commits_what_is_done(
    held: bool,
) -> None:
    # A SIGTERM during a Redis outage was ignored until the orchestrator killed the
    # worker: the batch waited for the store, and the group waited for the member.
    handler = HoldingHandler()
    consumer, flush = FakeConsumer([records(0, 0, 2), records(0, 2, 2)]), Flush()
    router = BatchRouter(handler, RecordingSender(), metrics=Metrics(), deadline_s=1.0)
    loop = BatchLoop(
        consumer, {TOPIC: [router]}, flush, batch_size=8, within_s=0.01, commit_interval_s=3600
    )
    loop.subscribe()
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    async with asyncio.timeout(5):
        await handler.holding.wait()
    handler.stalled = held
    stop.set()
    if not held:  # a batch that is only slow is finished first, as always
        await asyncio.sleep(0.6)
        assert not task.done()
        handler.stalled = True
    await asyncio.wait_for(task, 5)
    assert consumer.commits == [{TP0: 2}]  # the first batch; the held one is read again
    assert (TP0, 2) in consumer.seeks
