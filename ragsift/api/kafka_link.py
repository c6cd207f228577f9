"""The HTTP API's Kafka link: a producer, and a reader of whole topics that survives outages.

The reader has every partition of its topics assigned (no consumer group:
each API replica sees every result), reconnects while the brokers are away,
and probes them so readiness turns false when they stop answering.
:class:`~ragsift.api.app.QueryApi` builds on it and says what to do with each
event read (:meth:`KafkaLink.accept`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from ragsift.errors import DecodeError
from ragsift.schemas import QueryEvent
from ragsift.settings import KafkaSettings
from ragsift.streams import clients
from ragsift.streams.codec import EventCodec
from ragsift.streams.topics import TOPICS

__all__ = [
    "BROKER_PROBE_INTERVAL_S",
    "BROKER_PROBE_TIMEOUT_S",
    "DROP_REASONS",
    "MAX_SEND_S",
    "RECONNECT_BACKOFF_S",
    "KafkaLink",
]

log = logging.getLogger(__name__)

#: how often the API checks it can still reach the brokers, and how long one check may take
BROKER_PROBE_INTERVAL_S = 5.0
BROKER_PROBE_TIMEOUT_S = 3.0
#: pause between attempts to connect while the brokers are unreachable
RECONNECT_BACKOFF_S = 2.0
#: a publish never waits longer than this, whatever the request's timeout
MAX_SEND_S = 10.0
#: why the reader skipped a record (``on_drop``'s reason): ``decode``, not the topic's
#: event; ``unusable``, taking it failed
DROP_REASONS = ("decode", "unusable")


class KafkaLink:
    """Publishes queries and reads the logical topics ``reads`` until cancelled.

    Args:
        kafka: the brokers and topic prefix.
        reads: the logical topics to read (see :data:`ragsift.streams.topics.TOPICS`).
    """

    def __init__(self, kafka: KafkaSettings, reads: Sequence[str]) -> None:
        self.kafka = kafka
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._runner: asyncio.Task[None] | None = None
        self._connected = False
        self._broker_ok = False
        self._reads = list(reads)
        self._codecs = {name: EventCodec(TOPICS[name].model) for name in self._reads}
        #: called with (logical topic, reason) per record skipped, one of :data:`DROP_REASONS`
        self.on_drop: Callable[[str, str], None] | None = None

    def topic(self, logical: str) -> str:
        """Full name of a registered topic."""
        return TOPICS[logical].name(self.kafka.topic_prefix)

    @property
    def ready(self) -> bool:
        """Connected, reading results, and the brokers answered the last probe."""
        running = self._runner is not None and not self._runner.done()
        return running and self._connected and self._broker_ok

    async def _disconnect(self) -> None:
        self._connected = self._broker_ok = False
        consumer, producer, self._consumer, self._producer = (
            self._consumer,
            self._producer,
            None,
            None,
        )
        for client in (consumer, producer):
            if client is not None:
                with contextlib.suppress(KafkaError, OSError):
                    await client.stop()

    async def _connect(self) -> None:
        self._producer = clients.producer(self.kafka, linger_ms=2)
        await self._producer.start()
        self._consumer = clients.consumer(self.kafka)
        await self._consumer.start()
        found = await self._consumer._client.fetch_all_metadata()
        partitions = []
        for logical in self._reads:
            name = self.topic(logical)
            ids = found.partitions_for_topic(name) or {0}
            partitions += [TopicPartition(name, p) for p in sorted(ids)]
        self._consumer.assign(partitions)
        await self._consumer.seek_to_end(*partitions)
        self._connected = self._broker_ok = True

    async def _run(self) -> None:
        """Connect (retrying while the brokers are down), then read and probe until cancelled."""
        while not self._connected:
            try:
                await self._connect()
            except (KafkaError, OSError) as exc:
                log.warning("cannot reach Kafka (%s); retrying in %s s", exc, RECONNECT_BACKOFF_S)
                await self._disconnect()
                await asyncio.sleep(RECONNECT_BACKOFF_S)
        probe = asyncio.create_task(self._probe(), name="ragsift-api-probe")
        try:
            await self._read()
        finally:
            probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await probe

    async def _probe(self) -> None:
        """Keep ``_broker_ok`` true only while the brokers answer a metadata request."""
        assert self._consumer is not None
        while True:
            await asyncio.sleep(BROKER_PROBE_INTERVAL_S)
            try:
                async with asyncio.timeout(BROKER_PROBE_TIMEOUT_S):
                    await self._consumer._client.fetch_all_metadata()
                self._broker_ok = True
            except (TimeoutError, KafkaError, OSError):
                self._broker_ok = False

    async def _read(self) -> None:
        assert self._consumer is not None
        logical = {self.topic(name): name for name in self._reads}
        while True:
            batches = await self._consumer.getmany(timeout_ms=200, max_records=1000)
            for tp, records in batches.items():
                name = logical[tp.topic]
                for record in records:
                    self._take(name, record.value, tp.partition, record.offset)

    def _take(self, name: str, value: bytes | None, partition: int, offset: int) -> None:
        """One record: accepted, or skipped and counted; never the reader's end. A
        result with a lone surrogate escape once decoded but could not be kept (encoded
        back): it ended the reader, and every replica answered every tenant 504 from
        then on. The codec refuses those now; anything else taking one raises is
        skipped the same way."""
        try:
            event = self._codecs[name].decode(value)
        except DecodeError as exc:  # not ours to dead-letter: the producing worker validated it
            self._drop(name, "decode", partition, offset, exc)
            return
        try:
            self.accept(name, event)
        except Exception as exc:  # whatever taking it raised: the reader outlives it
            self._drop(name, "unusable", partition, offset, exc)

    def _drop(self, name: str, reason: str, partition: int, offset: int, exc: Exception) -> None:
        """Name the skipped record in the log (where to read it again) and count it."""
        log.error(
            "skipped the %s event at partition %s offset %s (%s): %s: %r",
            name,
            partition,
            offset,
            reason,
            type(exc).__name__,
            str(exc)[:300],
        )
        if self.on_drop is not None:
            self.on_drop(name, reason)

    def accept(self, topic: str, event: Any) -> None:
        """One event read from logical topic ``topic``; a subclass says what to do with it."""
        raise NotImplementedError

    async def _publish(self, event: QueryEvent, payload: bytes, timeout_s: float) -> None:
        """Send the query; a broker that cannot take it within the request's time is a 503."""
        await self.send("queries", event.query_id, payload, timeout_s)

    async def send(self, logical: str, key: str, payload: bytes, timeout_s: float) -> None:
        """Send one encoded event to logical topic ``logical``, keyed by ``key``.

        Raises:
            KafkaError: not connected, or the broker did not take it within
                ``timeout_s`` (at most :data:`MAX_SEND_S`).
        """
        if not self.ready or self._producer is None:
            raise KafkaError("not connected to Kafka")
        try:
            async with asyncio.timeout(min(timeout_s, MAX_SEND_S)):
                await self._producer.send_and_wait(self.topic(logical), payload, key=key.encode())
        except TimeoutError as exc:
            self._broker_ok = False  # /readyz says so until the next probe gets through
            what = "query" if logical == "queries" else f"{logical} event"
            raise KafkaError(f"Kafka did not take the {what} within {timeout_s} s") from exc
