"""Shared fixtures of the evaluation tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from tests.unit.evaluation.test_selfcal_collection import documents


@pytest.fixture
async def index(tmp_path: Path) -> AsyncIterator[EdgeIndex]:
    """A collection ``docs``: tenant alpha's 40 made-up documents, beta's 3."""
    built = EdgeIndex(tmp_path / "edge")
    embedder = HashingEmbedder()
    await Indexer(built, embedder).ingest("alpha", "docs", documents(40))
    await Indexer(built, embedder).ingest("beta", "docs", documents(3))
    yield built
    await built.close()
