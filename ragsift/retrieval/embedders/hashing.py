"""``HashingEmbedder``: the zero-dependency fallback; deterministic feature hashing, no model."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ragsift.retrieval.embedders.base import FloatMatrix, l2_normalize

__all__ = ["HASHING_DEFAULT_DIM", "HashingEmbedder", "stem"]

HASHING_DEFAULT_DIM = 384  # the size of MiniLM vectors, so settings can swap the two
#: Weights of the three feature groups after each is L2-normalized: stems carry
#: the topic, word pairs the phrasing, character n-grams morphology and typos.
UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
CHAR_NGRAM_WEIGHT = 0.6
CHAR_NGRAM_SIZES = (3, 4, 5)
#: Keyed per algorithm version: a change of hashing must change the embedder id.
_HASH_PERSON = b"ragsift-hash-v1"
#: Feature -> bucket memo; ~300 bytes an entry, so at most ~20 MB per process.
_HASH_CACHE_SIZE = 1 << 16
_EMPTY_FEATURE = "\x00empty"
#: Above this many texts, embed in a worker thread so the event loop keeps serving.
_INLINE_BATCH_MAX = 32

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Longest first; (suffix, replacement). A light English stemmer: enough to join
# reset/resets/resetting or change/changed/changing without a dependency.
_SUFFIXES = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("tional", "tion"),
    ("ements", ""),
    ("ation", "ate"),
    ("ement", ""),
    ("ments", ""),
    ("ingly", ""),
    ("ness", ""),
    ("ment", ""),
    ("edly", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ed", ""),
    ("ly", ""),
)
_MIN_STEM = 3


def stem(word: str) -> str:
    """A small, deterministic English suffix stemmer (lowercase input)."""
    if len(word) <= _MIN_STEM or not word.isalpha():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= _MIN_STEM:
            word = word[: len(word) - len(suffix)] + replacement
            break
    else:
        if word.endswith(("sses", "xes", "zes", "ches", "shes")):
            word = word[:-2]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    if len(word) > _MIN_STEM and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # resett -> reset, runn -> run
    if len(word) > _MIN_STEM + 1 and word.endswith("e"):
        word = word[:-1]  # change / changing -> chang
    return word


@lru_cache(maxsize=_HASH_CACHE_SIZE)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable (across processes) bucket and sign of a feature: blake2b, never ``hash()``."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_HASH_PERSON).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


def _group_vector(counts: Counter[str], dim: int) -> FloatMatrix:
    if not counts:
        return np.zeros(dim, dtype=np.float32)
    buckets = np.empty(len(counts), dtype=np.int64)
    weights = np.empty(len(counts), dtype=np.float64)
    for i, (feature, tf) in enumerate(counts.items()):
        bucket, sign = _bucket(feature, dim)
        buckets[i] = bucket
        weights[i] = sign * (1.0 + math.log(tf))  # sublinear term frequency
    vector = np.bincount(buckets, weights=weights, minlength=dim)
    norm = np.linalg.norm(vector)
    return (vector / norm if norm > 0 else vector).astype(np.float32)


class HashingEmbedder:
    """Deterministic feature-hashing embedder: no model, no download, same vector everywhere.

    Features, each with sublinear TF and signed hashing into ``dim`` buckets:
    stemmed content-word unigrams, adjacent stem bigrams, and character 3-5-grams
    of the words. Each group is normalized, weighted, summed and L2-normalized.
    Texts sharing words, stems or word fragments land close; unrelated texts
    land near-orthogonal. It captures no synonyms: use a model for that.

    Args:
        dim: vector length, ``>= 64`` (fewer buckets collide too often).
    """

    MIN_DIM = 64

    def __init__(self, dim: int = HASHING_DEFAULT_DIM) -> None:
        if dim < self.MIN_DIM:
            raise ValueError(f"dim must be >= {self.MIN_DIM}, got {dim}")
        self._dim = dim

    @property
    def embedder_id(self) -> str:
        """``ragsift-hashing-v1-<dim>``."""
        return f"ragsift-hashing-v1-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._dim

    def embed_sync(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text on the calling thread."""
        words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
        stems = [stem(w) for w in words]
        unigrams = Counter(stems)
        bigrams = Counter(f"{a} {b}" for a, b in itertools.pairwise(stems))
        chars: Counter[str] = Counter()
        for word in words:
            padded = f"<{word}>"
            for n in CHAR_NGRAM_SIZES:
                chars.update(f"#{padded[i : i + n]}" for i in range(len(padded) - n + 1))
        if not unigrams:
            unigrams = Counter([_EMPTY_FEATURE])
        vector = (
            UNIGRAM_WEIGHT * _group_vector(unigrams, self._dim)
            + BIGRAM_WEIGHT * _group_vector(bigrams, self._dim)
            + CHAR_NGRAM_WEIGHT * _group_vector(chars, self._dim)
        )
        return l2_normalize(vector)

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts; large batches run in a worker thread."""
        if len(texts) > _INLINE_BATCH_MAX:
            return await asyncio.to_thread(self._embed_many, list(texts))
        return self._embed_many(texts)

    def _embed_many(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([self.embed_sync(text) for text in texts])

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text."""
        return self.embed_sync(text)
