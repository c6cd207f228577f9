"""AdaptiveStream.take_events on a real Faust stream over an in-memory channel (no broker).

The batch timeout is an hour in every test: a batch that came only from the
timer would never come, so each batch seen here was handed over because it
was full or because nothing more was queued (pytest-timeout ends a hang).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import faust
import pytest
from faust.types import EventT
from mode.utils.aiter import aiter

from ragsift.settings import KafkaSettings
from ragsift.streams.app import create_app
from ragsift.streams.batching import AdaptiveStream

#: Far longer than any test: only "full" or "drained" can hand a batch over.
NEVER_S = 3_600.0


async def channel_stream() -> tuple[faust.ChannelT[Any], faust.StreamT[Any]]:
    app = create_app(KafkaSettings(), app_id="unit-batching")
    # The consumer normally resumes flow control once it has partitions; there is none here.
    app.flow_control.resume()
    channel = app.channel()
    return channel, app.stream(aiter(channel))


async def send(channel: faust.ChannelT[Any], *values: int) -> None:
    for value in values:
        await channel.send(value=value)


def values(batch: Sequence[EventT]) -> list[Any]:
    return [event.value for event in batch]


@pytest.fixture
async def stream_and_channel() -> AsyncIterator[tuple[faust.ChannelT[Any], faust.StreamT[Any]]]:
    channel, stream = await channel_stream()
    yield channel, stream
    await stream.stop()


async def test_the_app_builds_adaptive_streams(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    _, stream = stream_and_channel
    assert isinstance(stream, AdaptiveStream)


async def test_a_lone_event_on_an_idle_stream_goes_at_once(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    channel, stream = stream_and_channel
    batches = stream.take_events(64, within=NEVER_S)
    await send(channel, 1)
    assert values(await batches.__anext__()) == [1]
    await send(channel, 2)
    assert values(await batches.__anext__()) == [2]
    await batches.aclose()


async def test_what_is_queued_goes_together_in_order(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    channel, stream = stream_and_channel
    batches = stream.take_events(64, within=NEVER_S)
    await send(channel, 1, 2, 3)
    assert values(await batches.__anext__()) == [1, 2, 3]
    # Queued while the caller holds a batch (a worker under load): the next batch has them all.
    await send(channel, 4, 5)
    assert values(await batches.__anext__()) == [4, 5]
    await batches.aclose()


async def test_a_batch_never_holds_more_than_max(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    channel, stream = stream_and_channel
    batches = stream.take_events(2, within=NEVER_S)
    await send(channel, 1, 2, 3, 4, 5)
    got = [values(await batches.__anext__()) for _ in range(3)]
    assert got == [[1, 2], [3, 4], [5]]
    await batches.aclose()


async def test_a_batch_is_acknowledged_only_when_the_next_is_requested(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    channel, stream = stream_and_channel
    batches = stream.take_events(64, within=NEVER_S)
    await send(channel, 1, 2)
    first = await batches.__anext__()
    # At-least-once: the caller is still working on these; their offsets must not commit.
    assert [event.message.acked for event in first] == [False, False]
    await send(channel, 3)
    assert values(await batches.__anext__()) == [3]
    assert [event.message.acked for event in first] == [True, True]
    await batches.aclose()


async def test_max_below_one_is_refused(
    stream_and_channel: tuple[faust.ChannelT[Any], faust.StreamT[Any]],
) -> None:
    _, stream = stream_and_channel
    with pytest.raises(ValueError, match="max_ must be >= 1, got 0"):
        await stream.take_events(0, within=NEVER_S).__anext__()
