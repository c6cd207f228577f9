"""The indexer's deadline grows with the text it embeds.

Before: one flat deadline (30 s) for every call. A streaming worker indexing the zsh
manual on a busy two-core machine dead-lettered a 300-chunk page at that deadline,
though the indexer was only slow: the document never reached the index.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import numpy as np
import pytest

from ragsift.ingest.indexer import Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.schemas.ingest import DocumentEvent
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers import indexer as indexer_module
from ragsift.workers.indexer import MAX_DEADLINE_S, IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

TOPIC = "ragsift.documents.v1"
FLAT_S = 0.3  # the runtime's deadline in these tests
SENTENCE = "Refunds are paid within fourteen days by bank transfer. "


class SlowEmbedder(HashingEmbedder):
    """The hashing embedder at a pace: ``per_text_s`` a text, or never (``hang``)."""

    def __init__(self, per_text_s: float, hang: bool = False) -> None:
        super().__init__(64)
        self.per_text_s, self.hang = per_text_s, hang

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        await asyncio.sleep(3600 if self.hang else self.per_text_s * len(texts))
        return await super().embed(texts)


def document(doc_id: str, text: str) -> bytes:
    body = {"event_id": f"e-{doc_id}", "tenant_id": "acme", "doc_id": doc_id, "text": text}
    return json.dumps(body).encode()


async def feed(index: EdgeIndex, embedder: HashingEmbedder, *values: bytes) -> RecordingSender:
    sender = RecordingSender()
    handler = IndexerHandler(Indexer(index, embedder))
    router = BatchRouter(handler, sender, metrics=Metrics(), deadline_s=FLAT_S)
    keys = [record_key("documents", v, b"k") for v in values]
    await router.process(
        [Received(v, k, TOPIC, 0, i) for i, (v, k) in enumerate(zip(values, keys, strict=True))]
    )
    return sender


async def test_a_long_document_is_indexed_past_the_flat_deadline(
    index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexer_module, "SLOWEST_CHARS_PER_S", 5_000)  # 30,000 chars: +6 s
    long_text = SENTENCE * 540  # ~30,000 characters, many chunks
    slow = SlowEmbedder(per_text_s=0.02)
    sender = await feed(index, slow, document("manual", long_text), document("note", SENTENCE))
    assert sender.dead_letters() == []  # at 0.3 s flat, "manual" was dead-lettered
    documents = await index.documents("default", "acme")  # doc id -> chunks
    assert set(documents) == {"manual", "note"}
    assert documents["manual"] > 10


async def test_a_stuck_indexer_still_ends_at_its_deadline(index: EdgeIndex) -> None:
    sender = await feed(index, SlowEmbedder(0.0, hang=True), document("short", SENTENCE))
    [letter] = sender.dead_letters()
    assert letter.stage == "deadline"
    assert "within 0.3" in letter.error  # 56 characters add 0.03 s to the flat 0.3 s


def test_the_deadline_grows_with_the_text_up_to_a_bound() -> None:
    handler = IndexerHandler(Indexer(EdgeIndex.__new__(EdgeIndex), HashingEmbedder(64)))

    def events(*sizes: int) -> list[DocumentEvent]:
        return [
            DocumentEvent(event_id=f"e{i}", tenant_id="t", doc_id=f"d{i}", text="x" * n)
            for i, n in enumerate(sizes)
        ]

    rate = indexer_module.SLOWEST_CHARS_PER_S
    assert handler.deadline_for(events(), 30.0) == 30.0
    assert handler.deadline_for(events(rate * 10), 30.0) == pytest.approx(40.0)
    assert handler.deadline_for(events(rate * 10, rate * 5), 30.0) == pytest.approx(45.0)
    assert handler.deadline_for(events(1_000_000), 30.0) == pytest.approx(30.0 + 1e6 / rate)
    assert handler.deadline_for(events(1_000_000, 1_000_000), 30.0) == MAX_DEADLINE_S
    # a runtime deadline set longer than the bound is never shortened
    assert handler.deadline_for(events(1_000_000), 900.0) == 900.0
    delete = DocumentEvent(event_id="x", tenant_id="t", doc_id="d", op="delete")
    assert handler.deadline_for([delete], 30.0) == 30.0
