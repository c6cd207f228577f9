"""Fixtures shared by the worker tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.retrieval.edge import EdgeIndex


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """An empty Qdrant Edge shard under ``tmp_path``, closed after the test."""
    shard = EdgeIndex(tmp_path / "edge")
    yield shard
    await shard.close()
