"""Every plain Kafka client honours the configured security settings (finding #7)."""

from __future__ import annotations

import ssl

import pytest

from ragsift.settings import KafkaSettings
from ragsift.streams import clients


def sasl_ssl() -> KafkaSettings:
    return KafkaSettings(
        bootstrap_servers="broker-1:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="ragsift",
        sasl_password="s3cret",  # type: ignore[arg-type]
    )


def test_plaintext_options_carry_no_credentials() -> None:
    options = clients.connection_options(KafkaSettings(bootstrap_servers="b:9092"))
    assert options == {"bootstrap_servers": "b:9092", "security_protocol": "PLAINTEXT"}


def test_sasl_ssl_options_carry_tls_and_login() -> None:
    options = clients.connection_options(sasl_ssl())
    assert options["security_protocol"] == "SASL_SSL"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert options["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["sasl_plain_username"] == "ragsift"
    assert options["sasl_plain_password"] == "s3cret"


@pytest.mark.parametrize("make", [clients.producer, clients.consumer])
async def test_producer_and_consumer_are_built_with_the_security_settings(make) -> None:
    client = make(sasl_ssl())
    inner = getattr(client, "_client", None) or client.client
    assert inner._security_protocol == "SASL_SSL"
    assert inner._sasl_mechanism == "SCRAM-SHA-512"
    assert inner._sasl_plain_username == "ragsift"
    assert inner._ssl_context is not None
    if make is clients.producer:
        await client.stop()  # never started: closes without a connection


async def test_admin_client_is_built_with_the_security_settings() -> None:
    admin = clients.admin_client(sasl_ssl())
    assert admin._client._security_protocol == "SASL_SSL"
    assert admin._client._sasl_plain_password == "s3cret"


def test_no_module_builds_a_kafka_client_by_hand() -> None:
    """Only the factory (and Faust's app) may construct aiokafka clients."""
    from pathlib import Path

    import ragsift

    root = Path(ragsift.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "clients.py"
        and any(
            f"{name}(" in path.read_text(encoding="utf-8")
            for name in ("AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient")
        )
    ]
    assert offenders == []
