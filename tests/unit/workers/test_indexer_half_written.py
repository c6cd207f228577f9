"""A document version that cannot be embedded in full leaves the old version whole.

Before: the old chunks were deleted with the first 64 new ones written, so an
embedder that failed on a later batch (down, or slow past the deadline) left part of
the new version in the index, served, and never repaired: the event's offset was
committed with its dead letter (helper-24 on a real broker: 64 of 100 chunks).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from ragsift.ingest.chunking import Chunker
from ragsift.ingest.indexer import EMBED_BATCH, Indexer
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.streams.routing import BatchRouter, Received
from ragsift.workers.indexer import IndexerHandler
from tests.unit.streams.scripted import RecordingSender, record_key

SENTENCE = "Refunds are paid within fourteen days by bank transfer. "


class FailingAfter(HashingEmbedder):
    """The hashing embedder, failing from its ``calls``-th call on."""

    def __init__(self, calls: int) -> None:
        super().__init__(64)
        self.left = calls

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.left == 0:
            raise TimeoutError("the embedder did not answer")
        self.left -= 1
        return await super().embed(texts)


def version(text: str) -> bytes:
    body = {"event_id": f"e-{len(text)}", "tenant_id": "acme", "doc_id": "manual", "text": text}
    return json.dumps(body).encode()


async def feed(index: EdgeIndex, embedder: HashingEmbedder, value: bytes) -> RecordingSender:
    sender = RecordingSender()
    handler = IndexerHandler(Indexer(index, embedder))
    router = BatchRouter(handler, sender, metrics=Metrics(), deadline_s=30.0)
    key = record_key("documents", value, b"k")
    await router.process([Received(value, key, "ragsift.documents.v1", 0, 0)])
    return sender


async def test_a_version_that_fails_to_embed_leaves_the_old_one_whole(index: EdgeIndex) -> None:
    old = SENTENCE * 20
    assert (await feed(index, HashingEmbedder(64), version(old))).dead_letters() == []
    before = (await index.documents("default", "acme"))["manual"]
    new = "Returns are accepted for thirty days with a receipt. " * 2_000
    assert len(Chunker().split("manual", new)) > EMBED_BATCH  # more than one batch
    sender = await feed(index, FailingAfter(calls=1), version(new))
    [letter] = sender.dead_letters()  # the second batch of chunks failed
    assert "did not answer" in letter.error
    assert (await index.documents("default", "acme")) == {"manual": before}
