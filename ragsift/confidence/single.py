"""The one-query fast path: the batch kernel's arithmetic on short Python lists.

For a single query (20-odd hits) numpy's per-call overhead dominates, so this
module computes the same signals, selection, levels and answerability with
plain Python over the ranked scores and calls the scorer on a one-row matrix.
It must agree with :mod:`.engine`'s batch path; the unit tests check that
property on random inputs.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from operator import mul

import numpy as np

from ragsift.confidence.assessment import Assessment, build_assessment
from ragsift.confidence.config import AdaptiveParams, ConfidenceConfig
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.filtering import (
    ADAPTIVE_STOP,
    BELOW_FLOOR,
    BELOW_THRESHOLD,
    DROP_RULES,
    MAX_K,
    MIN_RESULTS_CAP,
    TOP_K_CAP,
    DropReason,
    StopReason,
)
from ragsift.confidence.hits import HitScores
from ragsift.confidence.normalize import Metric, normalize_scores
from ragsift.confidence.scorers import OneQuery, Scorer
from ragsift.confidence.signals import SIGNAL_NAMES, Signals

__all__ = ["assess_many", "assess_one"]

_NAN = float("nan")


def _pearson(a: Sequence[float], b: Sequence[float]) -> float:
    n = len(a)
    if n < 2:
        return _NAN
    ma, mb = sum(a) / n, sum(b) / n
    da = [x - ma for x in a]
    db = [y - mb for y in b]
    denom = math.sqrt(sum(map(mul, da, da)) * sum(map(mul, db, db)))
    if denom <= 1e-12:
        return _NAN
    return max(-1.0, min(1.0, sum(map(mul, da, db)) / denom))


def _average_ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _signal_row(
    hits: HitScores,
    cfg: ConfidenceConfig,
    ranked: list[float],
    chans: dict[str, list[float]],
) -> list[float]:
    n = len(ranked)
    top = ranked[0] if n else 0.0
    gap = ranked[0] - ranked[1] if n >= 2 else 0.0
    if n:
        mean = sum(ranked) / n
        dev = [x - mean for x in ranked]
        spread = math.sqrt(sum(map(mul, dev, dev)) / n)
    else:
        spread = 0.0
    ct = cfg.consensus_threshold
    count = float(len([x for x in ranked if x > ct]))
    consensus = min(count / cfg.consensus_full_at, 1.0)
    support = sum(ranked[: cfg.support_depth]) / cfg.support_depth
    agreement = corr = impact = diversity = coverage = quality = _NAN
    dense, sparse = chans.get("dense"), chans.get("sparse")
    if dense is not None and sparse is not None:
        agreement = max(map(min, dense, sparse)) if n else 0.0
        corr = _pearson(dense, sparse)
    rerank, fused = chans.get("rerank"), chans.get("fused")
    if rerank is not None and fused is not None:
        impact = 1.0 - _pearson(_average_ranks(rerank), _average_ranks(fused))
    if hits.doc_ids is not None and n:
        diversity = len(set(hits.doc_ids)) / n
    em = hits.entity_matrix
    if em is not None and em.shape[1] > 0:
        coverage = float(em.any(axis=0).mean()) if n else 0.0
    if hits.source_types is not None and n:
        quality = sum(cfg.source_quality_of(s) for s in hits.source_types) / n
    return [
        top,
        gap,
        spread,
        count,
        consensus,
        support,
        agreement,
        corr,
        impact,
        diversity,
        coverage,
        quality,
        float(n),
        _reader_max(hits.sentence_scores),
        _reader_max(hits.term_coverage),
    ]


def _reader_max(scores: np.ndarray | None) -> float:
    """As signals.reader_max for one query: best read score clipped to [0, 1], NaN if none."""
    if scores is None:
        return _NAN
    read = [v for v in scores.tolist() if v == v]  # v == v: not NaN (read)
    return min(max(max(read), 0.0), 1.0) if read else _NAN


def _adaptive(
    ranked: list[float],
    order: list[int],
    params: AdaptiveParams,
    entity_rows: list[list[bool]] | None,
) -> tuple[int, StopReason, float, list[int]]:
    """Returns kept count, stop reason, E1 confidence and a reason code per ranked hit."""
    n_valid = sum(1 for x in ranked if x >= params.floor)
    if n_valid == 0:
        return 0, "no_results", 0.0, [BELOW_FLOOR] * len(ranked)
    n_entities = len(entity_rows[0]) if entity_rows else 0
    seen = [False] * n_entities
    total = 0.0
    conf = 0.0
    kept = n_valid
    stop: StopReason = "max_k"
    for j in range(n_valid):
        total += ranked[j]
        c = j + 1
        conf = total / c
        if n_entities and entity_rows is not None:
            seen = [a or b for a, b in zip(seen, entity_rows[order[j]], strict=True)]
            conf = params.similarity_weight * conf + params.coverage_weight * (
                sum(seen) / n_entities
            )
        if conf >= params.threshold and c >= params.min_k:
            kept, stop = c, "threshold"
            break
        if c >= params.max_k:
            kept = c
            break
    after = ADAPTIVE_STOP if stop == "threshold" else MAX_K
    codes = [0 if j < kept else after if j < n_valid else BELOW_FLOOR for j in range(len(ranked))]
    return kept, stop, conf, codes


def _channels(hits: HitScores) -> tuple[tuple[str, Metric], ...]:
    """(channel, metric) of every channel ``hits`` carries, in normalization order."""
    table: tuple[tuple[str, Metric], ...] = (
        ("dense", hits.metric),
        ("sparse", "bm25"),
        ("fused", "rrf"),
        ("rerank", "reranker"),
    )
    return tuple((name, metric) for name, metric in table if getattr(hits, name) is not None)


def _best_first(primary: list[float]) -> list[int]:
    """Hit positions best first, ties in input order: ``np.argsort(-x, kind="stable")``."""
    total = sum(primary)
    if total != total:  # a NaN (an infinite BM25 score normalizes to one): numpy's order
        order: list[int] = np.argsort(-np.array(primary), kind="stable").tolist()
        return order
    # A stable sort with reverse=True keeps equal scores in input order, as numpy's
    # stable argsort of the negated scores does (no NaN here, so the same comparisons).
    return sorted(range(len(primary)), key=primary.__getitem__, reverse=True)


def assess_one(
    hits: HitScores,
    *,
    cfg: ConfidenceConfig,
    scorer: Scorer,
    answer_threshold: float,
    calibration_version: str | None,
    threshold: float,
    response_quality: float,
    adaptive: AdaptiveParams,
    top_k: int | None = None,
) -> Assessment:
    """Assess one query (same result as the batch path, computed for one).

    ``top_k``: E4's k for this query; None keeps ``cfg.top_k``.
    """
    params = cfg.normalization
    chans = {
        name: normalize_scores(getattr(hits, name), metric, params).tolist()
        for name, metric in _channels(hits)
    }
    return _assess_normalized(
        hits,
        chans,
        cfg=cfg,
        scorer=scorer,
        answer_threshold=answer_threshold,
        calibration_version=calibration_version,
        threshold=threshold,
        response_quality=response_quality,
        adaptive=adaptive,
        top_k=cfg.top_k if top_k is None else top_k,
    )


def assess_many(
    hits: Sequence[HitScores],
    *,
    cfg: ConfidenceConfig,
    scorer: Scorer,
    answer_threshold: float,
    calibration_version: str | None,
    thresholds: Sequence[float],
    response_quality: Sequence[float],
    adaptive: Sequence[AdaptiveParams],
    top_k: Sequence[int] | None = None,
) -> list[Assessment]:
    """:func:`assess_one` for each query, with one numpy call per channel for them all.

    ``top_k``: E4's k per query; None keeps ``cfg.top_k`` for every query.

    Normalization is elementwise, so normalizing the queries' scores concatenated
    gives each score exactly the value it gets alone; everything after it is the
    same per-query Python as :func:`assess_one`. Results are identical to calling
    :func:`assess_one` per query; only numpy's per-call overhead is paid once.
    """
    params = cfg.normalization
    # Queries with the same channels and dense metric share one normalization call.
    groups: dict[tuple[tuple[str, Metric], ...], list[int]] = {}
    for i, h in enumerate(hits):
        groups.setdefault(_channels(h), []).append(i)
    chans: list[dict[str, list[float]]] = [{} for _ in hits]
    for channels, idxs in groups.items():
        bounds = [0]
        for i in idxs:
            bounds.append(bounds[-1] + hits[i].n_hits)
        for name, metric in channels:
            raw = np.concatenate([getattr(hits[i], name) for i in idxs])
            flat = normalize_scores(raw, metric, params).tolist()
            for j, i in enumerate(idxs):
                chans[i][name] = flat[bounds[j] : bounds[j + 1]]
    return [
        _assess_normalized(
            h,
            chans[i],
            cfg=cfg,
            scorer=scorer,
            answer_threshold=answer_threshold,
            calibration_version=calibration_version,
            threshold=thresholds[i],
            response_quality=response_quality[i],
            adaptive=adaptive[i],
            top_k=cfg.top_k if top_k is None else top_k[i],
        )
        for i, h in enumerate(hits)
    ]


def _assess_normalized(
    hits: HitScores,
    chans: dict[str, list[float]],
    *,
    cfg: ConfidenceConfig,
    scorer: Scorer,
    answer_threshold: float,
    calibration_version: str | None,
    threshold: float,
    response_quality: float,
    adaptive: AdaptiveParams,
    top_k: int,
) -> Assessment:
    """Everything after normalization, for one query, in plain Python."""
    p = chans.get(hits.primary_channel, [])
    order = _best_first(p) if hits.n_hits else []
    ranked = [p[i] for i in order]
    n = len(ranked)
    row = _signal_row(hits, cfg, ranked, chans)

    relaxed = False
    adaptive_conf: float | None = None
    limit: int | None = None
    if cfg.selection == "threshold":
        # ranked is best first, so "how many reach x" is a bisection on the negated list.
        neg = [-x for x in ranked]
        strict = bisect_right(neg, -threshold)
        bar = threshold
        kept = strict
        if strict < cfg.min_results and n > 0:
            relaxed = True
            bar = threshold * (1.0 - cfg.relax_fraction)
            kept = min(bisect_right(neg, -bar), cfg.min_results)
        codes = [
            0 if j < kept else MIN_RESULTS_CAP if ranked[j] >= bar else BELOW_THRESHOLD
            for j in range(n)
        ]
        stop: StopReason = "threshold" if kept else "no_results"
        limit = cfg.min_results
    elif cfg.selection == "top_k":
        if top_k < 1:
            raise ConfidenceError(f"top_k must be > 0, got {top_k}")
        kept = min(n, top_k)
        bar = 0.0
        codes = [0 if j < kept else TOP_K_CAP for j in range(n)]
        stop = "max_k" if kept else "no_results"
        limit = top_k
    else:
        em = hits.entity_matrix
        rows = em.tolist() if em is not None and em.shape[1] > 0 else None
        kept, stop, adaptive_conf, codes = _adaptive(ranked, order, adaptive, rows)
        bar = adaptive.floor
        limit = adaptive.max_k

    # What each rule records (A13): threshold rules their bar, cap rules their limit.
    recorded = {
        BELOW_THRESHOLD: (bar, None),
        BELOW_FLOOR: (bar, None),
        ADAPTIVE_STOP: (adaptive.threshold, None),
        MIN_RESULTS_CAP: (None, limit),
        MAX_K: (None, limit),
        TOP_K_CAP: (None, limit),
    }
    dropped = [
        DropReason(order[j], DROP_RULES[codes[j] - 1], ranked[j], *recorded[codes[j]])
        for j in range(kept, n)
    ]
    kept_scores = ranked[:kept]
    kept_mean = sum(kept_scores) / max(kept, 1)
    conf = scorer.score_one(OneQuery(row, kept_mean, kept, threshold, response_quality))
    lv = cfg.levels
    code = 3 if kept == 0 else (conf < lv.high) + (conf < lv.medium) + (conf < lv.low)
    av = cfg.advisory
    adv = (conf < av.high) + (conf < av.advisory) + (conf < av.low)
    docs = sum(1 for x in kept_scores if x >= threshold)
    return build_assessment(
        cfg,
        confidence=conf,
        code=int(code),
        advisory_code=int(adv),
        signals=_signals(row),
        kept_indices=tuple(order[:kept]),
        kept_scores=tuple(kept_scores),
        dropped=tuple(dropped),
        total=n,
        bar=bar,
        relaxed=relaxed,
        stop_reason=stop,
        adaptive_confidence=adaptive_conf,
        docs_within=docs,
        answerable=docs >= cfg.min_documents and conf >= answer_threshold,
        answer_threshold=answer_threshold,
        scorer=scorer.name,
        primary_metric=hits.primary_metric,
        calibration_version=calibration_version,
    )


def _opt(v: float) -> float | None:
    return None if v != v else v  # v != v: NaN, "not available"


def _signals(row: list[float]) -> Signals:
    """Signals from a row laid out as SIGNAL_NAMES."""
    return Signals(
        top_score=row[0],
        score_gap=row[1],
        score_spread=row[2],
        consensus_count=int(row[3]),
        consensus=row[4],
        support=row[5],
        agreement=_opt(row[6]),
        bm25_dense_correlation=_opt(row[7]),
        reranker_impact=_opt(row[8]),
        document_diversity=_opt(row[9]),
        entity_coverage=_opt(row[10]),
        source_quality=_opt(row[11]),
        n_hits=int(row[12]),
        sentence_match=_opt(row[13]),
        term_coverage=_opt(row[14]),
    )


assert len(SIGNAL_NAMES) == 15, "single._signals and _signal_row follow SIGNAL_NAMES"
