"""A Faust batch that fails as a whole while the app runs (no broker).

A flush that raises, or a bug outside what one event does, left the agent's loop;
Faust finalised the batch generator, which acknowledged the batch, and restarted
the agent: the consumer committed past events whose outputs were never sent. The
plain loop's counterpart (seek back, run again) is in test_loop.py.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import faust
import pytest
from aiokafka.errors import KafkaTimeoutError
from faust.types import Message
from mode.utils.aiter import aiter

from ragsift.observability.metrics import Metrics
from ragsift.settings import KafkaSettings
from ragsift.streams import agents
from ragsift.streams.agents import AgentHealth, attach_handler
from ragsift.streams.app import create_app
from tests.unit.streams.scripted import ScriptedHandler, raw

SOURCE = "unit.queries.v1"


@dataclass
class Driven:
    """An agent run over a real AdaptiveStream on an in-memory channel, as Faust runs it."""

    app: faust.App
    channel: faust.ChannelT[Any]
    stream: faust.StreamT[Any]
    health: AgentHealth
    acked: list[str] = field(default_factory=list)  # query ids, in ack order
    sent: list[str] = field(default_factory=list)  # keys of outputs sent, not yet flushed
    outputs: list[str] = field(default_factory=list)  # keys of the outputs the broker took
    letters: list[str] = field(default_factory=list)  # topics and offsets of dead letters
    crashes: list[BaseException] = field(default_factory=list)  # what crashed the app
    agent: Any = None
    offset: int = 0
    flushes: int = 0

    async def send(self, *query_ids: str, value: bytes | None = None) -> None:
        """Deliver records as the consumer does: each with its topic, partition and offset."""
        for query_id in query_ids:
            key, body = query_id.encode(), value or raw(query_id)
            message = Message(SOURCE, 0, self.offset, 0.0, 0, None, key, body, None)
            message.generation_id = self.app.consumer_generation_id  # else passed over
            self.offset += 1
            await self.channel.put(self.app.create_event(key, body, None, message))

    async def next_batch(self) -> None:
        """Run the agent until it asks for its next batch (as Faust's ``_slurp`` does)."""
        await self.agent.__anext__()


@pytest.fixture
def handler() -> ScriptedHandler:
    return ScriptedHandler()


@pytest.fixture
async def driven(
    monkeypatch: pytest.MonkeyPatch, handler: ScriptedHandler
) -> AsyncIterator[Driven]:
    monkeypatch.setattr(agents, "RETRY_INITIAL_S", 0.0, raising=False)
    health = AgentHealth()
    app = create_app(KafkaSettings(), app_id="unit-batch-failure")
    attach_handler(
        app,
        handler,
        prefix="unit",
        metrics=Metrics(),
        batch_size=8,
        within_s=3600.0,  # batches go only when nothing more is queued
        deadline_s=1.0,
        health=health,
    )
    app.flow_control.resume()  # the consumer does this once it has partitions
    channel = app.channel()
    stream = app.stream(aiter(channel))
    got = Driven(app, channel, stream, health)

    async def ack(event: Any) -> bool:
        got.acked.append(event.key.decode())
        return True

    class Producer:
        async def send(self, topic: str, key: bytes, value: bytes, **_: Any) -> Any:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            if topic.endswith("deadletter.v1"):
                got.letters.append(value.decode())
            else:
                got.sent.append(key.decode())
            done.set_result(None)
            return done

    async def producer() -> Producer:
        return Producer()

    async def crash(reason: BaseException) -> None:
        got.crashes.append(reason)

    monkeypatch.setattr(stream, "ack", ack)
    monkeypatch.setattr(app, "crash", crash)
    monkeypatch.setattr(app, "maybe_start_producer", producer)
    failing_flush(got, monkeypatch, times=0)
    got.agent = app.agents["ragsift.scripted"].fun(stream)
    yield got
    await stream.stop()


def failing_flush(driven: Driven, monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The producer's flush raises ``times`` times (what was sent is lost), then works
    (what was sent is on the broker); the calls, counted."""
    calls: list[int] = []

    async def flush(producer: Any) -> None:
        calls.append(1)
        sent, driven.sent[:] = list(driven.sent), []
        if len(calls) <= times:
            raise KafkaTimeoutError("flush timed out")
        driven.outputs.extend(sent)

    monkeypatch.setattr(agents, "flush_now", flush)
    return calls


async def test_a_batch_whose_flush_raises_is_not_acknowledged_but_runs_again(
    driven: Driven, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_flush(driven, monkeypatch, times=1)
    await driven.send("q1", "q2")
    # Before: the flush's error left the agent's loop, the batch generator was closed
    # and acknowledged q1 and q2 (their offsets committed), their outputs lost.
    await driven.next_batch()
    assert driven.outputs == ["q1", "q2"]  # run again, flushed this time
    assert driven.acked == []  # acknowledged only when the next batch is asked for
    await driven.send("q3")
    await driven.next_batch()
    assert driven.acked == ["q1", "q2"]
    assert driven.outputs == ["q1", "q2", "q3"]


async def test_a_batch_left_by_an_agent_that_failed_is_not_acknowledged(
    driven: Driven, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever still makes the agent leave its loop with a batch (a BaseException its
    # retry does not take): the batch generator is closed unfinished, and acknowledged
    # it was committed; unacknowledged, the consumer commits no further.
    async def broken(producer: Any) -> None:
        raise SystemExit("not an Exception")

    monkeypatch.setattr(agents, "flush_now", broken)
    await driven.send("q1", "q2")
    with pytest.raises(SystemExit):
        await driven.next_batch()
    gc.collect()
    for _ in range(3):  # the abandoned batch generator is closed meanwhile
        await asyncio.sleep(0)
    await driven.stream.stop()  # closes what is left
    assert driven.acked == []


class NotAnException(BaseException):
    """What Faust neither restarts an agent on nor lets stop the event loop."""


class BrokenHandled(dict[Any, Any]):
    """A ``handled`` map that raises: a bug in the agent outside its batch's retry."""

    def get(self, *_: Any) -> Any:
        raise RuntimeError("bug in the agent")


@pytest.mark.parametrize("error", [NotAnException("odd"), SystemExit(3)])
async def test_an_agent_leaving_its_loop_by_a_base_exception_ends_the_worker(
    driven: Driven, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    # Before, NotAnException left the agent dead (Faust restarts none) and the worker up,
    # not ready, its partitions held and never read again. Crashing the app makes the
    # worker exit non-zero; the orchestrator restarts it and it reads the batch again.
    async def broken(producer: Any) -> None:
        raise error

    monkeypatch.setattr(agents, "flush_now", broken)
    await driven.send("q1")
    with pytest.raises(type(error)):
        await driven.next_batch()
    assert driven.crashes == [error]
    assert driven.health.not_running() == ["ragsift.scripted"]
    assert driven.acked == []


async def test_an_agent_leaving_its_loop_by_a_bug_ends_the_worker(driven: Driven) -> None:
    # Faust restarted the agent on an Exception, behind the batch generator the crash
    # kept open: it read nothing more.
    driven.app.handled = BrokenHandled()  # type: ignore[attr-defined]
    await driven.send("q1")
    with pytest.raises(RuntimeError, match="bug in the agent"):
        await driven.next_batch()
    assert [repr(e) for e in driven.crashes] == [repr(RuntimeError("bug in the agent"))]
    assert driven.acked == []


async def test_an_agent_cancelled_at_stop_does_not_end_the_worker(driven: Driven) -> None:
    from tests.unit.streams.test_faust_stop import stopping

    await driven.send("q1")
    await driven.next_batch()
    running = asyncio.ensure_future(driven.next_batch())  # waits for a next batch
    await asyncio.sleep(0)
    stopping(driven.app)
    running.cancel()  # what stopping the agent's actor does
    await asyncio.gather(running, return_exceptions=True)
    assert driven.crashes == []


async def test_an_agent_cancelled_other_than_at_stop_ends_the_worker(
    driven: Driven, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust restarts such an agent ("Restarting on rebalance") behind the open batch.
    async def cancelled(producer: Any) -> None:
        raise asyncio.CancelledError()  # a cancellation leaking out of the flush

    monkeypatch.setattr(agents, "flush_now", cancelled)
    await driven.send("q1")
    with pytest.raises(asyncio.CancelledError):
        await driven.next_batch()
    assert [type(e) for e in driven.crashes] == [asyncio.CancelledError]
    assert driven.acked == []


class SettleFails(ScriptedHandler):
    """A handler whose ``settle`` raises an unexpected error once (a bug): it escapes the
    router, which keeps only what one event does with its event."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    async def settle(self) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("bug outside event handling")


@pytest.mark.parametrize("handler", [SettleFails()])
async def test_a_bug_outside_event_handling_runs_the_batch_again_unacknowledged(
    driven: Driven, handler: ScriptedHandler
) -> None:
    await driven.send("q1", "q2")
    await driven.next_batch()
    await driven.send("q3")
    await driven.next_batch()
    assert driven.acked == ["q1", "q2"]
    assert driven.outputs == ["q1", "q2", "q3"]
    assert handler.calls == [["q1", "q2"], ["q1", "q2"], ["q3"]]


async def test_while_a_batch_keeps_failing_the_agent_is_down_and_nothing_is_acknowledged(
    driven: Driven, monkeypatch: pytest.MonkeyPatch
) -> None:
    third = asyncio.Event()

    async def flush(producer: Any) -> None:
        driven.sent.clear()  # lost with the failed flush
        driven.flushes += 1
        if driven.flushes >= 3:
            third.set()
        raise KafkaTimeoutError("flush timed out")

    monkeypatch.setattr(agents, "flush_now", flush)
    await driven.send("q1")
    running = asyncio.ensure_future(driven.next_batch())
    try:
        async with asyncio.timeout(5):
            await third.wait()  # run a third time: not given up, not acknowledged
        assert driven.health.not_running() == ["ragsift.scripted"]  # /readyz 503
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert driven.acked == []
    assert driven.outputs == []


async def test_a_malformed_event_is_still_dead_lettered_once_and_acknowledged(
    driven: Driven,
) -> None:
    await driven.send("q1")
    await driven.send("bad", value=b"{not json")
    await driven.next_batch()
    await driven.send("q2")
    await driven.next_batch()
    assert driven.acked == ["q1", "bad"]
    assert driven.outputs == ["q1", "q2"]
    assert len(driven.letters) == 1
    assert '"stage":"decode"' in driven.letters[0].replace(" ", "")


async def test_a_stop_gives_up_a_batch_that_keeps_failing_unacknowledged(
    driven: Driven, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Faust waits at stop for the events in flight to be acknowledged: a batch that
    # fails every run would keep a SIGTERM waiting until the worker was killed. The
    # plain loop leaves such a batch at stop, uncommitted; so does the Faust app.
    from tests.unit.streams.test_faust_stop import InFlight, stopping

    failed = asyncio.Event()

    async def flush(producer: Any) -> None:
        failed.set()
        raise KafkaTimeoutError("flush timed out")

    monkeypatch.setattr(agents, "flush_now", flush)
    await driven.send("q1")
    running = asyncio.ensure_future(driven.next_batch())
    try:
        async with asyncio.timeout(5):
            await failed.wait()
        assert driven.app.failing == {"ragsift.scripted"}  # type: ignore[attr-defined]
        consumer = InFlight()
        stopping(driven.app)
        async with asyncio.timeout(5):
            await driven.app._consumer_wait_empty(consumer, logging.getLogger("test"))
        assert not consumer.acked.is_set()
    finally:
        running.cancel()  # what stopping the agent's actor does
        await asyncio.gather(running, return_exceptions=True)
    await driven.stream.stop()
    assert driven.acked == []
