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
