"""The drift sketch: PSI of recent top-hit scores against the reference, trips reported once."""

from __future__ import annotations

import math
import random

import pytest

from ragsift.confidence.drift import MAX_VERSIONS, DriftMonitor, DriftReading, psi
from ragsift.confidence.errors import ConfidenceError


def feed(monitor: DriftMonitor, scores: list[float], version: str = "v1") -> list[DriftReading]:
    return [monitor.observe("acme", "docs", version, s) for s in scores]


def in_domain(n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [min(max(rng.gauss(0.7, 0.08), 0.0), 1.0) for _ in range(n)]


def out_of_domain(n: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [min(max(rng.gauss(0.25, 0.08), 0.0), 1.0) for _ in range(n)]


def test_psi_of_equal_histograms_is_zero_and_of_known_ones_matches_the_formula() -> None:
    assert psi([1, 2, 3], [2, 4, 6]) == pytest.approx(0.0)
    expected = (0.8 - 0.5) * math.log(0.8 / 0.5) + (0.2 - 0.5) * math.log(0.2 / 0.5)
    assert psi([5, 5], [8, 2]) == pytest.approx(expected)
    assert math.isfinite(psi([10, 0], [0, 10]))  # an empty bin is floored, not infinite


def test_psi_refuses_bad_histograms() -> None:
    bad = (([1, 2], [1, 2, 3]), ([0, 0], [1, 1]), ([-1, 2], [1, 1]), ([], []), ([1, 1], [3, -1]))
    for ref, cur in bad:
        with pytest.raises(ConfidenceError):
            psi(ref, cur)


def test_no_reading_before_reference_and_sketch_hold_min_samples() -> None:
    monitor = DriftMonitor(min_samples=50, half_life=100)
    readings = feed(monitor, in_domain(99))
    assert all(r.psi is None for r in readings)
    assert feed(monitor, in_domain(30, seed=2))[-1].psi is not None


def test_stable_traffic_stays_quiet() -> None:
    monitor = DriftMonitor(min_samples=100, half_life=200)
    readings = feed(monitor, in_domain(1_000))
    values = [r.psi for r in readings if r.psi is not None]
    assert values
    assert max(values) < monitor.threshold
    assert not any(r.shifted or r.tripped for r in readings)


def test_out_of_domain_traffic_trips_once_and_flags_every_later_query() -> None:
    monitor = DriftMonitor(min_samples=100, half_life=200)
    feed(monitor, in_domain(300))
    readings = feed(monitor, out_of_domain(400))
    assert sum(r.tripped for r in readings) == 1
    first = next(i for i, r in enumerate(readings) if r.tripped)
    assert all(r.shifted for r in readings[first:])
    assert readings[-1].psi is not None
    assert readings[-1].psi > 1.0


def test_the_alarm_re_arms_when_traffic_returns() -> None:
    monitor = DriftMonitor(min_samples=100, half_life=100)
    feed(monitor, in_domain(200))
    assert sum(r.tripped for r in feed(monitor, out_of_domain(300))) == 1
    back = feed(monitor, in_domain(600, seed=3))
    assert not back[-1].shifted
    assert sum(r.tripped for r in feed(monitor, out_of_domain(300, seed=4))) == 1


def test_a_new_calibration_version_starts_a_new_reference() -> None:
    monitor = DriftMonitor(min_samples=100, half_life=200)
    feed(monitor, in_domain(300))
    feed(monitor, out_of_domain(300))
    after = feed(monitor, out_of_domain(400, seed=5), version="v2")
    assert not any(r.shifted for r in after)  # v2's reference is today's traffic


def test_a_second_version_in_the_same_scope_does_not_restart_the_first() -> None:
    """Reranked results carry no calibration ("none") and, when the reranker fails, the
    scope's next result carries its calibration: each version keeps its own sketch,
    where one sketch restarted at every switch never held a reference."""
    monitor = DriftMonitor(min_samples=100, half_life=200)
    reranked = in_domain(1_000, seed=6)

    def interleaved(scores: list[float]) -> list[DriftReading]:
        out = []
        for i, s in enumerate(scores):
            out.append(monitor.observe("acme", "docs", "v1", s))
            for r in reranked[2 * i : 2 * i + 2]:
                assert not monitor.observe("acme", "docs", "none", r).shifted
        return out

    interleaved(in_domain(200))
    readings = interleaved(out_of_domain(300))
    assert sum(r.tripped for r in readings) == 1
    assert readings[-1].shifted
    assert monitor.state("acme", "docs", "v1").shifted
    assert not monitor.state("acme", "docs", "none").shifted
    # The scope's PSI (the gauge) is the higher of the two versions'.
    assert readings[-1].scope_psi == readings[-1].psi


def test_a_replaced_version_leaves_the_scope_and_its_psi_with_it() -> None:
    monitor = DriftMonitor(min_samples=100, half_life=200)
    feed(monitor, in_domain(300))
    shifted = feed(monitor, out_of_domain(300))[-1]
    assert shifted.shifted
    assert shifted.psi is not None
    assert shifted.scope_psi == shifted.psi
    # A re-fit: v2 from now on. Until v1 is dropped the scope's PSI is v1's...
    after = feed(monitor, out_of_domain(400, seed=5), version="v2")
    assert after[0].scope_psi == shifted.psi
    # ... and once v1 was not seen in 2 x min_samples queries, v2's alone.
    assert after[-1].psi is not None
    assert after[-1].scope_psi == after[-1].psi < monitor.threshold
    assert not monitor.state("acme", "docs", "v1").shifted


def test_a_scope_keeps_a_bounded_number_of_versions() -> None:
    monitor = DriftMonitor(min_samples=5, half_life=20)
    for n in range(3 * MAX_VERSIONS):
        feed(monitor, in_domain(12, seed=n), version=f"v{n}")
    scope = monitor._scopes[("acme", "docs")]
    assert len(scope.versions) <= MAX_VERSIONS


def test_scopes_are_independent() -> None:
    monitor = DriftMonitor(min_samples=50, half_life=100)
    for s in in_domain(200):
        monitor.observe("acme", "docs", "v1", s)
        monitor.observe("beta", "docs", "v1", s)
    for s in out_of_domain(200):
        acme = monitor.observe("acme", "docs", "v1", s)
    beta = monitor.observe("beta", "docs", "v1", 0.7)
    assert acme.shifted
    assert not beta.shifted


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf, -5.0, 1e308])
def test_hostile_scores_land_in_an_edge_bin(score: float) -> None:
    monitor = DriftMonitor(min_samples=1, half_life=10)
    assert monitor.observe("acme", "docs", "v1", score).psi is None
    reading = monitor.observe("acme", "docs", "v1", score)
    assert reading.psi is not None
    assert math.isfinite(reading.psi)


def test_bad_settings_are_refused_with_the_value() -> None:
    with pytest.raises(ConfidenceError, match="threshold must be > 0, got 0"):
        DriftMonitor(threshold=0)
    with pytest.raises(ConfidenceError, match="min_samples must be >= 1"):
        DriftMonitor(min_samples=0)
    with pytest.raises(ConfidenceError, match="half_life"):
        DriftMonitor(min_samples=1_000, half_life=100)
