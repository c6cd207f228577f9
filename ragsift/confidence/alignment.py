"""Align a collection's score levels to the calibration corpus's, on its probes (ADR 024).

A calibration maps retrieval scores to a probability, and learns what a score
means on the corpus it was fit on. Score levels move from corpus to corpus:
twelve handbook pages and a short user question give the right page a cosine
of ~0.47 and a BM25 of ~6, where a SQuAD question gets ~0.6 and ~22 from its
Wikipedia paragraph. Read on the SQuAD scale the handbook's right answers look
like near misses (answered: 1 question of 30).

What moves with the corpus is the whole scale, and the collection's probes
measure it without labels. Off-topic questions (the bundled bank) score a
median top cosine of 0.105 on the handbook against 0.284 on the calibration
corpus, and a median top BM25 of 2.5 against 9.6. Measured with those medians
as the zero, the answers' levels agree across corpora far better than their raw
values (the answers' median top cosine minus the probes' median: 0.325 on SQuAD
paragraphs, 0.317 over two-sentence chunks, 0.365 on the handbook, where the raw
medians are 0.61, 0.66 and 0.47; BM25 as a ratio: 2.21, 2.19, 2.43 against raw
21.9, 25.7, 6.1). So a collection's scores are moved before they are read:
its dense scores by the difference of the two cosine medians, its BM25 scores
by their ratio (IDF grows with the corpus, so BM25 moves by a factor), where
its probes score lower than the calibration corpus's (:func:`align` says why
only then). Its off-topic questions then score where the calibration's did,
and the probe re-map and re-certification (ADR 015) work on aligned scores.

What it assumes: that a collection's answers stand as far above its off-topic
questions as the calibration corpus's did. Near misses (on-topic questions the
collection lacks) are not probes, and rise with the answers where the scale
rises; the near-miss bar (ADR 021) and term coverage still read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragsift.confidence.normalize import NormalizationParams

__all__ = [
    "BM25_DEAD_ZONE",
    "DENSE_DEAD_ZONE",
    "MAX_BM25_SCALE",
    "MAX_DENSE_OFFSET",
    "MIN_BM25_LEVEL",
    "ProbeLevels",
    "ScoreAlignment",
    "align",
    "aligned_params",
    "probe_levels",
]

#: The largest move of a dense score: past it, the probes are not measuring a
#: scale but a collection unlike any text corpus (or a broken embedder).
MAX_DENSE_OFFSET: Final = 0.3
#: The largest BM25 factor (the handbook's is 3.8).
MAX_BM25_SCALE: Final = 8.0
#: Gaps that corpus size alone opens: SQuAD's own corpora of 175 to 351 paragraphs
#: put the probes' medians up to 0.060 (cosine) and 1.34x (BM25) under the shipped
#: fit's (581 paragraphs), and aligning across them raised the risk where a quarter
#: of the paragraphs was missing (0.129 -> 0.161). Only the part of a gap past
#: these is moved.
DENSE_DEAD_ZONE: Final = 0.07
BM25_DEAD_ZONE: Final = 1.5
#: A BM25 median under this says the probes share almost no word with the
#: collection: no scale can be read from it, and BM25 is left as it is.
MIN_BM25_LEVEL: Final = 0.5
_DECIMALS: Final = 4


class ProbeLevels(BaseModel):
    """Where off-topic questions score on a corpus: the medians over probes of each
    probe's best hit (cosine, and BM25), and how many probes were read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dense: float = Field(ge=-1.0, le=1.0, allow_inf_nan=False)
    bm25: float = Field(ge=0.0, le=1e6, allow_inf_nan=False)
    probes: int = Field(ge=1, le=1_000_000)


class ScoreAlignment(BaseModel):
    """A collection's move of its scores onto the calibration corpus's scale.

    Attributes:
        dense_offset: added to every dense score (the calibration's probe median
            minus the collection's).
        bm25_scale: every BM25 score is multiplied by it (their ratio; 1 when the
            collection's probes share too few words with it to say).
        levels: the collection's probe levels it was computed from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dense_offset: float = Field(ge=0.0, le=MAX_DENSE_OFFSET, allow_inf_nan=False)
    bm25_scale: float = Field(ge=1.0, le=MAX_BM25_SCALE, allow_inf_nan=False)
    levels: ProbeLevels

    def describe(self) -> str:
        """What it does, in words."""
        return (
            f"scores aligned on the probes: cosine {self.dense_offset:+.3f},"
            f" BM25 x{self.bm25_scale:.2f}"
        )


def probe_levels(dense: Sequence[float | None], bm25: Sequence[float | None]) -> ProbeLevels:
    """The levels of probes whose best hits scored ``dense`` and ``bm25`` (None: the
    channel found nothing, which counts as 0).

    Raises:
        ValueError: no probes, or the two sequences differ in length.
    """
    if not dense or len(dense) != len(bm25):
        raise ValueError("probe levels need one dense and one BM25 score per probe")
    d = np.array([0.0 if v is None else v for v in dense], dtype=np.float64)
    b = np.array([0.0 if v is None else v for v in bm25], dtype=np.float64)
    return ProbeLevels(
        dense=round(float(np.median(d)), _DECIMALS),
        bm25=round(float(np.median(b)), _DECIMALS),
        probes=int(d.size),
    )


def align(reference: ProbeLevels, collection: ProbeLevels) -> ScoreAlignment:
    """The move of ``collection``'s scores onto ``reference``'s (the calibration's).

    Only the part of a gap past what corpus size alone opens (the dead zones) is
    moved. Raise-only, channel by channel: where the collection's probes score higher than
    the reference's, the probe re-map (ADR 015) already brings its confidence down,
    measured on the same probes, and aligning downward as well cost answers for
    nothing (two-sentence chunks: answer rate 0.283 -> 0.234, ECE 0.022 -> 0.044).
    """
    gap = reference.dense - collection.dense - DENSE_DEAD_ZONE
    offset = float(np.clip(gap, 0.0, MAX_DENSE_OFFSET))
    scale = 1.0
    if min(reference.bm25, collection.bm25) >= MIN_BM25_LEVEL:
        ratio = reference.bm25 / collection.bm25 / BM25_DEAD_ZONE
        scale = float(np.clip(ratio, 1.0, MAX_BM25_SCALE))
    return ScoreAlignment(
        dense_offset=round(offset, _DECIMALS),
        bm25_scale=round(scale, _DECIMALS),
        levels=collection,
    )


def aligned_params(
    params: NormalizationParams, alignment: ScoreAlignment | None
) -> NormalizationParams:
    """``params`` with ``alignment`` applied (the same params without one)."""
    if alignment is None:
        return params
    return NormalizationParams(
        dot_scale=params.dot_scale,
        bm25_half=params.bm25_half / alignment.bm25_scale,
        rrf_k=params.rrf_k,
        rrf_lists=params.rrf_lists,
        reranker_logits=params.reranker_logits,
        dense_offset=params.dense_offset + alignment.dense_offset,
    )
