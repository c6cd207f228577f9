"""A real broker: the agent's flush sends a lingering batch at once.

aiokafka's own ``flush()`` leaves each batch to its linger; with a two-minute
linger it would take two minutes. ``flush_now`` closes the batches, so the
outputs are acknowledged by the broker within the test's (generous) minute.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer

from ragsift.streams.agents import flush_now

LINGER_MS = 120_000


class _FaustLike:
    """Faust's aiokafka producer, as flush_now reads it, around a real aiokafka producer."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer
        self._transaction_producers: dict[str, AIOKafkaProducer] = {}
        self.buffer = self

    async def flush(self) -> None:  # Faust's own send buffer: empty here
        return None


async def test_lingering_outputs_are_on_the_broker_without_waiting_out_the_linger(
    kafka_bootstrap: str, unique: str
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=LINGER_MS)
    await producer.start()
    try:
        deliveries = [await producer.send(f"it.flush-now.{unique}", b"%d" % i) for i in range(5)]
        assert not any(d.done() for d in deliveries)  # lingering
        await asyncio.wait_for(flush_now(_FaustLike(producer)), timeout=LINGER_MS / 2000)
        offsets = [(await d).offset for d in deliveries]
        assert offsets == list(range(5))
    finally:
        await producer.stop()
