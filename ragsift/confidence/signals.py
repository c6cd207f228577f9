"""Retrieval signals (B1, plus E1 entity coverage and C1 source quality), vectorized over queries.

Every signal is computed on normalized scores (see :mod:`.normalize`), over a
query's first :data:`SIGNAL_DEPTH` hits (below), for a whole
:class:`~.hits.HitBatch` at once. The result is a (queries x signals) float
matrix whose columns are :data:`SIGNAL_NAMES`; NaN means "not available" (e.g.
no BM25 channel).

Per query, with ``s`` the primary normalized scores sorted best first and
``n`` the number of hits:

* ``top_score``  = s[0] (0 without hits).
* ``score_gap``  = s[0] - s[1] (0 with fewer than two hits).
* ``score_spread`` = population std of s.
* ``consensus_count`` = #{s > consensus_threshold (0.75)};
  ``consensus`` = min(consensus_count / consensus_full_at, 1).
* ``support``    = (s[0] + ... + s[d-1]) / d with d = support_depth (3); a
  missing hit counts 0. Rises with every hit score: "are there several good hits".
* ``agreement``  = max_i min(dense_i, bm25_i): the best hit both retrievers
  rate highly. Monotone in either channel, unlike a correlation.
* ``bm25_dense_correlation`` = Pearson r of the dense and BM25 scores (B1).
* ``reranker_impact`` = 1 - Spearman rho(reranker, RRF) (B1), in [0, 2].
* ``document_diversity`` = distinct documents / n (B1).
* ``entity_coverage`` = share of the query's entities mentioned by any hit (E1).
* ``source_quality`` = mean C1 source-type quality of the hits, in [0, 1].
* ``n_hits``     = every hit of the query, past the depth below too.
* ``sentence_match`` = max over read hits of clip(best query-sentence cosine, 0, 1)
  (reader signal; NaN when no hit was read).
* ``term_coverage`` = max over hits of the IDF-weighted share of query terms the
  hit holds (reader signal; NaN when not available).
* ``token_match`` = clip(the top hit's token match, 0, 1): the mean over the query's
  content tokens of their best in-context cosine to one of the hit's tokens (reader
  signal; NaN when not read).

Every signal but ``n_hits`` reads the query's first :data:`SIGNAL_DEPTH` (8) hits
in the retriever's order (the re-ranker's, else the fused, else the primary score):
the depth the shipped calibrations were fit at. A query asking for 32 hits would
otherwise count more agreeing hits, and better covering ones, than any fit saw, and
answer questions whose answer its corpus lacks more often (ADR 027).

Apart from which of several hits tied at the cut is read, none of these depends on
the order the hits arrive in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.confidence._rows import row_sums
from ragsift.confidence._scipy import rankdata_rows
from ragsift.confidence.config import SIGNAL_DEPTH, ConfidenceConfig
from ragsift.confidence.hits import HitBatch, HitScores
from ragsift.confidence.normalize import NormalizationParams, normalize_scores

__all__ = [
    "SIGNAL_INDEX",
    "SIGNAL_NAMES",
    "PreparedBatch",
    "Signals",
    "compute_signal_matrix",
    "compute_signals",
    "prepare_batch",
    "reported_signal_matrix",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SIGNAL_NAMES: tuple[str, ...] = (
    "top_score",
    "score_gap",
    "score_spread",
    "consensus_count",
    "consensus",
    "support",
    "agreement",
    "bm25_dense_correlation",
    "reranker_impact",
    "document_diversity",
    "entity_coverage",
    "source_quality",
    "n_hits",
    "sentence_match",
    "term_coverage",
    "token_match",
)
"""Column order of the signal matrix."""

SIGNAL_INDEX: dict[str, int] = {name: i for i, name in enumerate(SIGNAL_NAMES)}
"""Column of each signal in the signal matrix."""

_INT_SIGNALS = frozenset({"consensus_count", "n_hits"})
# Sorts after every document code; built once (np.iinfo costs a few us per call).
_CODE_PADDING = int(np.iinfo(np.int64).max)


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch with every channel normalized, padding masked and hits ranked.

    Attributes:
        mask: (Q, K) True where a real hit sits.
        lengths: (Q,) real hits per query.
        primary: (Q, K) normalized primary score, NaN in padding.
        order: (Q, K) column indices sorting each row best first (padding last).
        ranked: (Q, K) primary scores in that order, -inf in padding.
        channels: normalized scores per present channel, NaN in padding.
    """

    mask: BoolArray
    lengths: npt.NDArray[np.int64]
    primary: FloatArray
    order: npt.NDArray[np.intp]
    ranked: FloatArray
    channels: dict[str, FloatArray]


def prepare_batch(batch: HitBatch, params: NormalizationParams) -> PreparedBatch:
    """Normalize every channel of ``batch`` and rank each query's hits best first."""
    q, k = batch.n_queries, max(batch.width, 1)
    lengths = batch.lengths
    mask = np.arange(k)[None, :] < lengths[:, None]
    # Without padding (always so for one query) every mask below keeps everything:
    # skip those no-op np.where calls, a large share of a small batch's cost.
    padded = not (k == batch.width and bool(mask.all()))
    channels: dict[str, FloatArray] = {}
    for name, metric in (
        ("dense", batch.metric),
        ("sparse", "bm25"),
        ("fused", "rrf"),
        ("rerank", "reranker"),
    ):
        raw = getattr(batch, name)
        if raw is None:
            continue
        if raw.shape[1] == 0:
            raw = np.zeros((q, 1))
        if not padded:
            channels[name] = normalize_scores(raw, metric, params)  # type: ignore[arg-type]  # metric literal from the table above
            continue
        # Padding may hold anything (even values a formula rejects): blank it first.
        safe = np.where(mask, raw, 0.0)
        channels[name] = np.where(mask, normalize_scores(safe, metric, params), np.nan)  # type: ignore[arg-type]  # metric literal from the table above
    primary = channels.get(batch.primary_channel)
    if primary is None:
        primary = np.full((q, k), np.nan)
    # Best first, ties in input order; a NaN score (an infinite BM25 score normalizes
    # to one) after every real score but before the padding, so each row's real hits
    # are its first ``lengths`` ranked columns.
    sort_key = np.where(np.isnan(primary), np.inf, -primary)
    in_place = primary
    if padded:
        sort_key = np.where(mask, sort_key, np.nan)
        in_place = np.where(mask, primary, -np.inf)
    # Methods and plain indexing, not np.argsort / np.take_along_axis: on a one-query
    # batch their Python-level wrappers cost more than the sort itself.
    order = sort_key.argsort(axis=1, kind="stable")
    ranked = in_place[np.arange(q)[:, None], order]
    return PreparedBatch(mask, lengths, primary, order, ranked, channels)


def _masked_corr(a: FloatArray, b: FloatArray, mask: BoolArray, n: FloatArray) -> FloatArray:
    """Pearson r per row over masked entries; NaN with < 2 hits or no variance."""
    denom_n = np.maximum(n, 1.0)
    a0 = np.where(mask, a, 0.0)
    b0 = np.where(mask, b, 0.0)
    da = np.where(mask, a0 - (row_sums(a0) / denom_n)[:, None], 0.0)
    db = np.where(mask, b0 - (row_sums(b0) / denom_n)[:, None], 0.0)
    denom = np.sqrt(row_sums(da * da) * row_sums(db * db))
    ok = (n >= 2) & (denom > 1e-12)
    # No errstate needed: every divisor is > 1e-12 or the 1.0 put in its place.
    r = np.where(ok, row_sums(da * db) / np.where(ok, denom, 1.0), np.nan)
    return r.clip(-1.0, 1.0)


def compute_signal_matrix(
    batch: HitBatch,
    config: ConfidenceConfig,
    prepared: PreparedBatch | None = None,
) -> FloatArray:
    """All signals of every query in ``batch``: a (Q, len(SIGNAL_NAMES)) matrix, NaN = missing.

    They read each query's first :data:`SIGNAL_DEPTH` hits in the retriever's order
    (``n_hits`` counts them all): asking for more hits does not lift the confidence.
    """
    n_all = batch.lengths
    if batch.width > SIGNAL_DEPTH:
        batch, prepared = batch.head(SIGNAL_DEPTH), None
    p = prepared if prepared is not None else prepare_batch(batch, config.normalization)
    q, k = p.mask.shape
    n = p.lengths.astype(np.float64)
    has = n > 0
    out = np.full((q, len(SIGNAL_NAMES)), np.nan)
    ranked = p.ranked
    top = np.where(has, ranked[:, 0], 0.0)
    out[:, 0] = top
    out[:, 1] = np.where(n >= 2, top - ranked[:, 1], 0.0) if k > 1 else 0.0
    # Ranked columns: a row's real hits come first, best first, so the real ranked
    # columns are exactly the mask's (real hits fill the first columns of a row).
    real = p.mask
    denom_n = np.maximum(n, 1.0)
    # Running sums of the real ranked scores, left to right (as row_sums adds): the
    # last column is the row's sum, column depth - 1 the sum of its first ``depth``.
    running = np.where(real, ranked, 0.0).cumsum(axis=1)
    mean = running[:, -1] / denom_n
    dev = np.where(real, ranked - mean[:, None], 0.0)
    out[:, 2] = np.sqrt(row_sums(dev * dev) / denom_n)
    count = (ranked > config.consensus_threshold).sum(1).astype(np.float64)
    out[:, 3] = count
    out[:, 4] = np.minimum(count / config.consensus_full_at, 1.0)
    depth = config.support_depth
    out[:, 5] = running[:, min(depth, k) - 1] / depth
    dense, sparse = p.channels.get("dense"), p.channels.get("sparse")
    if dense is not None and sparse is not None:
        both = np.where(p.mask, np.minimum(dense, sparse), -np.inf)
        out[:, 6] = np.where(has, both.max(1), 0.0)
        out[:, 7] = _masked_corr(dense, sparse, p.mask, n)
    rerank, fused = p.channels.get("rerank"), p.channels.get("fused")
    if rerank is not None and fused is not None:
        # Padding ranks after every real hit, so real hits keep ranks 1..n; ties average.
        r1 = rankdata_rows(np.where(p.mask, rerank, np.inf))
        r2 = rankdata_rows(np.where(p.mask, fused, np.inf))
        out[:, 8] = 1.0 - _masked_corr(r1, r2, p.mask, n)
    if batch.doc_codes is not None:
        codes = batch.doc_codes if batch.doc_codes.shape[1] else np.zeros((q, 1), np.int64)
        pad = _CODE_PADDING
        srt = np.where(p.mask, codes, pad)
        srt.sort(axis=1)  # in place: the method skips np.sort's copy and wrapper
        new = np.ones(srt.shape, dtype=bool)
        new[:, 1:] = srt[:, 1:] != srt[:, :-1]
        distinct = (new & (srt != pad)).sum(1)
        not_given = (p.mask & (codes < 0)).any(1)  # code -1: this query gave no document ids
        out[:, 9] = np.where(has & ~not_given, distinct / denom_n, np.nan)
    if batch.entity_matrix is not None and batch.entity_counts is not None:
        em = batch.entity_matrix
        m = em.shape[2]
        if em.shape[1] == 0:
            em = np.zeros((q, 1, m), dtype=bool)
        covered = (em & p.mask[:, :, None]).any(1)
        valid = np.arange(m)[None, :] < batch.entity_counts[:, None]
        counts = batch.entity_counts.astype(np.float64)
        # No errstate needed: the divisor is at least 1.
        out[:, 10] = np.where(
            counts > 0, (covered & valid).sum(1) / np.maximum(counts, 1.0), np.nan
        )
    if batch.source_type_codes is not None:
        table = np.array([config.source_quality_of(v) for v in batch.source_type_vocab] + [0.0])
        codes = batch.source_type_codes
        if codes.shape[1] == 0:
            codes = np.full((q, 1), -1, np.int64)
        quality = table[np.where(codes < 0, len(table) - 1, codes)]
        total = row_sums(np.where(p.mask, quality, 0.0))
        not_given = (p.mask & (codes < 0)).any(1)  # code -1: this query gave no source types
        out[:, 11] = np.where(has & ~not_given, total / denom_n, np.nan)
    out[:, 12] = n_all
    for column, name in ((13, "sentence_scores"), (14, "term_coverage"), (15, "token_scores")):
        reader = getattr(batch, name)
        if reader is not None:
            out[:, column] = reader_max(reader, p.mask)
    return out


def reader_max(scores: FloatArray, mask: BoolArray) -> FloatArray:
    """Per row, the best reader score of the real, read hits, clipped to [0, 1]; NaN if none."""
    vals = np.where(mask[:, : scores.shape[1]], scores, np.nan)
    read = ~np.isnan(vals)
    best = np.where(read, vals, -np.inf).max(axis=1, initial=-np.inf)
    return np.where(read.any(axis=1), best.clip(0.0, 1.0), np.nan)


@dataclass(frozen=True, slots=True)
class Signals:
    """The signals of one query's hits (B4's breakdown); ``None`` = not available."""

    top_score: float
    score_gap: float
    score_spread: float
    consensus_count: int
    consensus: float
    support: float
    agreement: float | None
    bm25_dense_correlation: float | None
    reranker_impact: float | None
    document_diversity: float | None
    entity_coverage: float | None
    source_quality: float | None
    n_hits: int
    sentence_match: float | None = None
    term_coverage: float | None = None
    token_match: float | None = None

    @classmethod
    def from_row(cls, row: FloatArray) -> Signals:
        """Build from one row of the signal matrix."""
        values: dict[str, Any] = {}
        for name, v in zip(SIGNAL_NAMES, row.tolist(), strict=True):
            if name in _INT_SIGNALS:
                values[name] = int(v)
            else:
                values[name] = None if v != v else float(v)  # v != v: NaN
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        # Every field is a number or None: no need for asdict's deep copy (10x slower).
        return {name: getattr(self, name) for name in self.__slots__}


def compute_signals(hits: HitScores, config: ConfidenceConfig | None = None) -> Signals:
    """Signals of one query's hits (convenience over :func:`compute_signal_matrix`)."""
    cfg = config if config is not None else ConfidenceConfig()
    batch = HitBatch.from_hits([hits])
    return Signals.from_row(compute_signal_matrix(batch, cfg)[0])


def reported_signal_matrix(reports: Sequence[Mapping[str, float]]) -> FloatArray:
    """Signal rows, in :data:`SIGNAL_NAMES` order, from what results report
    (``breakdown.signals``): an absent or non-finite value is missing (NaN).

    Reports come back from a topic or a cache, so they are not trusted: every
    signal a model may use lives in [0, 1], and values outside are clipped rather
    than allowed to dominate (or overflow) it. The pipeline always reports a top
    score (0 without hits); the model's imputations start from it, so it is never
    left missing.
    """
    rows = np.array(
        [[float(r.get(name, np.nan)) for name in SIGNAL_NAMES] for r in reports],
        dtype=np.float64,
    ).reshape(len(reports), len(SIGNAL_NAMES))
    rows[~np.isfinite(rows)] = np.nan
    top = rows[:, SIGNAL_INDEX["top_score"]]
    top[np.isnan(top)] = 0.0
    return np.clip(rows, 0.0, 1.0)
