"""A batch that keeps failing as a whole, in both runtimes: the event that makes it fail is
dead-lettered once, the rest committed; a store that is down is waited out, never blamed.

Before ragsift.streams.poison, both runtimes ran such a batch again for ever: one event
that crashed a handler's batch step (its ``settle``) stopped its partition for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaTimeoutError
from redis._parsers import _RESP2Parser

from ragsift.errors import ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.streams import agents
from ragsift.streams import loop as loop_module
from ragsift.streams.loop import BatchLoop
from ragsift.streams.poison import PoisonGuard, TransientError, is_transient
from ragsift.streams.routing import BatchRouter
from tests.unit.streams.scripted import RecordingSender, ScriptedHandler, raw
from tests.unit.streams.test_faust_batch_failure import (  # noqa: F401 (fixtures)
    Driven,
    driven,
    handler,
)
from tests.unit.streams.test_loop import TOPIC, Flush, Record

TP0 = TopicPartition(TOPIC, 0)
POISON = raw("p", "poison")


class SettleCrashes(ScriptedHandler):
    """A handler whose batch step (``settle``) raises whenever the events it has just
    handled include a ``poison`` query: outside the router's per-event guard."""

    def __init__(self, error: Exception | None = None, times: int | None = None) -> None:
        super().__init__()
        self.pending: list[str] = []
        self.error = error or RuntimeError("batch step crashes on one event")
        self.times = times  # None: for ever; else how many settles raise, for any batch

    async def handle_batch(self, events: Sequence[Any]) -> list[Any]:
        self.pending = [e.query for e in events]
        return await super().handle_batch(events)

    async def settle(self) -> None:
        if self.times is not None:
            if self.times > 0:
                self.times -= 1
                raise self.error
            return
        if "poison" in self.pending:
            raise self.error


class SeekingConsumer:
    """One partition's records; getmany reads from the position, seek moves it back."""

    def __init__(self, records: list[Record]):
        self.records = records
        self.position = 0
        self.commits: list[dict[TopicPartition, int]] = []

    def subscribe(self, topics: list[str], listener: Any) -> None:
        return None

    def assignment(self) -> set[TopicPartition]:
        return {TP0}

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        taken = self.records[self.position : self.position + max_records]
        if not taken:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        self.position += len(taken)
        return {TP0: taken}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position = offset

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))


def three(poison: bytes = POISON) -> list[Record]:
    values = [raw("q0"), poison, raw("q2")]
    return [Record(TOPIC, 0, n, f"k{n}".encode(), v) for n, v in enumerate(values)]


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_module, "RETRY_INITIAL_S", 0.0)
    monkeypatch.setattr(agents, "RETRY_INITIAL_S", 0.0)


def plain(step: ScriptedHandler) -> tuple[BatchLoop, SeekingConsumer, RecordingSender, Metrics]:
    consumer, sender, metrics = SeekingConsumer(three()), RecordingSender(), Metrics()
    router = BatchRouter(step, sender, metrics=metrics, deadline_s=1.0)
    options: dict[str, Any] = {"batch_size": 8, "within_s": 0.01, "commit_interval_s": 0.0}
    loop = BatchLoop(consumer, {TOPIC: [router]}, Flush(), **options)  # type: ignore[arg-type]
    loop.subscribe()
    return loop, consumer, sender, metrics


async def run_while(loop: BatchLoop, going: Any, timeout_s: float = 5.0) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(loop.run(stop))
    try:
        async with asyncio.timeout(timeout_s):
            while going():  # noqa: ASYNC110 (the fake consumer has no event to wait on)
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout_s)


def isolations(metrics: Metrics, outcome: str) -> float:
    return metrics.poison_isolations.labels(outcome)._value.get()


async def test_plain_a_poison_event_is_dead_lettered_once_and_the_rest_committed() -> None:
    crashing = SettleCrashes()
    loop, consumer, sender, metrics = plain(crashing)
    # Before: the batch ran again for ever, nothing committed (the bounded wait timed out).
    await run_while(loop, lambda: consumer.commits[-1:] != [{TP0: 3}])
    letters = sender.dead_letters()
    assert [(d.offset, d.stage, d.query_id, d.tenant_id) for d in letters] == [
        (1, "poison", "p", "acme")
    ]
    assert "RuntimeError" in letters[0].error
    assert sorted(set(sender.output_ids())) == ["q0", "q2"]
    assert crashing.calls[:3] == [["q0", "p", "q2"]] * 3  # three failures, then alone
    assert ["p"] in crashing.calls
    assert isolations(metrics, "dead_lettered") == 1
    assert metrics.dead_letters.labels("scripted", "poison")._value.get() == 1


async def test_plain_a_store_down_is_waited_out_however_long_never_dead_lettered() -> None:
    crashing = SettleCrashes(ServiceUnavailableError("redis down", service="redis"), times=12)
    loop, consumer, sender, metrics = plain(crashing)
    await run_while(loop, lambda: consumer.commits[-1:] != [{TP0: 3}])
    assert sender.dead_letters() == []
    assert crashing.calls == [["q0", "p", "q2"]] * 13  # whole batches only, never alone
    assert sorted(sender.output_ids()) == ["p", "q0", "q2"]
    assert isolations(metrics, "dead_lettered") == 0


async def test_plain_a_batch_step_that_fails_for_every_event_dead_letters_none() -> None:
    crashing = SettleCrashes(times=10**6)  # not one event's fault
    loop, consumer, sender, metrics = plain(crashing)
    await run_while(loop, lambda: isolations(metrics, "held") < 2)
    assert sender.dead_letters() == []
    assert consumer.commits == []


@pytest.mark.parametrize("handler", [SettleCrashes()])
async def test_faust_a_poison_event_is_dead_lettered_once_and_the_rest_acknowledged(
    driven: Driven,  # noqa: F811 (the fixture)
    handler: SettleCrashes,  # noqa: F811
) -> None:
    await driven.send("q1")
    await driven.send("p", value=POISON)
    await driven.send("q2")
    # Before: the agent ran the batch again for ever (the bounded wait timed out).
    async with asyncio.timeout(5):
        await driven.next_batch()
    assert driven.outputs == ["q1", "q2"]
    assert len(driven.letters) == 1
    assert '"stage":"poison"' in driven.letters[0].replace(" ", "")
    assert handler.calls[:3] == [["q1", "p", "q2"]] * 3
    await driven.send("q3")
    async with asyncio.timeout(5):
        await driven.next_batch()
    assert driven.acked == ["q1", "p", "q2"]
    assert driven.outputs == ["q1", "q2", "q3"]
    assert len(driven.letters) == 1


@pytest.mark.parametrize(
    "handler", [SettleCrashes(ServiceUnavailableError("redis down", service="redis"), times=12)]
)
async def test_faust_a_store_down_is_waited_out_never_dead_lettered(
    driven: Driven,  # noqa: F811
    handler: SettleCrashes,  # noqa: F811
) -> None:
    await driven.send("q1")
    await driven.send("p", value=POISON)
    async with asyncio.timeout(5):
        await driven.next_batch()
    assert driven.letters == []
    assert driven.outputs == ["q1", "p"]
    assert handler.calls == [["q1", "p"]] * 13


def test_what_counts_as_a_dependency_down() -> None:
    assert is_transient(ServiceUnavailableError("redis down", service="redis"))
    assert is_transient(KafkaTimeoutError())
    assert is_transient(ConnectionError("refused"))
    assert is_transient(TimeoutError())
    assert is_transient(TransientError("outputs not delivered"))
    wrapped = RuntimeError("wrapped")  # raised from a store's refusal
    wrapped.__cause__ = ServiceUnavailableError("redis down", service="redis")
    assert is_transient(wrapped)
    assert not is_transient(RuntimeError("bug"))
    assert not is_transient(KeyError("missing"))


def test_the_guard_counts_only_unexpected_failures_in_a_row() -> None:
    guard = PoisonGuard(2)
    guard.failed(RuntimeError("bug"))
    guard.failed(ServiceUnavailableError("down", service="redis"))
    assert not guard.isolating
    guard.failed(RuntimeError("bug"))
    assert guard.isolating
    guard.succeeded()
    assert not guard.isolating
    with pytest.raises(ValueError, match="after_failures must be >= 1, got 0"):
        PoisonGuard(0)


def _reply(line: str) -> Exception:
    """The exception redis-py raises for a server's error ``line`` (its own parser)."""
    return _RESP2Parser.parse_error(line)


async def test_plain_a_key_redis_refuses_for_good_is_dead_lettered_not_waited_on() -> None:
    # A key another program wrote with another type: Redis answers WRONGTYPE every time.
    refusal = _reply("WRONGTYPE Operation against a key holding the wrong kind of value")
    crashing = SettleCrashes(refusal)
    loop, consumer, sender, _ = plain(crashing)
    # Before: retried as an outage for ever, the partition stalled (the wait timed out).
    await run_while(loop, lambda: consumer.commits[-1:] != [{TP0: 3}])
    letters = sender.dead_letters()
    assert [(d.offset, d.stage) for d in letters] == [(1, "poison")]
    assert "WRONGTYPE" in letters[0].error
    assert sorted(set(sender.output_ids())) == ["q0", "q2"]


@pytest.mark.parametrize(
    "line",
    [
        "READONLY You can't write against a read only replica.",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "LOADING Redis is loading the dataset in memory",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "BUSY Redis is busy running a script.",
        "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
        "NOREPLICAS Not enough good replicas to write.",
        "NOSCRIPT No matching script. Please use EVAL.",
    ],
)
async def test_plain_a_redis_reply_that_says_it_is_down_is_waited_out(line: str) -> None:
    crashing = SettleCrashes(_reply(line), times=6)
    loop, consumer, sender, _ = plain(crashing)
    await run_while(loop, lambda: consumer.commits[-1:] != [{TP0: 3}])
    assert sender.dead_letters() == []
    assert crashing.calls == [["q0", "p", "q2"]] * 7  # whole batches only, never alone
