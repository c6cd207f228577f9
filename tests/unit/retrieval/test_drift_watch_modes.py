"""The drift check reads top scores on one scale: a keyword-only result's top score is
BM25's (ADR 029), so it carries its scope's flag without being counted in the sketch;
otherwise a change in the share of keyword queries would read as drift."""

from __future__ import annotations

from ragsift.confidence.drift import DriftMonitor
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.drift_watch import watch_drift
from ragsift.schemas import RetrievalResult
from tests.unit.workers.test_calibration_worker import result

MIN_SAMPLES = 40


def _watch(monitor: DriftMonitor, results: list[RetrievalResult]) -> list[RetrievalResult]:
    metrics = Metrics()
    return [watch_drift(monitor, r, metrics, source="test")[0] for r in results]


def _traffic(n: int, top: float, mode: str, tag: str) -> list[RetrievalResult]:
    return [result(f"{tag}-{i}", top).model_copy(update={"mode": mode}) for i in range(n)]


def test_keyword_results_carry_the_flag_but_never_move_the_sketch() -> None:
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    settled = _watch(monitor, _traffic(3 * MIN_SAMPLES, 0.3, "hybrid", "in"))
    assert not any(r.calibration_shift for r in settled)
    # Users turn to keyword search: BM25's normalized top scores sit far higher.
    keyword = _watch(monitor, _traffic(4 * MIN_SAMPLES, 0.9, "keyword", "kw"))
    assert not any(r.calibration_shift for r in keyword)
    # The scope's own (cosine) scores then move: the alarm trips, and keyword
    # results of the shifted scope say so too.
    moved = _watch(monitor, _traffic(3 * MIN_SAMPLES, 0.9, "hybrid", "out"))
    assert moved[-1].calibration_shift
    (after,) = _watch(monitor, _traffic(1, 0.9, "keyword", "kw-after"))
    assert after.calibration_shift


def _reranked(n: int, top: float, tag: str) -> list[RetrievalResult]:
    """Results scored without the calibration (a reranked query's: version "none")."""
    out = []
    for r in _traffic(n, top, "hybrid", tag):
        breakdown = r.breakdown.model_copy(
            update={"scorer": "weighted", "calibration_version": None}
        )
        out.append(r.model_copy(update={"breakdown": breakdown}))
    return out


def test_reranked_results_beside_calibrated_ones_keep_both_sketches() -> None:
    """A reranker that fails now and then: most results unscored by the calibration, the
    failed ones scored by it. The calibrated sketch still trips when its scores move,
    and the gauge shows the scope's highest PSI."""
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    metrics = Metrics()

    def watch(results: list[RetrievalResult]) -> list[RetrievalResult]:
        return [watch_drift(monitor, r, metrics, source="test")[0] for r in results]

    for i in range(3 * MIN_SAMPLES):
        watch(_reranked(3, 0.8, f"rr-{i}") + _traffic(1, 0.3, "hybrid", f"in-{i}"))
    moved = []
    for i in range(3 * MIN_SAMPLES):
        moved += watch(_reranked(3, 0.8, f"rr2-{i}") + _traffic(1, 0.9, "hybrid", f"out-{i}"))
    calibrated = [r for r in moved if r.breakdown.calibration_version is not None]
    assert calibrated[-1].calibration_shift
    assert not moved[-2].calibration_shift  # the reranked scores did not move
    gauge = metrics.registry.get_sample_value(
        "ragsift_calibration_drift_psi", {"tenant": "acme", "collection": "docs"}
    )
    assert gauge is not None
    assert gauge > monitor.threshold
