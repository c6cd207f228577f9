"""Fixtures for tests against the real Kafka broker and redis-server.

The services are started by ``scripts/services up`` (``make test`` does it).
When one is missing the tests fail if ``CI`` or ``RAGSIFT_REQUIRE_SERVICES``
is set — a skipped integration test must never count as a pass — and skip
with the command to run otherwise.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from ragsift.settings import KafkaSettings, RedisSettings

KAFKA_DEFAULT = "127.0.0.1:19092"  # scripts/services' ports
REDIS_DEFAULT = "redis://127.0.0.1:16379/0"


def _required() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("CI", "RAGSIFT_REQUIRE_SERVICES")
    )


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _need(service: str, host: str, port: int) -> None:
    if _reachable(host, port):
        return
    message = f"{service} is not reachable at {host}:{port}; start it with `scripts/services up`"
    if _required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """host:port of the test broker (RAGSIFT_KAFKA_BOOTSTRAP_SERVERS or the script's default)."""
    bootstrap = os.environ.get("RAGSIFT_KAFKA_BOOTSTRAP_SERVERS", KAFKA_DEFAULT)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    _need("Kafka", host, int(port))
    return bootstrap


@pytest.fixture(scope="session")
def kafka_settings(kafka_bootstrap: str) -> KafkaSettings:
    """Settings pointing at the test broker."""
    return KafkaSettings(bootstrap_servers=kafka_bootstrap)


@pytest.fixture(scope="session")
def redis_settings() -> RedisSettings:
    """Settings pointing at the test redis-server."""
    url = os.environ.get("RAGSIFT_REDIS_URL", REDIS_DEFAULT)
    hostport = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, port = hostport.rsplit(":", 1)
    _need("Redis", host, int(port))
    return RedisSettings(url=url)


@pytest.fixture
def unique() -> Iterator[str]:
    """A short unique suffix so tests never share topics, groups or keys."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
async def admin(kafka_bootstrap: str) -> AsyncIterator[object]:
    """An aiokafka admin client on the test broker."""
    from aiokafka.admin import AIOKafkaAdminClient

    client = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await client.start()
    try:
        yield client
    finally:
        await client.close()
