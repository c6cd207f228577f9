"""BM25 sparse encoding through Qdrant's own BM25, shared by every index adapter.

Both adapters (Qdrant Edge in-process, Qdrant server) encode text here, so the
embedded runtime and production index the same term ids with the same
weights. The IDF half of BM25 is applied by Qdrant at query time (the sparse
vector is declared with ``Modifier.Idf``); this module supplies the TF half
for documents and unit weights for queries.

Qdrant server and qdrant-client's local mode reject a sparse vector whose
indices repeat (Qdrant Edge 0.9 accepts it silently), and two distinct tokens
can hash to the same term id. Every encoding is therefore canonicalized:
indices unique and ascending, the values of a repeated index summed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import lt

import qdrant_edge

__all__ = ["Bm25Encoder", "SparseEncoding", "canonical_sparse"]

#: Qdrant's BM25 defaults (k1 = 1.2, b = 0.75, average length 256 tokens),
#: spelled out so a change of library default cannot re-weight a live index.
BM25_K1 = 1.2
BM25_B = 0.75
BM25_AVG_LEN = 256.0
BM25_LANGUAGE = "english"


@dataclass(frozen=True, slots=True)
class SparseEncoding:
    """A sparse vector with unique, ascending indices.

    Attributes:
        indices: term ids, strictly increasing.
        values: one weight per term id.
    """

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            raise ValueError(
                f"indices and values differ in length: {len(self.indices)} != {len(self.values)}"
            )
        if not all(map(lt, self.indices, self.indices[1:])):  # in C: one per search
            raise ValueError("indices must be strictly increasing; use canonical_sparse()")

    @property
    def is_empty(self) -> bool:
        """True when the text had no indexable token (empty, or only stopwords)."""
        return not self.indices

    def __len__(self) -> int:
        return len(self.indices)


def canonical_sparse(indices: Iterable[int], values: Iterable[float]) -> SparseEncoding:
    """Sort a sparse vector by index and merge repeated indices by summing their values."""
    # 0.0 + weight, as the merge below adds to 0.0: a -0.0 weight is 0.0 on both paths.
    ordered_in, weights = list(indices), [0.0 + float(value) for value in values]
    if len(ordered_in) == len(weights) and all(map(lt, ordered_in, ordered_in[1:])):
        # Already canonical (the common case): nothing to merge, skip the dict and the sort.
        return SparseEncoding(tuple(ordered_in), tuple(weights))
    merged: dict[int, float] = {}
    for index, value in zip(ordered_in, weights, strict=True):
        merged[index] = merged.get(index, 0.0) + value
    ordered = sorted(merged)
    return SparseEncoding(tuple(ordered), tuple(merged[i] for i in ordered))


class Bm25Encoder:
    """Encodes documents and queries with ``qdrant_edge.Bm25`` (offline, no model download).

    Args:
        k1: term-frequency saturation, ``>= 0``.
        b: length normalization in ``[0, 1]``.
        avg_len: expected average document length in tokens, ``> 0``.
        language: stopword and stemmer language (Qdrant's names: ``"english"``...).
    """

    def __init__(
        self,
        *,
        k1: float = BM25_K1,
        b: float = BM25_B,
        avg_len: float = BM25_AVG_LEN,
        language: str = BM25_LANGUAGE,
    ) -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if avg_len <= 0:
            raise ValueError(f"avg_len must be > 0, got {avg_len}")
        try:
            self._model = qdrant_edge.Bm25(
                qdrant_edge.Bm25Config(k=k1, b=b, avg_len=avg_len, language=language)
            )
        except ValueError as exc:
            raise ValueError(f"unsupported BM25 language {language!r}: {exc}") from exc
        self.k1 = k1
        self.b = b
        self.avg_len = avg_len
        self.language = language

    @property
    def encoder_id(self) -> str:
        """Names the encoding's parameters, e.g. ``qdrant-bm25-english-k1.2-b0.75-avg256``."""
        return f"qdrant-bm25-{self.language}-k{self.k1:g}-b{self.b:g}-avg{self.avg_len:g}"

    def encode_document(self, text: str) -> SparseEncoding:
        """Term-frequency weights of a chunk's text, for indexing."""
        vector = self._model.embed_document(text)
        return canonical_sparse(vector.indices, vector.values)

    def terms(self, text: str) -> frozenset[int]:
        """The distinct term ids of a chunk's text, as :meth:`encode_document` indexes it.

        The weights are left out, and so is their canonical ordering: term coverage
        needs only the set (a fifth cheaper per SQuAD paragraph).
        """
        return frozenset(self._model.embed_document(text).indices)

    def encode_query(self, text: str) -> SparseEncoding:
        """Unit weights for each distinct query term, for searching."""
        vector = self._model.embed_query(text)
        return canonical_sparse(vector.indices, vector.values)

    def encode_documents(self, texts: Iterable[str]) -> list[SparseEncoding]:
        """Encode several chunk texts."""
        return [self.encode_document(text) for text in texts]
