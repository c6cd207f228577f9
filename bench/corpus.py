"""A seeded synthetic corpus for the pipeline and streaming benchmarks.

Zipf-distributed words from a fixed vocabulary, so BM25 and the hashing
embedder see realistic term statistics; queries are word samples of one chunk.
"""

from __future__ import annotations

import numpy as np

from ragsift.ingest.loaders import SourceDocument
from ragsift.schemas import QueryEvent

__all__ = ["make_corpus", "make_queries", "query_events"]

VOCABULARY = 5000
WORDS_PER_CHUNK = 60
WORDS_PER_QUERY = 7


def _words(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghiklmnoprstuvwyz"))
    return ["".join(rng.choice(letters, size=rng.integers(4, 10))) for _ in range(VOCABULARY)]


def _zipf(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.minimum(rng.zipf(1.3, size=n) - 1, VOCABULARY - 1)


def make_corpus(chunks: int, seed: int = 7) -> list[SourceDocument]:
    """``chunks`` one-chunk documents of WORDS_PER_CHUNK words each."""
    words = _words(seed)
    rng = np.random.default_rng(seed + 1)
    return [
        SourceDocument(
            doc_id=f"doc-{i}",
            text=" ".join(words[j] for j in _zipf(rng, WORDS_PER_CHUNK)) + ".",
            source=f"bench/doc-{i}",
        )
        for i in range(chunks)
    ]


def make_queries(corpus: list[SourceDocument], n: int, seed: int = 11) -> list[str]:
    """Questions made of words of a random chunk (each about one document)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = corpus[int(rng.integers(len(corpus)))].text.rstrip(".").split()
        picked = rng.choice(len(words), size=min(WORDS_PER_QUERY, len(words)), replace=False)
        out.append(" ".join(words[i] for i in sorted(picked)) + "?")
    return out


def query_events(
    texts: list[str], vectors: np.ndarray, embedder_id: str, prefix: str, tenant: str
) -> list[QueryEvent]:
    """One query event per text, carrying its precomputed vector; ids ``{prefix}-{i}``."""
    return [
        QueryEvent(
            query_id=f"{prefix}-{i}",
            tenant_id=tenant,
            query=text,
            vector=vec.tolist(),
            embedder_id=embedder_id,
        )
        for i, (text, vec) in enumerate(zip(texts, vectors, strict=True))
    ]
