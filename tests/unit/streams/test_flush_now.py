"""flush_now: the agent's flush sends lingering outputs at once, where the producer allows it.

Against a real broker, tests/integration/test_flush_now.py shows it does not wait
out the linger; here, that it reads what Faust's and aiokafka's installed
versions have, and falls back to Faust's own flush where they differ.
"""

from __future__ import annotations

from typing import Any

import faust
import pytest
from aiokafka.producer.message_accumulator import MessageAccumulator

from ragsift.streams.agents import flush_now


class _Buffer:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def flush(self) -> None:
        self.calls.append("buffer")


class _Accumulator:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def flush_for_commit(self) -> None:
        self.calls.append("now")


class _Producer:
    """Faust's aiokafka producer, as far as flush_now reads it."""

    def __init__(self, calls: list[str], *, accumulator: Any, transactions: bool = False):
        self.calls = calls
        self.buffer = _Buffer(calls)
        self._producer = type("Inner", (), {"_message_accumulator": accumulator})()
        self._transaction_producers = {"t": object()} if transactions else {}

    async def flush(self) -> None:
        self.calls.append("faust")


async def test_the_plain_producer_flushes_its_buffer_then_sends_now() -> None:
    calls: list[str] = []
    await flush_now(_Producer(calls, accumulator=_Accumulator(calls)))
    assert calls == ["buffer", "now"]


@pytest.mark.parametrize("case", ["transactions", "no accumulator", "older aiokafka"])
async def test_anything_else_keeps_fausts_flush(case: str) -> None:
    calls: list[str] = []
    accumulator: Any = {"transactions": _Accumulator(calls), "no accumulator": None}.get(
        case, object()
    )
    await flush_now(_Producer(calls, accumulator=accumulator, transactions=case == "transactions"))
    assert calls == ["faust"]


def test_the_installed_faust_and_aiokafka_have_what_flush_now_reads() -> None:
    # Were either renamed, flush_now would quietly fall back to waiting out the linger.
    assert callable(getattr(MessageAccumulator, "flush_for_commit", None))
    app = faust.App("flush-now-pin", broker="kafka://127.0.0.1:1")
    producer = app.producer
    assert hasattr(producer, "buffer")
    assert producer._transaction_producers == {}
    assert hasattr(producer, "_producer")  # None until started; the aiokafka producer after
