"""The checks and point layout both Qdrant adapters share (issue 18, item 5).

The adapters once carried their own copies of these; a fix to one copy could
miss the other. Each refusal here is asked of both and must read the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from retrieval_corpus import COLLECTION, DIM, IndexFactory, local_client, make_record

from ragsift.errors import ConfigurationError, RagsiftError
from ragsift.retrieval.bm25 import Bm25Encoder, SparseEncoding
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.errors import DimensionMismatchError
from ragsift.retrieval.index import DENSE_VECTOR, SPARSE_VECTOR, TERMS_FIELD, VectorIndex
from ragsift.retrieval.qdrant_common import (
    UPSERT_BATCH,
    point_parts,
    record_batches,
    tenant_counts,
)
from ragsift.retrieval.server import QdrantServerIndex

pytestmark = pytest.mark.unit

EMBEDDER_ID = HashingEmbedder(DIM).embedder_id
Refusal = Callable[[VectorIndex], Awaitable[Any]]

REFUSALS: dict[str, Refusal] = {
    "a dimension of 0": lambda index: index.ensure_collection("c2", 0, EMBEDDER_ID),
    "no embedder id": lambda index: index.ensure_collection("c2", DIM, ""),
    "a chunk of another collection": lambda index: index.upsert(
        COLLECTION, [make_record("t1", 0, "text", collection="elsewhere")]
    ),
    "a delete without a document": lambda index: index.delete(COLLECTION, "t1", ""),
    "a delete without a tenant": lambda index: index.delete(COLLECTION, "", "d1"),
    "a delete for a blank tenant": lambda index: index.delete(COLLECTION, " \t\n", "d1"),
}


async def _refusal(index: VectorIndex, refuse: Refusal) -> tuple[str, str]:
    try:
        await refuse(index)
    except (ValueError, RagsiftError) as exc:
        return type(exc).__name__, str(exc)
    return "accepted", ""


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_both_adapters_refuse_the_same_input_with_the_same_words(
    case: str, edge_factory: IndexFactory, server_factory: IndexFactory
) -> None:
    answers = []
    for factory in (edge_factory, server_factory):
        index = factory()
        await index.ensure_collection(COLLECTION, DIM, EMBEDDER_ID)
        answers.append(await _refusal(index, REFUSALS[case]))
        await index.close()
    edge, server = answers
    assert edge[0] != "accepted"
    assert edge == server


async def test_both_adapters_refuse_a_collection_of_another_bm25_encoding(tmp_path: Path) -> None:
    other = Bm25Encoder(k1=2.0)
    edge = EdgeIndex(tmp_path / "edge")
    await edge.ensure_collection(COLLECTION, DIM, EMBEDDER_ID)
    await edge.close()
    client = local_client()
    await QdrantServerIndex(client).ensure_collection(COLLECTION, DIM, EMBEDDER_ID)
    messages = []
    for index in (EdgeIndex(tmp_path / "edge", bm25=other), QdrantServerIndex(client, bm25=other)):
        with pytest.raises(ConfigurationError, match="was indexed with BM25 encoding") as caught:
            await index.collection_info(COLLECTION)
        messages.append(caught.value.message)
    assert messages[0] == messages[1]
    assert other.encoder_id in messages[0]
    await client.close()


def _indices(encoding: SparseEncoding) -> list[int]:
    return list(encoding.indices)


def test_point_parts_leave_out_an_empty_keyword_vector() -> None:
    bm25 = Bm25Encoder()
    worded, payload = point_parts(make_record("t1", 0, "reset the router"), DIM, bm25, _indices)
    stopwords, bare = point_parts(make_record("t1", 1, "the of and"), DIM, bm25, _indices)
    assert set(worded) == {DENSE_VECTOR, SPARSE_VECTOR}
    assert set(stopwords) == {DENSE_VECTOR}
    assert len(worded[DENSE_VECTOR]) == DIM
    # The payload names the same term ids the sparse vector indexes, once each.
    assert payload[TERMS_FIELD] == worded[SPARSE_VECTOR]
    assert TERMS_FIELD not in bare


def test_point_parts_check_the_dense_dimension() -> None:
    with pytest.raises(DimensionMismatchError, match=f"expected {DIM + 1}"):
        point_parts(make_record("t1", 0, "text"), DIM + 1, Bm25Encoder(), _indices)


def test_record_batches_keep_order_and_size() -> None:
    records = [make_record("t1", i, f"text {i}") for i in range(UPSERT_BATCH * 2 + 1)]
    batches = list(record_batches(records))
    assert [len(b) for b in batches] == [UPSERT_BATCH, UPSERT_BATCH, 1]
    assert [r for b in batches for r in b] == records
    assert list(record_batches([])) == []


class _Hit:
    def __init__(self, value: Any, count: int) -> None:
        self.value = value
        self.count = count


def test_tenant_counts_drop_tenants_left_with_no_chunks() -> None:
    hits = [_Hit("acme", 3), _Hit("gone", 0), _Hit("\u0645\u062b\u0627\u0644", 1)]
    assert tenant_counts(hits) == {"acme": 3, "\u0645\u062b\u0627\u0644": 1}
