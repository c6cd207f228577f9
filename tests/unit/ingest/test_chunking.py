"""Chunking: bounded sizes, overlap, stable ids, nothing lost."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsift.ingest.chunking import Chunker


def test_short_text_is_one_chunk_with_stable_id() -> None:
    chunks = Chunker().split("policy", "Refunds take 5 days.")
    assert [(c.chunk_id, c.text) for c in chunks] == [("policy:0", "Refunds take 5 days.")]


def test_empty_text_gives_no_chunks() -> None:
    assert Chunker().split("d", "  \n\n ") == []


def test_long_text_is_split_with_overlap() -> None:
    sentences = [f"Sentence number {i} says something useful." for i in range(60)]
    chunks = Chunker(max_chars=300, overlap_chars=60).split("d", " ".join(sentences))
    assert len(chunks) > 5
    assert all(len(c.text) <= 300 for c in chunks)
    for prev, nxt in itertools.pairwise(chunks):
        # the next chunk starts with words from the end of the previous one
        assert nxt.text.split()[0] in prev.text.split()[-12:]
    joined = " ".join(c.text for c in chunks)
    assert all(s in joined for s in sentences)


@pytest.mark.parametrize(("max_chars", "overlap"), [(10, 0), (100, 50), (100, -1)])
def test_bad_parameters_are_named(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"max_chars|overlap_chars"):
        Chunker(max_chars, overlap)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(codec="ascii", exclude_categories=("Cc",)), max_size=3000))
def test_every_word_survives_and_chunks_fit(text: str) -> None:
    chunker = Chunker(max_chars=120, overlap_chars=20)
    chunks = chunker.split("d", text)
    assert all(0 < len(c.text) <= 120 for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    words_out = set(" ".join(c.text for c in chunks).split())
    for word in text.split():
        if len(word) <= 120:
            assert word in words_out
