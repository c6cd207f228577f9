"""Document metadata the shard cannot keep is refused at decode; the shard keeps serving.

Before: a document whose metadata nested ~126 levels was written to Qdrant Edge,
which reads payloads back with serde_json's recursion limit. Every later search
that returned it failed, its document could neither be replaced nor deleted, and
the shard refused every tenant's writes ("Not recovered from previous error")
until restarted, and again each time the document was touched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchRequest
from ragsift.schemas.ingest import DocumentEvent
from ragsift.schemas.payload import MAX_METADATA_BYTES, MAX_METADATA_DEPTH
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers.indexer import IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

EMBEDDER = HashingEmbedder(64)
TOPIC = "ragsift.documents.v1"
TEXT = "Refunds are paid within fourteen days by bank transfer."


def document(doc_id: str, text: str = TEXT, metadata: Any = None) -> bytes:
    body = {"event_id": f"e-{doc_id}", "tenant_id": "acme", "doc_id": doc_id, "text": text}
    raw = json.dumps(body)
    if metadata is None:
        return raw.encode()
    shown = metadata if isinstance(metadata, str) else json.dumps(metadata)
    return (raw[:-1] + ', "metadata": ' + shown + "}").encode()


def nested(depth: int) -> str:
    return '{"a": ' + "[" * depth + "1" + "]" * depth + "}"


class Rig:
    def __init__(self, index: EdgeIndex):
        self.index = index
        self.sender, self.metrics = RecordingSender(), Metrics()
        handler = IndexerHandler(Indexer(index, EMBEDDER))
        self.router = BatchRouter(handler, self.sender, metrics=self.metrics, deadline_s=10)
        self.offset = 0

    async def feed(self, *values: bytes) -> None:
        batch = []
        for value in values:
            batch.append(
                Received(value, record_key("documents", value, b"k"), TOPIC, 0, self.offset)
            )
            self.offset += 1
        await self.router.process(batch)

    async def texts(self) -> list[str]:
        vector = (await EMBEDDER.embed(["refunds"]))[0]
        request = SearchRequest("acme", "refunds", dense_vector=vector, mode="hybrid", limit=20)
        return sorted(h.text for h in await self.index.search("default", request))


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    index = EdgeIndex(tmp_path / "edge")
    built = Rig(index)
    await built.feed(document("kept"))
    yield built
    await index.close()


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        (nested(MAX_METADATA_DEPTH), f"nests deeper than {MAX_METADATA_DEPTH} levels"),
        (nested(126), f"nests deeper than {MAX_METADATA_DEPTH} levels"),  # what broke the shard
        (nested(900), f"nests deeper than {MAX_METADATA_DEPTH} levels"),
        ('{"a": NaN}', "which is no JSON number"),
        ('{"a": [1, -Infinity]}', "which is no JSON number"),
        ('{"\\ud800": 1}', "a lone surrogate: not Unicode text"),
        ('{"a": {"b": "\\udfff"}}', "a lone surrogate: not Unicode text"),
        ({"blob": "m" * MAX_METADATA_BYTES}, f"past the {MAX_METADATA_BYTES} each chunk can copy"),
    ],
)
async def test_metadata_the_shard_cannot_keep_is_dead_lettered_at_decode(
    rig: Rig, metadata: Any, reason: str
) -> None:
    poison = document("kept", "A new version that must not replace the old one.", metadata)
    await rig.feed(poison, document("after", "Refunds for damaged goods are immediate."))
    [letter] = rig.sender.dead_letters()
    assert letter.stage == "decode"
    assert reason in letter.error
    assert letter.original == poison
    value = rig.metrics.registry.get_sample_value(
        "ragsift_dead_letters_total", {"worker": "indexer", "stage": "decode"}
    )
    assert value == 1
    # The old version is still there, the next document was written, and the shard
    # takes writes and answers searches.
    assert await rig.texts() == sorted([TEXT, "Refunds for damaged goods are immediate."])
    await rig.feed(document("kept", "Refunds are paid within a week."))
    assert "Refunds are paid within a week." in await rig.texts()


async def test_metadata_within_the_limits_is_kept(rig: Rig) -> None:
    metadata = {"title": "Refunds", "tags": ["money", "policy"], "n": 3, "o": {"p": None}}
    await rig.feed(document("meta", "Refunds of gift cards are not possible.", metadata))
    await rig.feed(document("deep", "Refunds need a receipt.", nested(MAX_METADATA_DEPTH - 1)))
    assert rig.sender.dead_letters() == []
    assert len(await rig.texts()) == 3


async def test_a_version_the_indexer_refuses_withdraws_the_old_one(rig: Rig) -> None:
    # Compaction keeps this record as the key's last: an index rebuilt from the topic
    # has no version of "kept". Keeping the old one here made replicas disagree.
    poison = document("kept", "A version with a reserved key.", {"text": "shadow"})
    await rig.feed(poison, document("after", "Refunds for damaged goods are immediate."))
    [letter] = rig.sender.dead_letters()
    assert letter.stage == "validate"
    assert "reserved payload keys: ['text']" in letter.error
    assert "its indexed version is withdrawn" in letter.error
    assert await rig.texts() == ["Refunds for damaged goods are immediate."]
    await rig.feed(document("kept"))  # a valid version restores it
    assert await rig.texts() == sorted([TEXT, "Refunds for damaged goods are immediate."])


class _Down(HashingEmbedder):
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("embedder down")


async def test_an_upsert_the_embedder_cannot_take_leaves_the_old_version(rig: Rig) -> None:
    # Before: the old chunks were deleted first, then embedding the new ones failed,
    # and the document had no version left.
    event = DocumentEvent.model_validate_json(document("kept", "A version never embedded."))
    with pytest.raises(RuntimeError, match="embedder down"):
        await Indexer(rig.index, _Down(64)).apply(event)
    assert await rig.texts() == [TEXT]
