"""Both index adapters refuse a new collection past their cap, counted on the backend.

The count is what the backend holds when the collection would be made (Qdrant Edge:
the collections on disk under the root; a Qdrant server: the collections it lists),
so collections made before a restart, or by another process, count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from retrieval_corpus import DIM, local_client, make_record

from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.errors import CollectionLimitError, CollectionNotFoundError
from ragsift.retrieval.index import VectorIndex
from ragsift.retrieval.server import QdrantServerIndex

pytestmark = pytest.mark.unit

EMBEDDER_ID = HashingEmbedder(DIM).embedder_id
CAP = 2

Capped = Callable[[int | None], VectorIndex]


@pytest.fixture(params=["edge", "server"])
async def capped(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Capped]:
    """Builds indexes on one backend (one Edge root, one local-mode client) with a cap."""
    client = local_client()
    made: list[VectorIndex] = []

    def build(cap: int | None) -> VectorIndex:
        index: VectorIndex = (
            EdgeIndex(tmp_path / "edge", max_collections=cap)
            if request.param == "edge"
            else QdrantServerIndex(client, max_collections=cap)
        )
        made.append(index)
        return index

    yield build
    if request.param == "edge":
        for index in made:
            await index.close()
    else:
        await client.close()


async def test_a_new_collection_past_the_cap_is_refused_and_not_made(capped: Capped) -> None:
    index = capped(CAP)
    for name in ("a", "b"):
        await index.ensure_collection(name, DIM, EMBEDDER_ID)
    with pytest.raises(CollectionLimitError) as caught:
        await index.ensure_collection("c", DIM, EMBEDDER_ID)
    refused = caught.value
    assert (refused.collection, refused.limit, refused.count) == ("c", CAP, CAP)
    assert refused.stage == "collection_limit"
    assert str(refused).startswith("collection 'c' not created: ")
    assert "RAGSIFT_QDRANT_MAX_COLLECTIONS=2" in str(refused)
    with pytest.raises(CollectionNotFoundError):
        await index.collection_info("c")
    # At the cap, the collections that exist are ensured and written as before.
    info = await index.ensure_collection("a", DIM, EMBEDDER_ID)
    assert info.points_count == 0
    assert await index.upsert("a", [make_record("acme", 0, "text", collection="a")]) == 1
    assert (await index.collection_info("a")).points_count == 1


async def test_collections_made_before_count(capped: Capped) -> None:
    first = capped(None)  # made without a cap (before a restart, or by another process)
    for name in ("a", "b", "c"):
        await first.ensure_collection(name, DIM, EMBEDDER_ID)
    if isinstance(first, EdgeIndex):
        await first.close()
    again = capped(CAP)
    with pytest.raises(CollectionLimitError) as caught:
        await again.ensure_collection("d", DIM, EMBEDDER_ID)
    assert caught.value.count == 3
    await again.ensure_collection("b", DIM, EMBEDDER_ID)  # over the cap already: still usable


async def test_no_cap_makes_as_many_as_asked(capped: Capped) -> None:
    index = capped(None)
    for n in range(CAP + 2):
        await index.ensure_collection(f"c{n}", DIM, EMBEDDER_ID)


@pytest.mark.parametrize("cap", [0, -1, True])
def test_a_cap_below_one_is_refused(tmp_path: Path, cap: int) -> None:
    with pytest.raises(ValueError, match="max_collections must be >= 1"):
        EdgeIndex(tmp_path, max_collections=cap)
    with pytest.raises(ValueError, match="max_collections must be >= 1"):
        QdrantServerIndex(local_client(), max_collections=cap)
