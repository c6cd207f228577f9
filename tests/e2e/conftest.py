"""e2e fixtures: the real services (required like the integration tier), worker stacks."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.e2e.harness import Stack, prepare_index
from tests.integration.conftest import (  # noqa: F401 - re-exported fixtures
    kafka_bootstrap,
    kafka_settings,
    redis_settings,
)


@pytest.fixture(scope="module")
def template_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose embedded shard holds the sample handbook."""
    path = tmp_path_factory.mktemp("template")
    asyncio.run(prepare_index(path))
    return path


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str,  # noqa: F811 - the fixture above
    redis_settings: object,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Stack:
    """Topic prefix, consumer group and Redis key prefix unique to one test module."""
    url = redis_settings.url  # type: ignore[attr-defined]  # RedisSettings
    return Stack(
        bootstrap=kafka_bootstrap,
        redis_url=url,
        prefix=f"e2e-{uuid.uuid4().hex[:8]}",
        base_dir=tmp_path_factory.mktemp("stack"),
    )
