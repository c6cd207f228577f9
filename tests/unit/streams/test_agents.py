"""The Faust side without a broker: the agent loop's health, /readyz, the web surface."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.exceptions import ConsumerNotStarted

from ragsift.observability.metrics import Metrics
from ragsift.settings import KafkaSettings, Settings, WorkerSettings
from ragsift.streams.agents import AgentHealth, attach_handler
from ragsift.streams.app import create_app
from ragsift.streams.worker import build_worker, readiness
from tests.unit.streams.scripted import ScriptedHandler


class FakeStream:
    """Stands in for a Faust stream: yields the given batches, then raises ``then``."""

    def __init__(self, batches: list[list[Any]], then: BaseException | None = None):
        self.batches = batches
        self.then = then

    def take_events(self, max_: int, within: float) -> AsyncIterator[list[Any]]:
        async def events() -> AsyncIterator[list[Any]]:
            for batch in self.batches:
                yield batch
            if self.then is not None:
                raise self.then

        return events()


def agent_app() -> tuple[faust.App, AgentHealth]:
    app = create_app(KafkaSettings(), app_id="unit-agents")
    health = AgentHealth()
    attach_handler(
        app,
        ScriptedHandler(),
        prefix="unit",
        metrics=Metrics(),
        batch_size=8,
        within_s=0.01,
        deadline_s=1.0,
        health=health,
    )
    return app, health


async def test_the_agent_is_down_until_its_loop_runs_and_after_it_crashes() -> None:
    app, health = agent_app()
    assert health.not_running() == ["ragsift.scripted"]
    loop = app.agents["ragsift.scripted"].fun(FakeStream([[]], then=RuntimeError("lost")))
    await loop.__anext__()  # one (empty) batch consumed: the agent is running
    assert health.not_running() == []
    with pytest.raises(RuntimeError, match="lost"):
        await loop.__anext__()
    assert health.not_running() == ["ragsift.scripted"]


def stub_app(*, crashed: bool = False, rebalancing: bool = False, started: bool = True) -> Any:
    def assignment() -> set[int]:
        if not started:
            raise ConsumerNotStarted("Consumer thread not yet started")
        return {0, 1}

    agent = SimpleNamespace(crashed=crashed)
    return SimpleNamespace(
        agents={"ragsift.scripted": agent},
        consumer=SimpleNamespace(assignment=assignment),
        rebalancing=rebalancing,
    )


def running() -> AgentHealth:
    health = AgentHealth()
    health.set_running("ragsift.scripted", True)
    return health


def test_readyz_is_ready_only_when_every_agent_consumes() -> None:
    # Before: /readyz only looked at app.rebalancing, and said 200 with a crashed agent.
    assert readiness(stub_app(), running())["ready"] is True
    stopped = AgentHealth()
    stopped.expect("ragsift.scripted")
    state = readiness(stub_app(), stopped)
    assert state["ready"] is False
    assert state["agents_down"] == ["ragsift.scripted"]
    assert readiness(stub_app(crashed=True), running())["agents_down"] == ["ragsift.scripted"]
    assert readiness(stub_app(rebalancing=True), running())["ready"] is False
    assert readiness(stub_app(started=False), running())["ready"] is False


def test_readyz_is_not_ready_while_a_handler_is_stalled() -> None:
    # The audit sink on a full disk holds its batch (never drops evidence): the
    # orchestrator should see that as not ready rather than a healthy worker.
    sink = SimpleNamespace(name="audit", stalled=False)
    assert readiness(stub_app(), running(), [sink])["ready"] is True
    sink.stalled = True
    state = readiness(stub_app(), running(), [sink])
    assert state["ready"] is False
    assert state["handlers_stalled"] == ["audit"]


def served_paths(app: faust.App) -> list[str]:
    app.web.blueprints.apply(app.web)
    return sorted(app.web.views)


def test_a_plain_faust_app_serves_its_own_views() -> None:
    # What the worker used to serve: /router/ names the host, /table/ the tables.
    assert "/router/" in served_paths(faust.App("unit-plain", web_port=1))


def test_a_worker_serves_only_metrics_healthz_readyz_on_loopback() -> None:
    app, _ = build_worker(["decision"], Settings())
    assert served_paths(app) == ["/healthz", "/metrics", "/readyz"]
    assert app.conf.web_bind == "127.0.0.1"


def test_the_web_host_comes_from_settings_or_the_flag() -> None:
    settings = Settings(worker=WorkerSettings(web_host="0.0.0.0"))
    app, _ = build_worker(["decision"], settings)
    assert app.conf.web_bind == "0.0.0.0"
    app, _ = build_worker(["decision"], settings, web_host="127.0.0.2")
    assert app.conf.web_bind == "127.0.0.2"


async def test_a_partial_batch_is_flushed_now_and_a_full_one_leaves_the_linger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keeping up (a batch under batch_size), the outputs go at once; under a backlog
    (a full batch) the producer's own flush lets the linger gather them."""
    app, _ = agent_app()
    flushed: list[str] = []

    async def no_routing(self: Any, batch: Any) -> None:
        return None

    async def now(producer: Any) -> None:
        flushed.append("now")

    async def plain() -> None:
        flushed.append("plain")

    monkeypatch.setattr("ragsift.streams.routing.BatchRouter.process", no_routing)
    monkeypatch.setattr("ragsift.streams.agents.flush_now", now)
    monkeypatch.setattr(app.producer, "flush", plain)
    event = SimpleNamespace(
        value=b"{}", key=None, message=SimpleNamespace(topic="t", partition=0, offset=0)
    )
    loop = app.agents["ragsift.scripted"].fun(FakeStream([[event] * 3, [event] * 8]))
    await loop.__anext__()
    await loop.__anext__()
    assert flushed == ["now", "plain"]  # batch_size is 8 (agent_app)


def test_the_faust_app_reads_through_the_skipping_consumer() -> None:
    """Faust's own aiokafka consumer thread stopped the worker at a record whose header
    name is not UTF-8 (tests/e2e/test_unreadable_record.py has it on a real broker)."""
    from ragsift.streams.faust_read import SkippingConsumerThread, SkippingTransport

    app = create_app(KafkaSettings(), app_id="unit-skipping")
    assert type(app.transport) is SkippingTransport
    thread = app.consumer._new_consumer_thread()  # type: ignore[attr-defined]
    assert isinstance(thread, SkippingConsumerThread)
    assert app.on_unreadable is None  # type: ignore[attr-defined]  # set by the worker


async def test_a_worker_dead_letters_what_the_consumer_passed_through_its_topics_router(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aiokafka import TopicPartition

    from ragsift.streams.routing import BatchRouter
    from ragsift.streams.unreadable import UnreadableRecordsError

    app, _ = build_worker(["decision"], Settings())
    letters: list[tuple[str, int, int | None, str]] = []

    async def record(self: BatchRouter, message: Any, exc: Exception, query_id: Any = None) -> None:
        letters.append((message.topic, message.partition, message.offset, type(exc).__name__))

    monkeypatch.setattr(BatchRouter, "dead_letter", record)
    source = app.agents[next(iter(app.agents))].channel.get_topic_name()  # type: ignore[attr-defined]
    tp = TopicPartition(source, 2)
    await app.on_unreadable(tp, UnreadableRecordsError(tp, 7, 9, ValueError("x")))  # type: ignore[attr-defined]
    await app.on_unreadable(TopicPartition("other.v1", 0), ValueError("y"))  # type: ignore[attr-defined]
    assert letters == [(source, 2, 7, "UnreadableRecordsError")]  # no router for another topic


async def test_a_batch_whose_output_the_broker_did_not_take_runs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flush waits for the broker's answers and raises none of them: the Faust agent
    took a flush for delivery, and an output the broker refused was lost with its
    batch's offsets. Now the batch runs again until every output is taken."""
    import asyncio

    from aiokafka.errors import NotEnoughReplicasError

    from ragsift.streams import agents
    from tests.unit.streams.scripted import raw

    app, _ = agent_app()
    sent: list[tuple[str, bytes]] = []
    refuse = ["q2"]  # the broker refuses q2's output once

    class Producer:
        async def send(self, topic: str, key: bytes, value: bytes, **_: Any) -> Any:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            if key.decode() in refuse:
                refuse.remove(key.decode())
                done.set_exception(NotEnoughReplicasError("not enough in-sync replicas"))
            else:
                sent.append((topic, key))
                done.set_result(None)
            return done

    async def producer() -> Producer:
        return Producer()

    async def no_flush(*_: Any) -> None:
        return None

    monkeypatch.setattr(app, "maybe_start_producer", producer)
    monkeypatch.setattr("ragsift.streams.agents.flush_now", no_flush)
    monkeypatch.setattr(agents, "REDELIVERY_PAUSE_S", 0.0)
    events = [
        SimpleNamespace(
            value=raw(q), key=None, message=SimpleNamespace(topic="t", partition=0, offset=i)
        )
        for i, q in enumerate(("q1", "q2", "q3"))
    ]
    loop = app.agents["ragsift.scripted"].fun(FakeStream([events]))
    await loop.__anext__()  # the batch is done only once every output was taken
    keys = [key.decode() for _, key in sent]
    assert keys == ["q1", "q3", "q1", "q2", "q3"]  # run again: q2's output taken now
    assert refuse == []
