"""The API's Kafka reader against records it cannot take: it reads on, and counts each.

The reader reads every result of every tenant. A result that decoded but could not
be kept (a lone surrogate escape, ``"\\ud800"``, then decoded into a string that
cannot be encoded back to UTF-8, which keeping it does) raised out of the reader:
the task ended, the API read no result again and answered every tenant's query 504
while ``/healthz`` stayed ok. Every replica reads every result, so all of them at
once. Records that did not decode were skipped uncounted. The codec now refuses a
lone surrogate escape (a decode skip); whatever else taking a record raises is an
``unusable`` skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import TopicPartition

from ragsift.api import QueryApi
from ragsift.api.kafka_link import DROP_REASONS
from tests.unit.api.conftest import RecordingApi, build_result


@dataclass
class _Record:
    value: bytes
    offset: int = 0


class _Consumer:
    """Hands out one batch, then nothing (as a quiet topic)."""

    def __init__(self, batch: dict[TopicPartition, list[_Record]]) -> None:
        self.batch: dict[TopicPartition, list[_Record]] | None = batch

    async def getmany(self, **_: Any) -> dict[TopicPartition, list[_Record]]:
        batch, self.batch = self.batch, None
        if batch is None:
            await asyncio.sleep(0.01)
            return {}
        return batch


def _dropped(api: QueryApi, topic: str, reason: str) -> float | None:
    return api.metrics.registry.get_sample_value(
        "ragsift_api_dropped_events_total", {"topic": topic, "reason": reason}
    )


async def test_a_record_it_cannot_take_is_counted_and_the_reader_reads_on(
    make_api: Callable[..., RecordingApi],
) -> None:
    api = make_api()
    unkeepable = build_result("surrogate", "mallory").model_dump_json()
    unkeepable = unkeepable.replace('"query":"what?"', '"query":"wh\\ud800at?"')
    accept = api.accept

    def accept_but_poison(topic: str, event: Any) -> None:  # a bug in taking one record
        if getattr(event, "query_id", None) == "poison":
            raise RuntimeError("taking it failed")
        accept(topic, event)

    api.accept = accept_but_poison  # type: ignore[method-assign]
    results = TopicPartition(api.topic("retrievals"), 0)
    api._consumer = _Consumer(  # type: ignore[assignment]  # the reader's one call
        {
            results: [
                _Record(b"not json"),
                _Record(unkeepable.encode()),
                _Record(build_result("poison", "mallory").model_dump_json().encode()),
                _Record(build_result("q1", "alpha").model_dump_json().encode()),
            ]
        }
    )
    reader = asyncio.create_task(api._read())
    try:
        for _ in range(500):
            if ("result", "alpha", "q1") in api.store or reader.done():
                break
            await asyncio.sleep(0.01)
        assert not reader.done(), reader.exception()
        assert ("result", "alpha", "q1") in api.store  # the record after them was taken
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    assert _dropped(api, "retrievals", "decode") == 2  # not JSON; a lone surrogate
    assert _dropped(api, "retrievals", "unusable") == 1


def test_every_skip_series_is_served_at_zero_before_the_first_skip(
    make_api: Callable[..., RecordingApi],
) -> None:
    """An alert reads ``increase()``, which sees no rise on a series whose first sample
    is already 1: a series created at the first skip hid that skip (and the only one a
    release ever had) from it. Each (topic, reason) the reader can count shows at 0 from
    the start."""
    api = make_api()
    for topic in ("retrievals", "reports", "deadletter"):
        for reason in DROP_REASONS:
            assert _dropped(api, topic, reason) == 0, (topic, reason)
    assert _dropped(api, "decisions", "decode") is None  # not read without a console


def test_a_record_that_does_not_decode_is_logged_with_where_it_is(
    make_api: Callable[..., RecordingApi], caplog: pytest.LogCaptureFixture
) -> None:
    """A skip is one the log names, as the runbook says: the topic, the partition and
    offset to read it at, and why, on one line (the record's bytes are not logged: any
    length)."""
    api = make_api()
    with caplog.at_level(logging.ERROR, logger="ragsift.api.kafka_link"):
        api._take("retrievals", b"not json\n" + b"x" * 5_000, 2, 41)
    assert _dropped(api, "retrievals", "decode") == 1
    (record,) = caplog.records
    message = record.getMessage()
    assert "retrievals event at partition 2 offset 41 (decode)" in message
    assert "\n" not in message
    assert len(message) < 600
