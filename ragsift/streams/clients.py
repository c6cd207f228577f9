"""Every plain aiokafka client ragsift makes, built from the one KafkaSettings.

The Faust workers get their credentials from :func:`ragsift.streams.app.broker_credentials`;
everything else (the HTTP API, ``submit``, ``tail``, topic creation) comes
through here, so a deployment configured for ``SASL_SSL`` never has a client
that quietly talks plaintext.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from ragsift.settings import KafkaSettings

__all__ = ["admin_client", "connection_options", "consumer", "producer", "ssl_context"]


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext | None:
    """A verifying TLS context for SSL / SASL_SSL (the configured CA file, or the system's)."""
    if kafka.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    return ssl.create_default_context(cafile=str(kafka.ssl_cafile) if kafka.ssl_cafile else None)


def connection_options(kafka: KafkaSettings) -> dict[str, Any]:
    """The keyword arguments every aiokafka client needs to reach and log in to the cluster."""
    options: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "security_protocol": kafka.security_protocol,
    }
    context = ssl_context(kafka)
    if context is not None:
        options["ssl_context"] = context
    if kafka.security_protocol.startswith("SASL"):
        assert kafka.sasl_password is not None  # the settings validator guarantees it
        options["sasl_mechanism"] = kafka.sasl_mechanism
        options["sasl_plain_username"] = kafka.sasl_username
        options["sasl_plain_password"] = kafka.sasl_password.get_secret_value()
    return options


def producer(kafka: KafkaSettings, **options: Any) -> AIOKafkaProducer:
    """A producer for the configured cluster (``acks="all"`` unless told otherwise)."""
    options.setdefault("acks", "all")
    return AIOKafkaProducer(**connection_options(kafka), **options)


def consumer(kafka: KafkaSettings, *topics: str, **options: Any) -> AIOKafkaConsumer:
    """A consumer for the configured cluster; offsets are never auto-committed by default."""
    options.setdefault("enable_auto_commit", False)
    return AIOKafkaConsumer(*topics, **connection_options(kafka), **options)


def admin_client(kafka: KafkaSettings, **options: Any) -> AIOKafkaAdminClient:
    """An admin client for the configured cluster."""
    return AIOKafkaAdminClient(**connection_options(kafka), **options)
