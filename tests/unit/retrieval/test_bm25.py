"""BM25 encodings: unique ascending indices, as Qdrant server and local mode require."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qdrant_client import models
from retrieval_corpus import local_client

from ragsift.retrieval.bm25 import Bm25Encoder, SparseEncoding, canonical_sparse

pytestmark = pytest.mark.unit

ENCODER = Bm25Encoder()


def test_canonical_sparse_sorts_and_merges_duplicates() -> None:
    merged = canonical_sparse([7, 3, 7, 1, 3], [1.0, 2.0, 0.5, 4.0, 1.0])
    assert merged == SparseEncoding((1, 3, 7), (4.0, 3.0, 1.5))


def _merged_in_order(indices: list[int], values: list[float]) -> SparseEncoding:
    """The rule canonical_sparse implements, spelled out: merge in input order, then sort."""
    merged: dict[int, float] = {}
    for index, value in zip(indices, values, strict=True):
        merged[index] = merged.get(index, 0.0) + value
    ordered = sorted(merged)
    return SparseEncoding(tuple(ordered), tuple(merged[i] for i in ordered))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**32 - 1) | st.integers(0, 6),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=12,
    )
)
def test_canonical_sparse_follows_the_merge_rule_sorted_input_or_not(
    pairs: list[tuple[int, float]],
) -> None:
    indices, values = [i for i, _ in pairs], [v for _, v in pairs]
    assert canonical_sparse(indices, values) == _merged_in_order(indices, values)
    ascending = sorted(dict(pairs).items())  # unique and sorted: the fast path
    keys, weights = [i for i, _ in ascending], [v for _, v in ascending]
    assert canonical_sparse(keys, weights) == _merged_in_order(keys, weights)


def test_canonical_sparse_of_sorted_input_keeps_it_and_normalizes_negative_zero() -> None:
    encoding = canonical_sparse((1, 5, 9), (0.5, -0.0, 2))
    assert encoding == SparseEncoding((1, 5, 9), (0.5, 0.0, 2.0))
    assert str(encoding.values[1]) == "0.0"  # as the merge gives it: 0.0 + -0.0
    with pytest.raises(ValueError, match="shorter"):  # as before: zip(strict=True)
        canonical_sparse([1, 2, 3], [1.0, 1.0])


def test_sparse_encoding_rejects_unsorted_or_repeated_indices() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        SparseEncoding((3, 3), (1.0, 1.0))
    with pytest.raises(ValueError, match="length"):
        SparseEncoding((1, 2), (1.0,))


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300))
def test_encodings_have_unique_sorted_indices(text: str) -> None:
    for encoding in (ENCODER.encode_document(text), ENCODER.encode_query(text)):
        assert list(encoding.indices) == sorted(set(encoding.indices))
        assert len(encoding.indices) == len(encoding.values)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=300))
def test_terms_are_the_indexed_encodings_term_set(text: str) -> None:
    assert ENCODER.terms(text) == frozenset(ENCODER.encode_document(text).indices)


def test_stemming_merges_inflections_and_stopwords_vanish() -> None:
    doc = ENCODER.encode_document("cats cat running runs the and")
    assert len(doc) == 2  # cat, run
    assert ENCODER.encode_query("the and of").is_empty
    assert ENCODER.encode_query("").is_empty


async def test_local_mode_rejects_duplicates_but_accepts_canonical_encodings() -> None:
    client = local_client()
    await client.create_collection(
        "c", vectors_config={}, sparse_vectors_config={"bm25": models.SparseVectorParams()}
    )
    raw = models.SparseVector(indices=[5, 5], values=[1.0, 2.0])
    with pytest.raises(ValueError, match="unique"):
        await client.upsert("c", [models.PointStruct(id=1, vector={"bm25": raw})])
    fixed = canonical_sparse(raw.indices, raw.values)
    vector = models.SparseVector(indices=list(fixed.indices), values=list(fixed.values))
    await client.upsert("c", [models.PointStruct(id=1, vector={"bm25": vector})])
    await client.close()


def test_encoder_checks_its_parameters() -> None:
    with pytest.raises(ValueError, match="b must be"):
        Bm25Encoder(b=1.5)
    with pytest.raises(ValueError, match="avg_len"):
        Bm25Encoder(avg_len=0)
    assert Bm25Encoder().encoder_id == "qdrant-bm25-english-k1.2-b0.75-avg256"
