"""The reader: sentence splitting, IDF term coverage, and MaxSim over a hit's sentences."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsift.confidence.config import SIGNAL_DEPTH
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import l2_normalize
from ragsift.retrieval.embedders.base import WrappedEmbedder
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.reader import (
    _SENTENCE_END,
    STOP_TOKENS,
    TOKEN_CACHE_SIZE,
    ChunkTerms,
    Reader,
    ReaderItem,
    TokenStates,
    split_sentences,
    term_coverage,
    token_match,
)
from ragsift.retrieval.recent import RecentTexts

WORDS = ("cat", "dog", "fish")


class WordEmbedder:
    """A real, deterministic embedder: one axis per word of WORDS, counts normalized.

    The whole of "The dog barked. The cat sat." points between cat and dog; each
    sentence points at its own animal, which is what MaxSim over sentences sees.
    """

    embedder_id = "test:words-3"
    dim = len(WORDS)

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        counts = [[t.lower().count(w) for w in WORDS] for t in texts]
        return l2_normalize(np.array(counts, dtype=np.float32).reshape(len(texts), self.dim))

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        return (await self.embed([text]))[0]


class FailingEmbedder(WordEmbedder):
    """An embedder whose backend is down."""

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise ConnectionError("embedder backend down")


# -- splitter ---------------------------------------------------------------------------------


def test_split_sentences_on_end_punctuation_followed_by_a_capital() -> None:
    text = 'The cat sat on the mat. "Then it left the room." It came back at 5 p.m. today.'
    assert split_sentences(text) == [
        "The cat sat on the mat.",
        '"Then it left the room."',
        "It came back at 5 p.m. today.",
    ]


def test_split_sentences_keeps_closing_quotes_and_splits_on_line_breaks() -> None:
    text = 'She said "it is over." Nobody answered her at all\nA new paragraph starts here.'
    assert split_sentences(text) == [
        'She said "it is over."',
        "Nobody answered her at all",
        "A new paragraph starts here.",
    ]


def test_short_fragments_join_the_sentence_before() -> None:
    assert split_sentences("The agency moved to the U.S. Army. In 1990.") == [
        "The agency moved to the U.S. Army. In 1990."
    ]


def test_long_texts_pack_into_max_sentences_runs_and_lose_nothing() -> None:
    sentences = [f"Sentence number {i} is right here." for i in range(7)]
    packed = split_sentences(" ".join(sentences), max_sentences=3)
    assert len(packed) == 3
    assert " ".join(packed) == " ".join(sentences)


# The splitter's pattern before it was reordered to start with its whitespace (4x
# faster): every break must stay where this one put it.
_SPEC_SENTENCE_END = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])|\n+"
)
# Characters the pattern looks at, other whitespace, and letters it does not.
_SPLIT_ALPHABET = (
    ".!?\"'\u201c\u201d\u2018\u2019()[] \n\t\r\x0b\x0c\u00a0\u2003\u3000aZ9x\u00e9\u6771"
)


# Single characters rarely line up into ".\u201d  \n\nA"; these pieces often do.
_SPLIT_PIECES = (".", "!", "?", "\u201d", ")", '"', "(", "A", "7", "a")
_SPLIT_PIECES += (" ", "  ", "\n", "\n\n", "\t")


@settings(max_examples=2000, deadline=None)
@given(
    st.text(alphabet=_SPLIT_ALPHABET, max_size=40)
    | st.lists(st.sampled_from(_SPLIT_PIECES), max_size=20).map("".join)
)
def test_sentence_breaks_are_where_the_reference_pattern_puts_them(text: str) -> None:
    assert _SENTENCE_END.split(text) == _SPEC_SENTENCE_END.split(text)


def test_sentence_breaks_match_the_reference_on_prose() -> None:
    text = (
        'The U.S. court ruled in 1954. "It was unanimous," he said!  Mr. Smith (the clerk)'
        " agreed? 1. First point.\n\nSecond paragraph. \u201cQuoted.\u201d \u2018Next\u2019 one."
        " [Bracketed.] (Open) end.\t\nTab then break? 7 items. ok. Lower case after."
    )
    assert _SENTENCE_END.split(text) == _SPEC_SENTENCE_END.split(text)
    assert len(_SENTENCE_END.split(text)) > 8  # it does split: the comparison is not vacuous


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_blank_text_has_no_sentence(text: str) -> None:
    assert split_sentences(text) == []


def test_hostile_text_splits_without_error() -> None:
    text = "Ünïcödé façade. 東京は大きい。 Ctrl\x00chars\x1b here. " + "x" * 100_000
    out = split_sentences(text, max_sentences=4)
    assert 1 <= len(out) <= 4
    assert "x" * 100_000 in out[-1]


def test_max_sentences_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_sentences must be >= 1, got 0"):
        split_sentences("One. Two.", max_sentences=0)


# -- term coverage ----------------------------------------------------------------------------


def test_coverage_with_equal_idf_is_the_share_of_terms() -> None:
    cov = term_coverage([1, 2, 3], [{1, 2}, {3}, set()])
    np.testing.assert_allclose(cov, [2 / 3, 1 / 3, 0.0])


def test_coverage_weighs_a_term_every_hit_shares_less() -> None:
    # Term 1 is in both hits (df 2), term 2 in one (df 1); N = 2.
    idf1 = math.log1p((2 - 2 + 0.5) / (2 + 0.5))
    idf2 = math.log1p((2 - 1 + 0.5) / (1 + 0.5))
    cov = term_coverage([1, 2, 2], [{1}, {1, 2}])
    np.testing.assert_allclose(cov, [idf1 / (idf1 + idf2), 1.0])


def test_coverage_weighs_terms_by_the_first_signal_depth_hits_only() -> None:
    """Hits past SIGNAL_DEPTH are covered by the IDF of the first ones, as a query
    asking for SIGNAL_DEPTH hits would see it: 24 more hits holding term 1 do not make
    it the common term."""
    first = [{1}, {1, 2}] + [set()] * (SIGNAL_DEPTH - 2)
    asked_for_more = term_coverage([1, 2], first + [{1}] * 24)
    np.testing.assert_allclose(asked_for_more[:SIGNAL_DEPTH], term_coverage([1, 2], first))
    assert asked_for_more[SIGNAL_DEPTH] == asked_for_more[0]


def test_coverage_without_query_terms_or_hits() -> None:
    assert np.isnan(term_coverage([], [{1}, {2}])).all()
    assert term_coverage([1], []).shape == (0,)


# -- reader -----------------------------------------------------------------------------------


async def test_sentence_match_is_the_best_sentence_not_the_whole_chunk() -> None:
    embedder = WordEmbedder()
    reader = Reader(embedder, top_n=2)
    query = (await embedder.embed(["cat"]))[0]
    hits = [
        "The dog barked at the postman. The cat sat on the mat.",
        "A fish swam in the bowl all day long.",
        "The cat was not read: it is past top_n.",
    ]
    (scores,) = await reader.score([ReaderItem("cat", query, hits)])
    np.testing.assert_allclose(scores.sentence[:2], [1.0, 0.0], atol=1e-6)
    assert np.isnan(scores.sentence[2])
    # The whole first chunk sits between cat and dog: MaxSim sees past that.
    whole = (await embedder.embed([hits[0]]))[0]
    assert float(whole @ query) == pytest.approx(1 / math.sqrt(2), abs=1e-6)
    assert np.isnan(scores.coverage).all()  # no encoder: coverage off


async def test_one_embedder_call_per_batch_and_sentences_are_cached() -> None:
    embedder = WordEmbedder()
    reader = Reader(embedder, top_n=3)
    query = (await embedder.embed(["dog"]))[0]
    embedder.calls.clear()
    items = [
        ReaderItem("dog", query, ["The dog ran off into the woods.", "A cat slept on."]),
        ReaderItem("dog", query, ["The dog ran off into the woods."]),
    ]
    first = await reader.score(items)
    assert embedder.calls == [["The dog ran off into the woods.", "A cat slept on."]]
    again = await reader.score(items)
    assert len(embedder.calls) == 1  # every sentence came from the cache
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.sentence, b.sentence)


async def test_a_query_without_a_vector_gets_no_sentence_match() -> None:
    embedder = WordEmbedder()
    reader = Reader(embedder, encoder=Bm25Encoder())
    (scores,) = await reader.score([ReaderItem("cat food", None, ["Cat food is sold here."])])
    assert np.isnan(scores.sentence).all()
    assert embedder.calls == []
    assert scores.coverage.tolist() == [1.0]


async def test_coverage_uses_the_index_tokenizer() -> None:
    reader = Reader(WordEmbedder(), encoder=Bm25Encoder(), sentences=False)
    hits = ["Zebras graze on grass.", "Grass grows in the savanna.", "Nothing here at all."]
    (scores,) = await reader.score([ReaderItem("Where do the zebras graze?", None, hits)])
    assert scores.coverage[0] == pytest.approx(1.0)  # stopwords dropped, stems matched
    assert scores.coverage[2] == 0.0
    assert 0.0 <= scores.coverage[1] < scores.coverage[0]


async def test_an_embedder_failure_propagates_for_the_pipeline_to_handle() -> None:
    reader = Reader(FailingEmbedder())
    with pytest.raises(ConnectionError):
        await reader.score([ReaderItem("cat", [1.0, 0.0, 0.0], ["The cat sat."])])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_n": 0}, "top_n must be >= 1, got 0"),
        ({"max_sentences": 0}, "max_sentences must be >= 1, got 0"),
        ({"sentences": False}, "needs sentence match, token match or term coverage"),
        ({"tokens": True}, "token match needs an embedder that gives token states"),
    ],
)
def test_reader_checks_its_arguments(kwargs: dict[str, int | bool], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Reader(WordEmbedder(), **kwargs)  # type: ignore[arg-type]  # mixed kwargs on purpose


def test_chunk_terms_tokenize_each_text_once_and_forget_the_oldest() -> None:
    """Probing reads thousands of questions against the same few chunks: each chunk's
    term set is computed once, and the cache stays within its size."""
    calls: list[str] = []

    class Counting(Bm25Encoder):
        def terms(self, text: str) -> frozenset[int]:
            calls.append(text)
            return super().terms(text)

    terms = ChunkTerms(Counting(), size=2)
    hits = ["Refunds are paid in fourteen days.", "Shipping takes three days."]
    first = terms.coverage("how are refunds paid", hits)
    again = terms.coverage("refunds paid by transfer", hits)
    assert calls == hits  # the second query tokenized no chunk
    assert first.shape == again.shape == (2,)
    assert first[0] > first[1]
    terms.of("A third chunk about warranties.")
    assert len(terms) == 2  # the least recently used text went
    terms.of(hits[0])
    assert calls[-1] == hits[0]  # it had been evicted, so it was tokenized again
    read = terms.read(
        "how are refunds paid",
        [SearchHit(f"c{i}", "d", "t", text, "s", "web", 1.0, i + 1) for i, text in enumerate(hits)],
    )
    assert np.isnan(read.sentence).all()
    np.testing.assert_array_equal(read.coverage, first)


def test_coverage_reads_stored_term_sets_and_tokenizes_only_the_rest() -> None:
    calls: list[str] = []

    class Counting(Bm25Encoder):
        def terms(self, text: str) -> frozenset[int]:
            calls.append(text)
            return super().terms(text)

    encoder = Counting()
    hits = ["Refunds are paid in fourteen days.", "Shipping takes three days."]
    tokenized = ChunkTerms(encoder).coverage("how are refunds paid", hits)
    calls.clear()
    stored = [Bm25Encoder().terms(hits[0]), None]
    mixed = ChunkTerms(encoder).coverage("how are refunds paid", hits, stored)
    assert calls == [hits[1]]  # only the hit without a stored set was tokenized
    assert mixed.tolist() == tokenized.tolist()
    # The stored set is what is read, not the text.
    other = ChunkTerms(encoder).coverage("how are refunds paid", hits, [frozenset(), None])
    assert other[0] == 0.0
    with pytest.raises(ValueError, match="known term sets: 1 for 2 hits"):
        ChunkTerms(encoder).coverage("refunds", hits, [None])


# -- token match ------------------------------------------------------------------------------


class TokenWords(WordEmbedder):
    """WordEmbedder that also gives token states: one token per word, each a unit vector
    on its word's axis (other words on a fourth axis), as a contextual model would
    give the same word the same direction."""

    embedder_id = "test:token-words-4"
    dim = 4

    def __init__(self) -> None:
        super().__init__()
        self.token_calls: list[list[str]] = []

    async def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        self.token_calls.append(list(texts))
        out = []
        for text in texts:
            words = re.findall(r"\w+|[^\w\s]", text.lower())
            rows = np.zeros((len(words), 4), dtype=np.float32)
            for i, w in enumerate(words):
                rows[i, WORDS.index(w) if w in WORDS else 3] = 1.0
            out.append(TokenStates(rows, tuple(words)))
        return out


def _states(words: str, rows: list[list[float]]) -> TokenStates:
    return TokenStates(l2_normalize(np.array(rows, dtype=np.float32)), tuple(words.split()))


def test_token_match_averages_each_content_tokens_best_cosine() -> None:
    query = _states("the cat dog ?", [[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    hit = _states("a cat", [[0, 0, 1], [1, 0, 0]])
    # "the" is a stop token and "?" not a word: cat matches 1.0, dog 0.0
    assert token_match(query, hit) == pytest.approx(0.5)
    only_stops = _states("the ?", [[1, 0, 0], [0, 1, 0]])
    assert token_match(only_stops, hit) == pytest.approx(0.5)  # every token then
    assert math.isnan(token_match(query, TokenStates(np.zeros((0, 3), np.float32), ())))
    assert "the" in STOP_TOKENS


async def test_token_match_reads_the_first_hit_once_and_keeps_it() -> None:
    embedder = TokenWords()
    reader = Reader(embedder, sentences=False, tokens=True)
    assert reader.tokens
    hits = ["A dog and a cat.", "A fish."]
    items = [ReaderItem("cat dog", [1.0, 0, 0, 0], hits), ReaderItem("fish", [1.0, 0, 0, 0], hits)]
    first = await reader.score(items)
    assert first[0].token[0] == pytest.approx(1.0)  # both content words in the top hit
    assert first[1].token[0] == pytest.approx(0.0)  # fish is only in the second hit
    assert np.isnan(first[0].token[1])  # the second hit is not read
    assert np.isnan(first[0].sentence).all()  # sentence match off
    assert embedder.token_calls == [["cat dog", "fish", "A dog and a cat."]]
    again = await reader.score(items)
    assert embedder.token_calls[1] == ["cat dog", "fish"]  # the hit came from the cache
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.token, b.token)


async def test_token_match_skips_a_query_without_a_vector_or_hits() -> None:
    embedder = TokenWords()
    reader = Reader(embedder, sentences=False, tokens=True)
    scores = await reader.score([ReaderItem("cat", None, ["A cat."]), ReaderItem("cat", [1.0], [])])
    assert np.isnan(scores[0].token).all()
    assert scores[1].token.shape == (0,)
    assert embedder.token_calls == []


async def test_token_match_finds_the_model_behind_a_wrapper_and_forgets_the_oldest() -> None:
    inner = TokenWords()
    reader = Reader(WrappedEmbedder(inner), sentences=False, tokens=True)
    texts = [f"cat {i}" for i in range(TOKEN_CACHE_SIZE + 1)]
    await reader.score([ReaderItem("cat", [1.0], [t]) for t in texts])
    assert len(reader._token_cache) == TOKEN_CACHE_SIZE
    assert texts[0] not in reader._token_cache
    assert texts[-1] in reader._token_cache
    assert all(s.vectors.dtype == np.float16 for s in reader._token_cache.values())


async def test_a_new_hit_kept_first_does_not_evict_a_kept_hit_the_same_batch_reads() -> None:
    reader = Reader(TokenWords(), sentences=False, tokens=True)
    old = [f"cat {i}" for i in range(TOKEN_CACHE_SIZE)]
    await reader.score([ReaderItem("cat", [1.0], [t]) for t in old])
    # keeping "dog new" evicts the oldest, "cat 0", which the same batch reads after it
    scores = await reader.score(
        [ReaderItem("cat", [1.0], ["dog new"]), ReaderItem("cat", [1.0], [old[0]])]
    )
    assert scores[0].token[0] == pytest.approx(0.0)
    assert scores[1].token[0] == pytest.approx(1.0)
    assert "dog new" in reader._token_cache
    assert len(reader._token_cache) == TOKEN_CACHE_SIZE


def test_recent_texts_keeps_the_most_recently_read() -> None:
    recent: RecentTexts[int] = RecentTexts(2)
    recent.put("a", 1)
    recent.put("b", 2)
    assert recent.get("a") == 1  # "a" is now the most recent
    recent.put("c", 3)  # evicts "b", the oldest
    assert list(recent) == ["a", "c"]
    assert "b" not in recent
    assert recent.get("b") is None
    recent.put("a", 4)  # a new value for a kept text is the most recent too
    recent.put("d", 5)
    assert list(recent) == ["a", "d"]
    assert list(recent.values()) == [4, 5]
    assert len(recent) == 2
