"""The Faust app factory: one app built from settings, topics from the registry.

A stop waits for the batches in flight, as Faust does, except a batch a handler
holds for a store that does not answer (Redis down), or one that failed as a whole
and is being run again: that one is given up, uncommitted, as on the plain runtime
(:meth:`PagesOnlyApp._consumer_wait_empty`).

This module, the agents and :mod:`ragsift.streams.faust_read` are the only places
that import Faust; handlers never do (ARCHITECTURE.md, "One pipeline, two runtimes").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from aiokafka import TopicPartition
from faust.transport import by_url
from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import ConsumerT, TransportT
from faust.web import Web
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from ragsift.settings import KafkaSettings
from ragsift.streams.batching import AdaptiveStream
from ragsift.streams.faust_read import SkippingTransport
from ragsift.streams.topics import TOPICS
from ragsift.workers.held import HELD_CHECK_S, holding

__all__ = ["DEFAULT_WEB_HOST", "PagesOnlyApp", "broker_credentials", "create_app", "declare_topic"]

log = logging.getLogger(__name__)

#: Loopback: a worker's pages are for the local agent or a sidecar unless the
#: deployment opens them (RAGSIFT_WORKER_WEB_HOST=0.0.0.0 in containers).
DEFAULT_WEB_HOST = "127.0.0.1"


class _PagesOnlyWeb(AiohttpWeb):
    """Faust's aiohttp server without any built-in view: only pages the app adds.

    Faust serves ``/router/`` (which names the host), ``/table/``, ``/graph/``,
    statistics and an index page by default; a worker serves /metrics,
    /healthz and /readyz and nothing else.
    """

    default_blueprints = ()
    production_blueprints = ()
    debug_blueprints = ()
    optional_blueprints = ()


class PagesOnlyApp(faust.App):
    """A Faust app whose web server carries only the pages registered with ``app.page``,
    and whose Kafka consumer reads past records it cannot read
    (:mod:`ragsift.streams.faust_read`), handing each span to :attr:`on_unreadable`."""

    #: Called on the app's loop with each span the consumer passed (its partition and
    #: an UnreadableRecordsError); the worker sets it to dead-letter the span.
    on_unreadable: Callable[[TopicPartition, Exception], Awaitable[None]] | None = None
    #: Following topic -> the topic it follows (full names), and per (topic, partition)
    #: the offset after the last record an agent handled: the consumer thread holds a
    #: following topic while the one it follows is behind (ragsift.streams.faust_follows).
    follows: dict[str, str] | None = None
    handled: dict[tuple[str, int], int] | None = None

    def __init__(self, id: str, **options: Any) -> None:
        super().__init__(id, **options)
        #: The handlers the agents drive (``attach_handler`` adds each), read at stop.
        self.hosted: list[object] = []
        #: The agents whose batch failed as a whole and is being run again, until it
        #: passes (``attach_handler``): a stop gives such a batch up, as a held one.
        self.failing: set[str] = set()

    async def _consumer_wait_empty(self, consumer: ConsumerT, logger: Any) -> None:
        """Wait for the events in flight to be acknowledged (Faust's rule, at a rebalance and
        at stop), except, at stop, a batch a handler holds for a store: it may wait for ever,
        and Faust waited with it until the worker was killed, without leaving its group.
        That batch is given up: never acknowledged, so not committed, and the next member
        of the group reads it again (:mod:`ragsift.streams.batching` keeps a batch given up
        at stop unacknowledged). So is a batch that failed as a whole and is being run
        again (:attr:`failing`), as the plain loop leaves it at stop. A batch that is only
        slow is finished first."""
        waiting = asyncio.ensure_future(super()._consumer_wait_empty(consumer, logger))
        try:
            while not waiting.done():
                if self.should_stop and (holding(self.hosted) or self.failing):
                    why = "held for a store" if holding(self.hosted) else "that keeps failing"
                    log.warning(
                        "stopping with a batch %s: not committed,"
                        " read again by the next member of the group",
                        why,
                    )
                    return
                await asyncio.wait({waiting}, timeout=HELD_CHECK_S)
            waiting.result()
        finally:
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting

    def _new_web(self) -> Web:
        # Faust picks the driver class from the ``web`` URL setting and offers no
        # option to drop its index page; this is the one place the class is built.
        return _PagesOnlyWeb(self)

    def _new_transport(self) -> TransportT:
        # As Faust does, with the skipping consumer where the driver is aiokafka's.
        url = self.conf.broker_consumer[0]
        transport = by_url(url)
        if transport is aiokafka_driver.Transport:
            transport = SkippingTransport
        return transport(self.conf.broker_consumer, self)


def broker_credentials(kafka: KafkaSettings) -> faust.auth.Credentials | None:
    """Faust credentials for the configured security protocol (None for PLAINTEXT)."""
    context: ssl.SSLContext | None = None
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(
            cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None
        )
    if kafka.security_protocol.startswith("SASL"):
        password = kafka.sasl_password.get_secret_value() if kafka.sasl_password else None
        return faust.SASLCredentials(
            username=kafka.sasl_username,
            password=password,
            mechanism=kafka.sasl_mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def create_app(
    kafka: KafkaSettings,
    *,
    app_id: str | None = None,
    web_port: int = 6066,
    web_host: str = DEFAULT_WEB_HOST,
    web_enabled: bool = True,
    **overrides: Any,
) -> faust.App:
    """A Faust app for one kind of worker.

    Consumers start at the earliest offset (a new group must not skip events
    already queued), the producer waits for all in-sync replicas, and the
    processing guarantee comes from settings (at-least-once by default:
    outputs carry deterministic ids, so replays are harmless). The web server
    binds ``web_host`` and serves only the pages the caller adds.
    """
    options: dict[str, Any] = {
        "broker": kafka.broker_url,
        "broker_credentials": broker_credentials(kafka),
        "processing_guarantee": kafka.processing_guarantee,
        "topic_partitions": kafka.partitions,
        "topic_replication_factor": kafka.replication_factor,
        "consumer_auto_offset_reset": "earliest",
        "broker_session_timeout": kafka.session_timeout_s,
        "broker_heartbeat_interval": kafka.session_timeout_s / 10,
        "producer_acks": -1,
        "producer_compression_type": (
            None if kafka.producer_compression == "none" else kafka.producer_compression
        ),
        "producer_linger": kafka.producer_linger_ms / 1000,
        "producer_max_batch_size": kafka.producer_max_batch_bytes,
        "store": "memory://",
        "web_enabled": web_enabled,
        "web_port": web_port,
        "web_bind": web_host,
        # Off even though _PagesOnlyWeb serves none of them: say so where Faust looks.
        "web_router_enabled": False,
        "web_tables_enabled": False,
        "web_graph_enabled": False,
        "web_stats_enabled": False,
        "web_metrics_enabled": False,
        "value_serializer": "raw",
        "key_serializer": "raw",
        # take_events hands a batch over as soon as nothing more is queued (the latency floor).
        "Stream": AdaptiveStream,
    }
    options.update(overrides)
    return PagesOnlyApp(app_id or kafka.app_id, **options)


def declare_topic(app: faust.App, logical: str, prefix: str) -> faust.TopicT:
    """A raw-bytes Faust topic for a registered logical topic.

    Values stay bytes: agents decode them with the codec so that a bad payload
    can be dead-lettered with its original bytes.
    """
    spec = TOPICS[logical]
    return app.topic(
        spec.name(prefix),
        value_type=bytes,
        key_type=bytes,
        value_serializer="raw",
        key_serializer="raw",
        partitions=spec.partitions,
        config=spec.config(),
    )
