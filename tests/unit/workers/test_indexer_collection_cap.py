"""A document event that would create a collection past RAGSIFT_QDRANT_MAX_COLLECTIONS.

Before the cap, every new collection name on the documents topic made a Qdrant Edge
shard (64 MiB of write-ahead log preallocated, a handle open for the life of the
worker): a producer with a typo, or a hostile one, could fill the disk one name at a
time. Past the cap the event is dead-lettered (stage ``collection_limit``), counted,
and the worker goes on; collections that exist keep taking documents.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchRequest, VectorIndex
from ragsift.settings import QdrantSettings
from ragsift.streams.routing import BatchRouter, Received
from ragsift.wiring import build_index
from ragsift.workers.indexer import IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

pytestmark = pytest.mark.unit

EMBEDDER = HashingEmbedder(64)
TOPIC = "ragsift.documents.v1"
CAP = 2


def document(collection: str, doc_id: str, text: str = "Refunds take fourteen days.") -> bytes:
    body = {
        "event_id": f"e-{collection}-{doc_id}",
        "tenant_id": "acme",
        "collection": collection,
        "doc_id": doc_id,
        "text": text,
    }
    return json.dumps(body).encode()


class Rig:
    """The indexer worker's router over an index built as a worker builds it."""

    def __init__(self, index: VectorIndex):
        self.index = index
        self.sender, self.metrics = RecordingSender(), Metrics()
        handler = IndexerHandler(Indexer(index, EMBEDDER))
        self.router = BatchRouter(handler, self.sender, metrics=self.metrics, deadline_s=10)
        self.offset = 0

    async def feed(self, *values: bytes) -> None:
        batch = []
        for value in values:
            key = record_key("documents", value, b"k")
            batch.append(Received(value, key, TOPIC, 0, self.offset))
            self.offset += 1
        await self.router.process(batch)

    def refused(self) -> float | None:
        return self.metrics.registry.get_sample_value(
            "ragsift_dead_letters_total", {"worker": "indexer", "stage": "collection_limit"}
        )

    async def texts(self, collection: str) -> list[str]:
        vector = (await EMBEDDER.embed(["refunds"]))[0]
        request = SearchRequest("acme", "refunds", dense_vector=vector, mode="hybrid", limit=20)
        return sorted(h.text for h in await self.index.search(collection, request))


def capped(data_dir: Path, cap: int = CAP) -> VectorIndex:
    return build_index(QdrantSettings(max_collections=cap), data_dir)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    index = capped(tmp_path)
    built = Rig(index)
    yield built
    await index.close()


async def test_the_event_past_the_cap_is_dead_lettered_and_the_next_one_is_indexed(
    rig: Rig, tmp_path: Path
) -> None:
    await rig.feed(document("a", "d1"), document("b", "d1"))
    past = document("typo", "d1")
    await rig.feed(past, document("a", "d2", "Refunds of gift cards are not possible."))
    [letter] = rig.sender.dead_letters()
    assert letter.stage == "collection_limit"
    assert letter.error_type == "CollectionLimitError"
    assert letter.original == past
    assert letter.tenant_id == "acme"
    for named in ("'typo'", "RAGSIFT_QDRANT_MAX_COLLECTIONS", f"={CAP}"):
        assert named in letter.error
    assert rig.refused() == 1
    # The worker went on: the next event, to a collection that exists, is indexed.
    assert await rig.texts("a") == [
        "Refunds of gift cards are not possible.",
        "Refunds take fourteen days.",
    ]
    # Nothing of the refused collection was made on disk.
    on_disk = sorted(p.name for p in (tmp_path / "qdrant").iterdir() if p.name[0] != ".")
    assert on_disk == ["a", "a.ragsift.json", "b", "b.ragsift.json"]


async def test_existing_collections_keep_taking_documents_at_the_cap(rig: Rig) -> None:
    await rig.feed(document("a", "d1"), document("b", "d1"))
    await rig.feed(
        document("a", "d1", "Refunds take a week now."),
        document("b", "d2", "Refunds need a receipt."),
        document("c", "d1"),
        document("d", "d1"),
    )
    assert [letter.stage for letter in rig.sender.dead_letters()] == ["collection_limit"] * 2
    assert rig.refused() == 2
    assert await rig.texts("a") == ["Refunds take a week now."]
    assert await rig.texts("b") == ["Refunds need a receipt.", "Refunds take fourteen days."]


async def test_the_cap_counts_collections_made_before_a_restart(tmp_path: Path) -> None:
    before = Rig(capped(tmp_path))
    await before.feed(document("a", "d1"), document("b", "d1"))
    await before.index.close()
    after = Rig(capped(tmp_path))  # a new worker on the same data dir: nothing in memory
    try:
        await after.feed(document("c", "d1"), document("b", "d2", "Refunds need a receipt."))
        [letter] = after.sender.dead_letters()
        assert letter.stage == "collection_limit"
        assert "'c'" in letter.error
        assert await after.texts("b") == ["Refunds need a receipt.", "Refunds take fourteen days."]
    finally:
        await after.index.close()


async def test_a_delete_in_a_collection_past_the_cap_creates_nothing_and_is_not_refused(
    rig: Rig,
) -> None:
    await rig.feed(document("a", "d1"), document("b", "d1"))
    fields = {"event_id": "e-del", "tenant_id": "acme", "collection": "c", "doc_id": "d1"}
    delete = json.dumps({**fields, "op": "delete"}).encode()
    await rig.feed(delete)
    assert rig.sender.dead_letters() == []
    assert rig.refused() is None


async def test_a_cap_of_zero_is_no_cap(tmp_path: Path) -> None:
    unbounded = Rig(capped(tmp_path, 0))
    try:
        await unbounded.feed(*(document(f"c{n}", "d1") for n in range(CAP + 2)))
        assert unbounded.sender.dead_letters() == []
    finally:
        await unbounded.index.close()
