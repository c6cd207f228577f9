"""The Faust runtime stopped while a handler holds its batch for a store (no broker).

The plain loop's counterpart is in test_loop.py; on a real broker,
tests/integration/test_faust_stop_while_held.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, cast

import faust
import pytest
from mode.utils.aiter import aiter

from ragsift.observability.metrics import Metrics
from ragsift.settings import KafkaSettings
from ragsift.streams.agents import attach_handler
from ragsift.streams.app import PagesOnlyApp, create_app
from tests.unit.streams.scripted import ScriptedHandler, raw


class HoldingHandler(ScriptedHandler):
    """Holds every batch for a store that never answers, ``stalled`` meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.stalled = False
        self.holding = asyncio.Event()

    async def handle_batch(self, events: Sequence[Any]) -> list[Any]:
        self.stalled = True
        self.holding.set()
        await asyncio.Event().wait()  # the store never comes back
        return await super().handle_batch(events)


class InFlight:
    """Stands in for Faust's consumer: events in flight until ``acked`` is set."""

    def __init__(self) -> None:
        self.acked = asyncio.Event()

    async def wait_empty(self) -> None:
        await self.acked.wait()


def stopping(app: faust.App) -> None:
    """What ``App.stop`` does first (mode's flag), before it waits for the streams."""
    app._stopped.set()  # type: ignore[attr-defined]


def hosting(handler: ScriptedHandler) -> PagesOnlyApp:
    app = cast(PagesOnlyApp, create_app(KafkaSettings(), app_id="unit-stop"))
    attach_handler(
        app, handler, prefix="unit", metrics=Metrics(), batch_size=8, within_s=0.01, deadline_s=1.0
    )
    return app


async def test_a_stop_gives_up_the_wait_for_a_batch_held_for_a_store() -> None:
    # Faust waited for the held batch's acknowledgement at stop, for ever: a SIGTERM
    # during a Redis outage left the worker in the group until it was killed.
    handler = HoldingHandler()
    app, consumer = hosting(handler), InFlight()
    handler.stalled = True
    stopping(app)
    async with asyncio.timeout(5):
        await app._consumer_wait_empty(consumer, logging.getLogger("test"))
    assert not consumer.acked.is_set()  # given up: returned with the batch unacknowledged
    assert app.hosted == [handler]  # what the stop reads


@pytest.mark.parametrize("stop", [True, False])
async def test_a_slow_batch_at_stop_and_a_held_one_at_a_rebalance_are_waited_for(
    stop: bool,
) -> None:
    handler = HoldingHandler()
    app, consumer = hosting(handler), InFlight()
    if stop:  # slow: no handler holds, so the batch is finished first
        stopping(app)
    else:  # a rebalance waits for a held batch, as the plain loop's revocation does
        handler.stalled = True
    waiting = asyncio.create_task(app._consumer_wait_empty(consumer, logging.getLogger("test")))
    await asyncio.sleep(0.6)  # more than two checks for a hold
    assert not waiting.done()
    consumer.acked.set()  # the batch finished
    await asyncio.wait_for(waiting, 5)


async def test_an_agent_cancelled_at_stop_leaves_its_held_batch_unacknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Giving the wait up was not enough on a real broker: Faust cancels the agent and
    # closes its batch generator, which acknowledged the held batch, and the consumer
    # committed it at its stop (2 of 2, the held event lost).
    handler = HoldingHandler()
    app = hosting(handler)
    app.flow_control.resume()  # the consumer does this once it has partitions
    channel = app.channel()
    stream = app.stream(aiter(channel))
    acked: list[Any] = []

    async def ack(event: Any) -> bool:
        acked.append(event)
        return True

    monkeypatch.setattr(stream, "ack", ack)
    agent = app.agents["ragsift.scripted"].fun(stream)
    running = asyncio.ensure_future(agent.__anext__())
    await channel.send(value=raw("q1"))
    async with asyncio.timeout(5):
        await handler.holding.wait()
    stopping(app)
    running.cancel()  # what stopping the agent's actor does
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await stream.stop()  # closes the take_events generator left at its batch
    assert acked == []
