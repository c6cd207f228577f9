"""Reader signals: does a retrieved chunk *answer* the query, not only share its topic?

A chunk's retrieval cosine compares the query with the whole chunk, so a
paragraph on the right subject scores high whether or not it holds the answer.
Two per-hit scores look closer:

* **sentence match**: the best cosine of the query against each sentence of the
  hit (MaxSim over the hit's sentences), embedded at query time by the
  pipeline's own embedder, for the top ``top_n`` hits only (the others get NaN);
* **token match**: the mean, over the query's content tokens, of each token's best
  cosine to a token of the top hit, both in context (the embedder's last hidden
  state, MaxSim as late-interaction retrievers score). A neighbouring paragraph on the
  right subject matches the query's topic words but not the words that ask for the
  missing fact; a whole-chunk cosine cannot tell the two apart. Read for the first
  hit only, and only with an embedder that gives token states (ONNX MiniLM);
* **term coverage**: the share of the query's IDF mass whose terms occur in the
  hit. Terms are Qdrant's BM25 tokens (stopwords dropped, stemmed), the same the
  index uses. The index applies IDF inside Qdrant and does not expose it, so the
  IDF here is the BM25 formula over the query's own hit list,
  ln(1 + (N - df + 0.5) / (df + 0.5)) with N hits and df hits holding the term:
  a term every hit shares is the topic and weighs little; a term no hit holds
  weighs most, and is what a near miss lacks.

:class:`Reader` scores a batch of queries with one embedder call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragsift.confidence.config import SIGNAL_DEPTH
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.embedders.base import (
    KeepsTokenStates,
    TokenEmbedder,
    TokenStates,
    token_source,
)
from ragsift.retrieval.recent import RecentTexts
from ragsift.retrieval.records import SearchHit

__all__ = [
    "DEFAULT_MAX_SENTENCES",
    "DEFAULT_TOP_N",
    "ChunkTerms",
    "Reader",
    "ReaderItem",
    "ReaderScores",
    "split_sentences",
    "term_coverage",
    "token_match",
]

FloatArray = npt.NDArray[np.float64]

# A sentence ends at . ! or ? (closing quotes/brackets may follow), then whitespace,
# then what can open a sentence: an upper-case letter, a digit or an opening quote.
# Line breaks always end one. Abbreviations ("Mr. Smith") split too: an extra short
# sentence only adds a candidate to a max. Every break begins with whitespace and the
# pattern says so first, so re skips in C to the next whitespace instead of trying the
# look-behinds at every character (4x faster); otherwise this is
#   (?:(?<=[.!?])|(?<=[.!?]["')\]]))\s+(?=["'(\[]?[A-Z0-9])|\n+
# (curly quotes as well), and splits the same (tests/unit/retrieval/test_reader.py).
_SENTENCE_END = re.compile(
    r"\s(?:(?:(?<=[.!?]\s)|(?<=[.!?][\"'\u201d\u2019)\]]\s))\s*(?=[\"'\u201c\u2018(\[]?[A-Z0-9])"
    r"|(?<=\n)\n*)"
)
# Fragments shorter than this ("U.S.", "1.") join the sentence before them.
MIN_SENTENCE_CHARS = 20
# Sentences embedded per hit at most; longer hits are packed into this many runs
# of consecutive sentences, so nothing is dropped. A SQuAD paragraph has ~5.
DEFAULT_MAX_SENTENCES = 12
# Hits per query whose sentences are embedded (each costs ~max_sentences embeddings).
DEFAULT_TOP_N = 3
# Sentence vectors kept between batches (chunks recur): 4096 x 384 float32 is 6 MB.
SENTENCE_CACHE_SIZE = 4096
# Chunk texts whose token states are kept between batches, as float16 (as every match
# reads them): 254 tokens are 195 KB, so 512 chunks are ~100 MB at worst. The embedder
# keeps the last QUERY_STATES_KEPT queries' states from their embedding pass (ADR 041).
TOKEN_CACHE_SIZE = 512
QUERY_STATES_KEPT = 1024
# Query tokens that carry no content: a query's token match averages over the rest.
# WordPiece pieces of a longer word ("##s") are content; punctuation is not.
STOP_TOKENS: frozenset[str] = frozenset(
    (  # noqa: SIM905  # a line of words reads better than a column of 42 strings
        "the a an of in on at to for from by with and or is are was were be been what which"
        " who whom whose when where why how did do does that this these those it its as"
        " than into about"
    ).split()
)
_WORD_START = re.compile(r"^(?:##)?\w")
# Chunk texts whose BM25 term sets are kept (tokenizing costs more than coverage).
TERM_CACHE_SIZE = 4096


def split_sentences(text: str, max_sentences: int = DEFAULT_MAX_SENTENCES) -> list[str]:
    """Split ``text`` into at most ``max_sentences`` sentences (see the module docstring).

    Raises:
        ValueError: ``max_sentences`` < 1.
    """
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
    sentences: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if sentences and len(piece) < MIN_SENTENCE_CHARS:
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    if len(sentences) <= max_sentences:
        return sentences
    size = math.ceil(len(sentences) / max_sentences)
    return [" ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]


def term_coverage(query_terms: Sequence[int], hit_terms: Sequence[AbstractSet[int]]) -> FloatArray:
    """Per hit, the share of the query's IDF mass whose terms it holds; the IDF is over
    the first :data:`~ragsift.confidence.config.SIGNAL_DEPTH` hits (the retriever's order),
    as the confidence signals read them.

    NaN for every hit when the query has no indexable term (only stopwords).
    """
    terms = sorted(set(query_terms))
    if not terms or not hit_terms:
        return np.full(len(hit_terms), np.nan)
    held = np.array([[t in hit for t in terms] for hit in hit_terms], dtype=bool)
    read = held[:SIGNAL_DEPTH]
    df = read.sum(axis=0)
    idf = np.log1p((len(read) - df + 0.5) / (df + 0.5))
    return np.asarray(held @ idf / idf.sum(), dtype=np.float64)


def token_match(query: TokenStates, hit: TokenStates) -> float:
    """Mean over the query's content tokens of their best cosine to one of the hit's
    tokens (MaxSim); every query token when none is content; NaN for an empty side.

    Content tokens start with a letter or digit (or are a word's continuation
    piece) and are not in :data:`STOP_TOKENS`.
    """
    keep = [
        i
        for i, token in enumerate(query.tokens)
        if _WORD_START.match(token) and token.lower() not in STOP_TOKENS
    ]
    rows = query.vectors[keep] if keep else query.vectors
    if rows.shape[0] == 0 or hit.vectors.shape[0] == 0:
        return math.nan
    best = (rows.astype(np.float32) @ hit.vectors.astype(np.float32).T).max(axis=1)
    return float(best.mean())


class ChunkTerms:
    """Term coverage of hit lists, each chunk text tokenized once (an LRU of ``size``).

    The pipeline's :class:`Reader` keeps one; the calibration's own searches (probes,
    the missing-answer estimate, pseudo-queries, corrective eval) make one per run,
    where thousands of questions meet the same few chunks.
    """

    def __init__(self, encoder: Bm25Encoder, size: int = TERM_CACHE_SIZE) -> None:
        self.encoder = encoder
        self.size = size
        self._known: RecentTexts[frozenset[int]] = RecentTexts(size)

    def __len__(self) -> int:
        return len(self._known)

    def of(self, text: str) -> frozenset[int]:
        """The chunk's BM25 term set, from the cache when it was read before."""
        terms = self._known.get(text)
        if terms is None:
            terms = self.encoder.terms(text)
            self._known.put(text, terms)
        return terms

    def coverage(
        self, query: str, hits: Sequence[str], known: Sequence[frozenset[int] | None] = ()
    ) -> FloatArray:
        """Per hit, its term coverage of ``query`` (:func:`term_coverage`).

        ``known``: empty, or each hit's term set where the index stored it
        (:meth:`~ragsift.retrieval.records.SearchHit.indexed_terms`), None where it
        did not; a hit without one is tokenized here.

        Raises:
            ValueError: ``known`` is neither empty nor one entry per hit.
        """
        if known and len(known) != len(hits):
            raise ValueError(f"known term sets: {len(known)} for {len(hits)} hits")
        stored = known or [None] * len(hits)
        sets = [
            terms if terms is not None else self.of(text)
            for text, terms in zip(hits, stored, strict=True)
        ]
        return term_coverage(self.encoder.encode_query(query).indices, sets)

    def read(self, query: str, hits: Sequence[SearchHit]) -> ReaderScores:
        """Reader scores with term coverage alone (no sentence or token match), each hit's
        term set taken from the index where it was stored (:meth:`SearchHit.indexed_terms`)."""
        coverage = self.coverage(query, [h.text for h in hits], [h.indexed_terms() for h in hits])
        unread = np.full(len(hits), np.nan)
        return ReaderScores(sentence=unread, coverage=coverage, token=unread.copy())


@dataclass(frozen=True, slots=True)
class ReaderItem:
    """One query to read: its text, its vector (None: no sentence match), its hit texts
    and, where the index stored them, its hits' BM25 term sets (``ChunkTerms.coverage``)."""

    query: str
    vector: npt.ArrayLike | None
    hits: Sequence[str]
    terms: Sequence[frozenset[int] | None] = ()


@dataclass(frozen=True, slots=True)
class ReaderScores:
    """Per-hit reader scores of one query, aligned with its hits.

    Attributes:
        sentence: best query-sentence cosine per hit; NaN past the top ``top_n`` hits,
            or when sentence match is off or the query has no vector.
        coverage: IDF-weighted query-term coverage per hit; NaN when off or the query
            has no indexable term.
        token: token match per hit (:func:`token_match`); NaN past the first hit, or when
            token match is off or the query has no vector.
    """

    sentence: FloatArray
    coverage: FloatArray
    token: FloatArray


class Reader:
    """Scores hits against their query with sentence match, token match and term coverage.

    Args:
        embedder: the pipeline's embedder (sentences must live in the query's space;
            token match reads the token states of the model behind it).
        encoder: the BM25 tokenizer for term coverage; None turns coverage off.
        sentences: whether to compute sentence match.
        tokens: whether to compute token match (the first hit of each query with a
            vector).
        top_n: hits per query whose sentences are embedded.
        max_sentences: sentences per hit at most.

    Raises:
        ValueError: ``top_n`` or ``max_sentences`` < 1, every signal off, or token
            match asked of an embedder that gives no token states.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        encoder: Bm25Encoder | None = None,
        sentences: bool = True,
        tokens: bool = False,
        top_n: int = DEFAULT_TOP_N,
        max_sentences: int = DEFAULT_MAX_SENTENCES,
    ):
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        if encoder is None and not sentences and not tokens:
            raise ValueError("a Reader needs sentence match, token match or term coverage")
        self._token_source: TokenEmbedder | None = None
        if tokens:
            self._token_source = token_source(embedder)
            if self._token_source is None:
                raise ValueError(
                    f"token match needs an embedder that gives token states (ONNX MiniLM);"
                    f" {embedder.embedder_id} does not"
                )
            if isinstance(self._token_source, KeepsTokenStates):
                self._token_source.keep_token_states(QUERY_STATES_KEPT)
        self.embedder = embedder
        self.encoder = encoder
        self.sentences = sentences
        self.top_n = top_n
        self.max_sentences = max_sentences
        self._cache: RecentTexts[npt.NDArray[np.float32]] = RecentTexts(SENTENCE_CACHE_SIZE)
        self._terms = ChunkTerms(encoder) if encoder is not None else None
        self._token_cache: RecentTexts[TokenStates] = RecentTexts(TOKEN_CACHE_SIZE)

    @classmethod
    def of_features(
        cls, embedder: Embedder, features: AbstractSet[str], *, top_n: int = DEFAULT_TOP_N
    ) -> Reader:
        """The reader of the reader signals among ``features`` (calibration feature
        names: ``term_coverage``, ``sentence_match``, ``token_match``).

        Raises:
            ValueError: none of them is among ``features``, or token match is and
                ``embedder`` gives no token states.
        """
        return cls(
            embedder,
            encoder=Bm25Encoder() if "term_coverage" in features else None,
            sentences="sentence_match" in features,
            tokens="token_match" in features,
            top_n=top_n,
        )

    @property
    def tokens(self) -> bool:
        """Whether token match is read."""
        return self._token_source is not None

    async def score(self, items: Sequence[ReaderItem]) -> list[ReaderScores]:
        """Reader scores of every item; all new sentences go to the embedder in one call."""
        coverage = [self._coverage(item) for item in items]
        source = self._token_source
        # Token match first: the queries' states an embedding pass kept are read before
        # sentence match's embedding passes can push them out.
        token = await self._token_match(items, source) if source is not None else None
        sentence = await self._sentence_match(items) if self.sentences else None
        return [
            ReaderScores(
                sentence=sentence[i] if sentence is not None else np.full(len(item.hits), np.nan),
                coverage=coverage[i],
                token=token[i] if token is not None else np.full(len(item.hits), np.nan),
            )
            for i, item in enumerate(items)
        ]

    def _coverage(self, item: ReaderItem) -> FloatArray:
        if self._terms is None:
            return np.full(len(item.hits), np.nan)
        return self._terms.coverage(item.query, item.hits, item.terms)

    async def _sentence_match(self, items: Sequence[ReaderItem]) -> list[FloatArray]:
        split: list[list[list[str]]] = []
        for item in items:
            n = self.top_n if item.vector is not None else 0
            split.append([split_sentences(text, self.max_sentences) for text in item.hits[:n]])
        needed = dict.fromkeys(s for per_hit in split for sents in per_hit for s in sents)
        vectors: dict[str, npt.NDArray[np.float32]] = {}
        todo = []
        for text in needed:
            cached = self._cache.get(text)
            if cached is None:
                todo.append(text)
            else:
                vectors[text] = cached
        if todo:
            fresh = await self.embedder.embed(todo)
            for text, vec in zip(todo, fresh, strict=True):
                vectors[text] = vec
                self._cache.put(text, vec)
        out = []
        for item, per_hit in zip(items, split, strict=True):
            scores = np.full(len(item.hits), np.nan)
            if item.vector is not None:
                query = np.asarray(item.vector, dtype=np.float32)
                for j, sents in enumerate(per_hit):
                    if sents:
                        matrix = np.stack([vectors[s] for s in sents])
                        scores[j] = float((matrix @ query).max())
            out.append(scores)
        return out

    async def _token_match(
        self, items: Sequence[ReaderItem], source: TokenEmbedder
    ) -> list[FloatArray]:
        """Token match of each item's first hit; the queries' and the uncached hits'
        token states come from one call to ``source``."""
        read = [item.vector is not None and len(item.hits) > 0 for item in items]
        wanted = [item.query for item, ok in zip(items, read, strict=True) if ok]
        hits = [item.hits[0] for item, ok in zip(items, read, strict=True) if ok]
        # Every kept hit is taken before any new one is kept: keeping one may evict another.
        states = {h: kept for h in hits if (kept := self._token_cache.get(h)) is not None}
        todo = list(dict.fromkeys(t for t in wanted + hits if t not in states))
        if todo:
            fresh = await source.token_states(todo)
            for text, got in zip(todo, fresh, strict=True):
                # float16, fresh or kept: a hit's match never depends on the cache
                states[text] = TokenStates(got.vectors.astype(np.float16), got.tokens)
        for text in dict.fromkeys(hits):
            if text not in self._token_cache:
                self._token_cache.put(text, states[text])
        out = []
        for item, ok in zip(items, read, strict=True):
            scores = np.full(len(item.hits), np.nan)
            if ok:
                scores[0] = token_match(states[item.query], states[item.hits[0]])
            out.append(scores)
        return out
