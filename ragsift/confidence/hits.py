"""Input types: the scores of one query's hits (:class:`HitScores`) or of many (:class:`HitBatch`).

The retrieval pipeline hands the engine raw scores per channel (dense with its
metric, BM25, RRF, reranker), the document id and source type of each hit and,
optionally, which of the query's entities each hit mentions. Nothing here is
normalized yet; :mod:`ragsift.confidence.normalize` does that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.normalize import DENSE_METRICS, DenseMetric, Metric

__all__ = ["READER_FIELDS", "Channel", "HitBatch", "HitScores", "entity_matrix"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

Channel = Literal["dense", "sparse", "fused", "rerank"]
"""A score channel of a hit list."""

# Which channel decides "how relevant is this hit": the reranker when present (it reads
# query and chunk together), else dense similarity, else BM25; RRF last because it is
# rank-only and carries no absolute relevance.
_PRIMARY_ORDER: tuple[Channel, ...] = ("rerank", "dense", "sparse", "fused")
_CHANNEL_METRIC: dict[str, Metric] = {"sparse": "bm25", "fused": "rrf", "rerank": "reranker"}
READER_FIELDS: tuple[str, ...] = ("sentence_scores", "term_coverage", "token_scores")
"""Per-hit reader scores (:mod:`ragsift.retrieval.reader`): NaN where a hit was not read."""


def _as_1d(name: str, values: npt.ArrayLike | None) -> FloatArray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ConfidenceError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


@dataclass(frozen=True, slots=True)
class HitScores:
    """Raw scores and metadata of one query's hits, all aligned by hit position.

    Args:
        dense: dense similarity (or distance, for ``euclid``) per hit.
        metric: the metric of ``dense``.
        sparse: BM25 score per hit.
        fused: RRF score per hit.
        rerank: reranker score (logit) per hit.
        doc_ids: the document each hit (chunk) belongs to.
        source_types: C1 source type of each hit (``government``, ``regulatory``...).
        entity_matrix: bool array (hits x query entities): does hit i mention entity j.
        sentence_scores: reader score per hit: the best cosine of the query against the
            hit's sentences (NaN: that hit was not read).
        token_scores: reader score per hit: the mean over the query's content tokens of
            their best cosine to one of the hit's tokens, in context (NaN: not read).
        term_coverage: reader score per hit: the share of the query's IDF mass whose
            terms the hit holds, in [0, 1] (NaN: not available).

    All given arrays must have the same length; no channel at all means no hits.
    Reader scores are not ranking channels: they feed signals, never the hit order.
    """

    dense: FloatArray | None = None
    metric: DenseMetric = "cosine"
    sparse: FloatArray | None = None
    fused: FloatArray | None = None
    rerank: FloatArray | None = None
    doc_ids: Sequence[str] | None = None
    source_types: Sequence[str] | None = None
    entity_matrix: BoolArray | None = None
    sentence_scores: FloatArray | None = None
    term_coverage: FloatArray | None = None
    token_scores: FloatArray | None = None
    n_hits: int = field(init=False)

    def __post_init__(self) -> None:
        if self.metric not in DENSE_METRICS:
            raise ConfidenceError(f"metric must be one of {DENSE_METRICS}, got {self.metric!r}")
        lengths: dict[str, int] = {}
        for name in ("dense", "sparse", "fused", "rerank"):
            arr = _as_1d(name, getattr(self, name))
            object.__setattr__(self, name, arr)
            if arr is not None:
                if np.isnan(arr).any():
                    raise ConfidenceError(f"{name} scores must not contain NaN")
                lengths[name] = arr.shape[0]
        for name in ("doc_ids", "source_types"):
            seq = getattr(self, name)
            if seq is not None:
                lengths[name] = len(seq)
        if self.entity_matrix is not None:
            em = np.asarray(self.entity_matrix, dtype=bool)
            if em.ndim != 2:
                raise ConfidenceError(
                    f"entity_matrix must be 2-D (hits x entities), got {em.shape}"
                )
            object.__setattr__(self, "entity_matrix", em)
            lengths["entity_matrix"] = em.shape[0]
        for name in READER_FIELDS:
            arr = _as_1d(name, getattr(self, name))
            object.__setattr__(self, name, arr)
            if arr is not None:
                if np.isinf(arr).any():
                    raise ConfidenceError(f"{name} must be finite or NaN (not read)")
                lengths[name] = arr.shape[0]
        if len(set(lengths.values())) > 1:
            raise ConfidenceError(f"all per-hit inputs must have the same length, got {lengths}")
        n = next(iter(lengths.values()), 0)
        if n and not any(getattr(self, c) is not None for c in _PRIMARY_ORDER):
            raise ConfidenceError("hits need at least one score channel, got none")
        object.__setattr__(self, "n_hits", n)

    @classmethod
    def empty(cls, metric: DenseMetric = "cosine") -> HitScores:
        """An empty hit list (the index found nothing)."""
        return cls(dense=np.empty(0), metric=metric)

    @property
    def primary_channel(self) -> Channel:
        """The channel that ranks and thresholds hits (reranker > dense > BM25 > RRF)."""
        for channel in _PRIMARY_ORDER:
            if getattr(self, channel) is not None:
                return channel
        return "dense"

    @property
    def primary_metric(self) -> Metric:
        """The metric of :attr:`primary_channel`."""
        return channel_metric(self.primary_channel, self.metric)


def channel_metric(channel: Channel, dense_metric: DenseMetric) -> Metric:
    """The metric a channel's scores are in."""
    return dense_metric if channel == "dense" else _CHANNEL_METRIC[channel]


def _as_2d(name: str, values: npt.ArrayLike | None, shape: tuple[int, int]) -> FloatArray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != shape:
        raise ConfidenceError(f"{name} must have shape {shape}, got {arr.shape}")
    return arr


@dataclass(frozen=True, slots=True)
class HitBatch:
    """Many queries' hits as padded 2-D arrays (queries x max hits), for vectorized scoring.

    Row q holds ``lengths[q]`` real hits in its first columns; the rest is padding
    and is ignored (its values do not matter).

    Args:
        lengths: real hits per query, shape (Q,).
        dense, sparse, fused, rerank: raw scores per channel, shape (Q, K).
        metric: the metric of ``dense``.
        doc_codes: integer document id per hit, shape (Q, K) (equal codes = same document;
            -1 where the query gave no document ids).
        source_type_codes: index into ``source_type_vocab`` per hit, shape (Q, K);
            -1 where the query gave no source types.
        source_type_vocab: the source type names the codes refer to.
        entity_matrix: bool (Q, K, M): does hit k of query q mention entity m.
        entity_counts: query entities per query, shape (Q,) (columns past it are padding).
        sentence_scores, term_coverage, token_scores: reader scores per hit, shape (Q, K),
            NaN where a
            hit was not read.
    """

    lengths: IntArray
    dense: FloatArray | None = None
    metric: DenseMetric = "cosine"
    sparse: FloatArray | None = None
    fused: FloatArray | None = None
    rerank: FloatArray | None = None
    doc_codes: IntArray | None = None
    source_type_codes: IntArray | None = None
    source_type_vocab: tuple[str, ...] = ()
    entity_matrix: BoolArray | None = None
    entity_counts: IntArray | None = None
    sentence_scores: FloatArray | None = None
    term_coverage: FloatArray | None = None
    token_scores: FloatArray | None = None

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths, dtype=np.int64)
        if lengths.ndim != 1:
            raise ConfidenceError(f"lengths must be 1-D, got shape {lengths.shape}")
        object.__setattr__(self, "lengths", lengths)
        channels = [getattr(self, c) for c in _PRIMARY_ORDER]
        first: npt.ArrayLike | None = next((c for c in channels if c is not None), None)
        width = 0
        if first is not None:
            first_shape = np.shape(first)
            if len(first_shape) != 2:
                raise ConfidenceError(f"score arrays must be 2-D, got shape {first_shape}")
            width = int(first_shape[1])
        shape = (lengths.shape[0], width)
        for name in (*_PRIMARY_ORDER, *READER_FIELDS):
            object.__setattr__(self, name, _as_2d(name, getattr(self, name), shape))
        if first is None and lengths.size and lengths.max() > 0:
            raise ConfidenceError("hits need at least one score channel, got none")
        if lengths.size and (lengths.min() < 0 or lengths.max() > width):
            raise ConfidenceError(
                f"lengths must be in [0, {width}], got range [{lengths.min()}, {lengths.max()}]"
            )
        for code_field in ("doc_codes", "source_type_codes"):
            codes = getattr(self, code_field)
            if codes is not None:
                codes = np.asarray(codes, dtype=np.int64)
                if codes.shape != shape:
                    raise ConfidenceError(
                        f"{code_field} must have shape {shape}, got {codes.shape}"
                    )
                object.__setattr__(self, code_field, codes)
        if self.entity_matrix is not None:
            em = np.asarray(self.entity_matrix, dtype=bool)
            if em.ndim != 3 or em.shape[:2] != shape:
                raise ConfidenceError(
                    f"entity_matrix must have shape {shape} + (M,), got {em.shape}"
                )
            counts = (
                np.full(shape[0], em.shape[2], dtype=np.int64)
                if self.entity_counts is None
                else np.asarray(self.entity_counts, dtype=np.int64)
            )
            if counts.shape != (shape[0],) or (counts.size and counts.max() > em.shape[2]):
                raise ConfidenceError(f"entity_counts must be (Q,) and <= {em.shape[2]}")
            object.__setattr__(self, "entity_matrix", em)
            object.__setattr__(self, "entity_counts", counts)

    @property
    def n_queries(self) -> int:
        """Number of queries in the batch."""
        return int(self.lengths.shape[0])

    @property
    def width(self) -> int:
        """Padded hits per query (K)."""
        for name in _PRIMARY_ORDER:
            arr = getattr(self, name)
            if arr is not None:
                return int(arr.shape[1])
        return 0

    @property
    def primary_channel(self) -> Channel:
        """The channel that ranks and thresholds hits (reranker > dense > BM25 > RRF)."""
        for channel in _PRIMARY_ORDER:
            if getattr(self, channel) is not None:
                return channel
        return "dense"

    @property
    def primary_metric(self) -> Metric:
        """The metric of :attr:`primary_channel`."""
        return channel_metric(self.primary_channel, self.metric)

    def head(self, depth: int) -> HitBatch:
        """Each query's first ``depth`` hits in the retriever's own order (re-ranker,
        else fused, else primary score, best first; ties and NaN scores in input order),
        kept in input order; the batch itself when no query has more."""
        if self.width <= depth or not self.n_queries:
            return self
        own = next(
            c for c in ("rerank", "fused", self.primary_channel) if getattr(self, c) is not None
        )
        scores = getattr(self, own)
        real = np.arange(self.width)[None, :] < self.lengths[:, None]
        # Real hits first, best first; a NaN score after every real score, padding last.
        key = np.where(real, np.where(np.isnan(scores), np.inf, -scores), np.nan)
        cols = key.argsort(axis=1, kind="stable")[:, :depth]
        cols.sort(axis=1)  # the kept hits in their input order: the same sums, to the bit
        rows = np.arange(self.n_queries)[:, None]
        taken: dict[str, object] = {
            name: None if (arr := getattr(self, name)) is None else arr[rows, cols]
            for name in (*_PRIMARY_ORDER, *READER_FIELDS, "doc_codes", "source_type_codes")
        }
        if self.entity_matrix is not None:
            taken["entity_matrix"] = self.entity_matrix[rows, cols]
        return replace(self, lengths=np.minimum(self.lengths, depth), **taken)  # type: ignore[arg-type]  # arrays of the fields' own types

    @classmethod
    def from_hits(cls, hits: Sequence[HitScores]) -> HitBatch:
        """Pad a list of per-query hit lists into one batch.

        All queries with hits must provide the same channels and dense metric; a query
        without hits fits any batch (it is scored as nothing found, wherever it stands).

        Raises:
            ConfidenceError: the queries disagree on channels or metric.
        """
        if not hits:
            return cls(lengths=np.zeros(0, dtype=np.int64), dense=np.zeros((0, 0)))
        first = next((h for h in hits if h.n_hits), hits[0])
        metric = first.metric
        present = _channels_of(first)
        for i, h in enumerate(hits):
            mine = _channels_of(h)
            if h.n_hits and (mine != present or h.metric != metric):
                raise ConfidenceError(
                    f"query {i} has channels {sorted(mine)} / metric {h.metric!r}, "
                    f"expected {sorted(present)} / {metric!r}"
                )
        if not present:
            present = ("dense",)
        q = len(hits)
        n_hits = [h.n_hits for h in hits]
        lengths = np.array(n_hits, dtype=np.int64)
        k = max(n_hits)
        arrays: dict[str, FloatArray] = {}
        for channel in present:
            if k and min(n_hits) == k:
                # Nothing to pad (always so for one query): one copy of the rows.
                arrays[channel] = np.array([getattr(h, channel) for h in hits], dtype=np.float64)
                continue
            out = np.zeros((q, k))
            for i, h in enumerate(hits):
                arr = getattr(h, channel)
                if arr is not None:
                    out[i, : h.n_hits] = arr
            arrays[channel] = out
        doc_codes = None
        if any(h.doc_ids is not None for h in hits):
            doc_codes = np.full((q, k), -1, dtype=np.int64)
            for i, h in enumerate(hits):
                if h.doc_ids is not None:
                    table: dict[str, int] = {}
                    doc_codes[i, : h.n_hits] = [table.setdefault(d, len(table)) for d in h.doc_ids]
        st_codes = None
        vocab: tuple[str, ...] = ()
        if any(h.source_types is not None for h in hits):
            vocab_map: dict[str, int] = {}
            st_codes = np.full((q, k), -1, dtype=np.int64)
            for i, h in enumerate(hits):
                if h.source_types is not None:
                    st_codes[i, : h.n_hits] = [
                        vocab_map.setdefault(s, len(vocab_map)) for s in h.source_types
                    ]
            vocab = tuple(vocab_map)
        em, counts = None, None
        if any(h.entity_matrix is not None for h in hits):
            m = max(h.entity_matrix.shape[1] for h in hits if h.entity_matrix is not None)
            em = np.zeros((q, k, m), dtype=bool)
            counts = np.zeros(q, dtype=np.int64)
            for i, h in enumerate(hits):
                if h.entity_matrix is not None:
                    em[i, : h.n_hits, : h.entity_matrix.shape[1]] = h.entity_matrix
                    counts[i] = h.entity_matrix.shape[1]
        for name in READER_FIELDS:
            if any(getattr(h, name) is not None for h in hits):
                reader = np.full((q, k), np.nan)
                for i, h in enumerate(hits):
                    arr = getattr(h, name)
                    if arr is not None:
                        reader[i, : h.n_hits] = arr
                arrays[name] = reader
        return cls(
            lengths=lengths,
            metric=metric,
            doc_codes=doc_codes,
            source_type_codes=st_codes,
            source_type_vocab=vocab,
            entity_matrix=em,
            entity_counts=counts,
            **arrays,
        )


def _channels_of(hits: HitScores) -> tuple[Channel, ...]:
    """The score channels ``hits`` carries, in _PRIMARY_ORDER."""
    return tuple(c for c in _PRIMARY_ORDER if getattr(hits, c) is not None)


def entity_matrix(query_entities: Sequence[str], hit_texts: Sequence[str]) -> BoolArray:
    """Which of the query's entities each hit text mentions (case-insensitive substring).

    Args:
        query_entities: entity strings extracted from the query.
        hit_texts: the text of each hit.

    Returns:
        bool array of shape (len(hit_texts), len(query_entities)).
    """
    entities = [e.casefold() for e in query_entities if e.strip()]
    texts = [t.casefold() for t in hit_texts]
    out = np.zeros((len(texts), len(entities)), dtype=bool)
    for i, text in enumerate(texts):
        for j, entity in enumerate(entities):
            out[i, j] = entity in text
    return out
