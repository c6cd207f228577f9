"""AdaptiveStream.take_events on a real Faust stream over an in-memory channel (no broker).

The batch timeout is an hour in every test: a batch that came only from the
timer would never come, so each batch seen here was handed over because it
was full or because nothing more was queued (pytest-timeout ends a hang).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import faust
import pytest
from faust.types import EventT
from mode.utils.aiter import aiter

from ragsift.settings import KafkaSettings
from ragsift.streams.app import create_app
from ragsift.streams.batching import AdaptiveStream

#: Far longer than any test: only "full" or "drained" can hand a batch over.
NEVER_S = 3_600.0


@dataclass
class Batches:
    """A channel to send on and the stream's ``take_events`` batches to read."""

    channel: faust.ChannelT[Any]
    batches: AsyncGenerator[Sequence[EventT], None]

    async def send(self, *values: int) -> None:
        for value in values:
            await self.channel.send(value=value)

    async def next_events(self) -> Sequence[EventT]:
        return await self.batches.__anext__()

    async def next_values(self) -> list[Any]:
        return [event.value for event in await self.next_events()]


@pytest.fixture
async def stream() -> AsyncIterator[tuple[faust.ChannelT[Any], faust.StreamT[Any]]]:
    app = create_app(KafkaSettings(), app_id="unit-batching")
    # The consumer normally resumes flow control once it has partitions; there is none here.
    app.flow_control.resume()
    channel = app.channel()
    stream = app.stream(aiter(channel))
    yield channel, stream
    await stream.stop()


@pytest.fixture
async def take(
    stream: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> AsyncIterator[Callable[[int], Awaitable[Batches]]]:
    opened: list[Batches] = []

    async def open_batches(max_: int) -> Batches:
        channel, events = stream
        # take_events is on the concrete stream (the app's AdaptiveStream), not on StreamT.
        got = Batches(channel, cast(AdaptiveStream, events).take_events(max_, within=NEVER_S))
        opened.append(got)
        return got

    yield open_batches
    for got in opened:
        await got.batches.aclose()


async def test_the_app_builds_adaptive_streams(
    stream: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    assert isinstance(stream[1], AdaptiveStream)


async def test_a_lone_event_on_an_idle_stream_goes_at_once(
    take: Callable[[int], Awaitable[Batches]],
) -> None:
    batches = await take(64)
    await batches.send(1)
    assert await batches.next_values() == [1]
    await batches.send(2)
    assert await batches.next_values() == [2]


async def test_what_is_queued_goes_together_in_order(
    take: Callable[[int], Awaitable[Batches]],
) -> None:
    batches = await take(64)
    await batches.send(1, 2, 3)
    assert await batches.next_values() == [1, 2, 3]
    # Queued while the caller holds a batch (a worker under load): the next batch has them all.
    await batches.send(4, 5)
    assert await batches.next_values() == [4, 5]


async def test_a_batch_never_holds_more_than_max(
    take: Callable[[int], Awaitable[Batches]],
) -> None:
    batches = await take(2)
    await batches.send(1, 2, 3, 4, 5)
    assert [await batches.next_values() for _ in range(3)] == [[1, 2], [3, 4], [5]]


async def test_a_batch_is_acknowledged_only_when_the_next_is_requested(
    take: Callable[[int], Awaitable[Batches]],
) -> None:
    batches = await take(64)
    await batches.send(1, 2)
    first = await batches.next_events()
    # At-least-once: the caller is still working on these; their offsets must not commit.
    assert [event.message.acked for event in first] == [False, False]
    await batches.send(3)
    assert await batches.next_values() == [3]
    assert [event.message.acked for event in first] == [True, True]


async def test_max_below_one_is_refused(take: Callable[[int], Awaitable[Batches]]) -> None:
    batches = await take(0)
    with pytest.raises(ValueError, match="max_ must be >= 1, got 0"):
        await batches.next_events()


async def test_a_batch_left_unfinished_while_the_app_stops_is_never_acknowledged(
    stream: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
    take: Callable[[int], Awaitable[Batches]],
) -> None:
    # A stop gives up a batch held for a store, and the agent holding it is cancelled:
    # Faust's take_events acknowledged such a batch when its generator was closed, and
    # the consumer committed it at its stop (the held events lost).
    batches = await take(64)
    await batches.send(1, 2)
    held = await batches.next_events()
    stream[1].app._stopped.set()  # type: ignore[attr-defined]  # what App.stop does first
    await batches.batches.aclose()
    assert [event.message.acked for event in held] == [False, False]
