"""The signals read a query's first SIGNAL_DEPTH hits in the retriever's order (ADR 027).

The packaged calibrations were fit on 8 hits a query; a query asking for 32 counted
more agreeing, better covering hits than any fit saw, and let through more of the
questions its corpus cannot answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitBatch, HitScores
from ragsift.confidence.config import SIGNAL_DEPTH
from ragsift.confidence.signals import SIGNAL_INDEX, compute_signal_matrix

N = 4 * SIGNAL_DEPTH


def _long_list(seed: int, *, rerank: bool = False) -> HitScores:
    """N hybrid hits: the retriever's best (highest fused score) are not the densest,
    and the hits past the depth agree more and cover better than any before them."""
    rng = np.random.default_rng(seed)
    fused = np.sort(rng.uniform(0.01, 0.033, N))[::-1]
    dense = rng.uniform(0.3, 0.8, N)
    dense[SIGNAL_DEPTH:] += 0.15
    sparse = rng.uniform(2.0, 20.0, N)
    sparse[SIGNAL_DEPTH:] += 10.0
    coverage = rng.uniform(0.0, 0.5, N)
    coverage[SIGNAL_DEPTH:] += 0.5
    perm = rng.permutation(N)  # arrival order is not the ranking
    return HitScores(
        dense=dense[perm],
        sparse=sparse[perm],
        fused=fused[perm],
        rerank=rng.uniform(-8, 8, N)[perm] if rerank else None,
        doc_ids=[f"d{i % 5}" for i in perm],
        term_coverage=coverage[perm],
    )


def _head(hits: HitScores, by: np.ndarray) -> HitScores:
    keep = np.sort(np.argsort(-by, kind="stable")[:SIGNAL_DEPTH])
    return HitScores(
        dense=hits.dense[keep],  # type: ignore[index]
        sparse=hits.sparse[keep],  # type: ignore[index]
        fused=hits.fused[keep],  # type: ignore[index]
        rerank=None if hits.rerank is None else hits.rerank[keep],
        doc_ids=[hits.doc_ids[i] for i in keep],  # type: ignore[index]
        term_coverage=hits.term_coverage[keep],  # type: ignore[index]
    )


@pytest.mark.parametrize("rerank", [False, True])
def test_a_long_hit_list_has_its_first_hits_signals(rerank: bool) -> None:
    config = ConfidenceConfig()
    for seed in range(5):
        hits = _long_list(seed, rerank=rerank)
        order = hits.rerank if rerank else hits.fused
        assert order is not None
        long = compute_signal_matrix(HitBatch.from_hits([hits]), config)[0]
        head = compute_signal_matrix(HitBatch.from_hits([_head(hits, order)]), config)[0]
        n_hits = SIGNAL_INDEX["n_hits"]
        assert long[n_hits] == N
        assert head[n_hits] == SIGNAL_DEPTH
        np.testing.assert_array_equal(np.delete(long, n_hits), np.delete(head, n_hits))


def test_more_hits_do_not_lift_the_calibrated_confidence() -> None:
    """Without the depth, the hits past it (agreeing more, covering better) lifted
    agreement, consensus and term coverage, so the confidence."""
    engine = ConfidenceEngine(ConfidenceConfig(scorer="calibrated"))
    hits = _long_list(3)
    assert hits.fused is not None
    head = _head(hits, hits.fused)
    assert engine.assess(hits).confidence == engine.assess(head).confidence
    long_signals = engine.assess(hits).signals
    assert long_signals.n_hits == N
    assert long_signals.term_coverage == pytest.approx(float(np.max(head.term_coverage)))  # type: ignore[arg-type]
    assert long_signals.term_coverage < float(np.max(hits.term_coverage))  # type: ignore[arg-type]


def test_a_batch_of_short_lists_is_left_as_it_is() -> None:
    batch = HitBatch.from_hits([_head(_long_list(0), _long_list(0).fused)])  # type: ignore[arg-type]
    assert batch.head(SIGNAL_DEPTH) is batch


def test_padding_and_short_rows_survive_the_cut() -> None:
    """In a padded batch, a row shorter than the depth keeps all its hits, and a
    longer one its first SIGNAL_DEPTH, real hits first."""
    short = HitScores(dense=[0.9, 0.2], sparse=[3.0, 9.0], fused=[0.02, 0.03])
    long = _long_list(1)
    cut = HitBatch.from_hits([short, long]).head(SIGNAL_DEPTH)
    assert cut.width == SIGNAL_DEPTH
    assert cut.lengths.tolist() == [2, SIGNAL_DEPTH]
    assert cut.dense is not None
    assert cut.fused is not None
    assert cut.dense[0, :2].tolist() == [0.9, 0.2]
    assert long.fused is not None
    assert sorted(cut.fused[1].tolist()) == sorted(np.sort(long.fused)[-SIGNAL_DEPTH:].tolist())
