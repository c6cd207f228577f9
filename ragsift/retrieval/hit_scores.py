"""The confidence engine's input from index hits, and how many candidates a search asks for.

Shared by the pipeline and by everything that replays its retrieval offline
(evaluation, self-calibration, corrective-retrieval eval), so they score hits
exactly as a worker does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragsift.confidence import HitScores
from ragsift.errors import InvalidEventError
from ragsift.retrieval.reader import ReaderScores
from ragsift.retrieval.records import SearchHit

__all__ = ["MIN_PREFETCH", "PREFETCH_FACTOR", "hit_scores", "prefetch_limit", "unknown_collection"]

# BM25-only hits missing from the dense channel's candidates get the lowest dense
# score that channel returned: an upper bound on their true similarity.
_MISSING = float("nan")

# Candidates per channel before fusion: 3x the hits asked for (at least 20) keeps
# the fused top-k stable (a hit must rank high in one channel to survive RRF)
# at half the engine and fusion cost of a flat 50.
PREFETCH_FACTOR = 3
MIN_PREFETCH = 20


def unknown_collection(collection: str, cause: Exception) -> InvalidEventError:
    """The error of a query naming a collection the index does not have."""
    return InvalidEventError(f"unknown collection {collection!r}: {cause}")


def prefetch_limit(limit: int) -> int:
    """Per-channel candidates for a hybrid search returning ``limit`` hits."""
    return max(PREFETCH_FACTOR * limit, MIN_PREFETCH)


def hit_scores(
    hits: Sequence[SearchHit],
    mode: str,
    entities: Sequence[str],
    reader: ReaderScores | None = None,
) -> HitScores:
    """The engine's input from index hits: per-channel raw scores (and reader scores,
    when the reader read them), aligned by hit."""
    if not hits:
        return HitScores.empty()
    dense = sparse = None
    if mode in ("hybrid", "dense"):
        dense = _fill([h.dense_score for h in hits])
    if mode in ("hybrid", "keyword"):
        sparse = _fill([h.sparse_score for h in hits], floor=0.0)
    fused = np.array([h.fused_score or 0.0 for h in hits]) if mode == "hybrid" else None
    scores = [h.rerank_score for h in hits]
    rerank = None if None in scores else np.array(scores, dtype=np.float64)
    entity = None
    if entities:
        lowered = [e.casefold() for e in entities]
        entity = np.array([[e in h.text.casefold() for e in lowered] for h in hits], dtype=bool)
    return HitScores(
        dense=dense,
        metric="cosine",
        sparse=sparse,
        fused=fused,
        rerank=rerank,
        doc_ids=[h.doc_id for h in hits],
        source_types=[h.source_type for h in hits],
        entity_matrix=entity,
        sentence_scores=reader.sentence if reader is not None else None,
        term_coverage=reader.coverage if reader is not None else None,
        token_scores=reader.token if reader is not None else None,
    )


# Engines sum sparse products in varying order, so BM25 scores wobble in the
# last float32 digits between runs; rounding makes scoring (and calibration
# fits) reproducible while changing nothing a user could see.
_SCORE_DECIMALS = 5


def _fill(values: list[float | None], floor: float | None = None) -> np.ndarray:
    """Missing channel scores → the lowest score that channel returned (an upper bound)."""
    # Four numpy calls, not seven: run twice per query, numpy's per-call cost is the cost.
    arr = np.array([_MISSING if v is None else v for v in values], dtype=np.float64)
    arr = arr.round(_SCORE_DECIMALS)
    missing = np.isnan(arr)
    if floor is None:
        present = arr[~missing]
        floor = float(present.min()) if present.size else 0.0
    arr[missing] = floor
    return arr
