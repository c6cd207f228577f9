"""Fixtures of the retrieval unit tests: both index adapters, empty or with the corpus."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from retrieval_corpus import COLLECTION, DIM, IndexFactory, corpus_records, local_client

from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import VectorIndex
from ragsift.retrieval.server import QdrantServerIndex


@pytest.fixture
def edge_factory(tmp_path: Path) -> IndexFactory:
    """Builds EdgeIndex instances under a fresh directory (keyword overrides pass through)."""
    counter = iter(range(1_000_000))

    def build(**kwargs: Any) -> VectorIndex:
        return EdgeIndex(tmp_path / f"edge-{next(counter)}", **kwargs)

    return build


@pytest.fixture
def server_factory() -> IndexFactory:
    """Builds QdrantServerIndex instances on qdrant-client local mode."""

    def build(**kwargs: Any) -> VectorIndex:
        return QdrantServerIndex(local_client(), **kwargs)

    return build


@pytest.fixture(params=["edge", "server"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    """Each adapter in turn, with the corpus indexed."""
    built: VectorIndex = (
        EdgeIndex(tmp_path / "edge")
        if request.param == "edge"
        else QdrantServerIndex(local_client())
    )
    await built.ensure_collection(COLLECTION, DIM, HashingEmbedder(DIM).embedder_id)
    await built.upsert(COLLECTION, corpus_records())
    yield built
    await built.close()
