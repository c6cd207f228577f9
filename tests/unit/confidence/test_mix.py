"""The answer threshold re-certified at another mix of answerable and unanswerable queries.

A threshold certified on a 2 : 1 sample lets far more than alpha through when
unanswerable queries outnumber answerable ones twenty to one; the table
certified at that mix holds it, and the mix is estimated from confidences alone.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import numpy.typing as npt
import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.artifact import ConformalSpec
from ragsift.confidence.conformal import conformal_threshold
from ragsift.confidence.mix import (
    DEAD_BAND,
    HISTOGRAM_BINS,
    MIX_SHARES,
    MixReading,
    MixTable,
    at_share,
    fit_mix_table,
    mix_threshold,
    reported_share,
)
from ragsift.confidence.mix_estimate import estimate_unanswerable_share
from ragsift.confidence.mix_monitor import MixMonitor
from tests.factories import top_score_artifact

ALPHA = DELTA = 0.1
DRAWS = 40

FloatArray = npt.NDArray[np.float64]


def _draw(
    rng: np.random.Generator, n_answerable: int, n_unanswerable: int
) -> tuple[FloatArray, FloatArray]:
    """Confidences of answerable (high) and unanswerable (low) queries, with overlap."""
    conf = np.concatenate([rng.beta(6.0, 1.5, n_answerable), rng.beta(1.2, 6.0, n_unanswerable)])
    labels = np.concatenate([np.ones(n_answerable), np.zeros(n_unanswerable)])
    return np.round(conf, 4), labels


def _risk(conf: FloatArray, labels: FloatArray, threshold: float) -> float:
    answered = conf >= threshold
    return float(1.0 - labels[answered].mean()) if answered.any() else 0.0


def test_at_the_calibration_mix_the_table_is_the_conformal_threshold() -> None:
    rng = np.random.default_rng(3)
    conf, labels = _draw(rng, 1_000, 1_000)  # share 0.50: a tabulated one
    groups = [f"a{i % 40}" for i in range(conf.size)]
    for g in (None, groups):
        table = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA, groups=g)
        assert table is not None
        certified = conformal_threshold(conf, labels, alpha=ALPHA, delta=DELTA, groups=g)
        assert table.unanswerable_share == 0.5
        assert table.threshold_at(0.5) == certified.threshold


def test_the_table_rises_with_the_share_and_refuses_past_what_the_sample_can_certify() -> None:
    rng = np.random.default_rng(4)
    conf, labels = _draw(rng, 1_000, 2_000)
    table = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA)
    assert table is not None
    assert table.shares == MIX_SHARES
    assert list(table.thresholds) == sorted(table.thresholds)
    assert table.threshold_at(0.1) < table.threshold_at(0.67) < table.threshold_at(0.95)
    assert table.threshold_at(0.99) == 1.0  # 1 answerable in 100: nothing certifiable here
    assert table.threshold_at(0.995) == 1.0  # past the last tabulated share
    assert table.threshold_at(0.105) == table.threshold_at(0.11)  # the next share up
    assert sum(table.answerable) == pytest.approx(1.0, abs=1e-3)
    assert (table.n_answerable, table.n_unanswerable) == (1_000, 2_000)


def test_one_kind_of_query_has_no_mix_to_reweight() -> None:
    conf = np.linspace(0.0, 1.0, 300)
    assert fit_mix_table(conf, np.ones(300), alpha=ALPHA, delta=DELTA) is None
    assert fit_mix_table(conf, np.zeros(300), alpha=ALPHA, delta=DELTA) is None


def test_the_table_holds_the_risk_at_a_twenty_to_one_mix_where_the_certified_one_does_not() -> None:
    """Calibrated on 1 : 2, served 1 : 20. 40 seeded draws; fresh 1 : 20 traffic as truth."""
    certified_wrong = table_wrong = 0
    answered = []
    share = 0.95  # 1 : 19
    for seed in range(DRAWS):
        rng = np.random.default_rng(5_000 + seed)
        conf, labels = _draw(rng, 1_000, 2_000)
        certified = conformal_threshold(conf, labels, alpha=ALPHA, delta=DELTA)
        table = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA)
        assert table is not None
        test_conf, test_labels = _draw(rng, 2_000, 38_000)
        certified_wrong += _risk(test_conf, test_labels, certified.threshold) > ALPHA
        at_mix = table.threshold_at(share)
        table_wrong += _risk(test_conf, test_labels, at_mix) > ALPHA
        answered.append(float((test_conf >= at_mix).mean()))
    assert certified_wrong == DRAWS  # every draw: a 2 : 1 certificate does not hold at 1 : 19
    assert table_wrong <= 2 * DELTA * DRAWS
    assert float(np.mean(answered)) > 0.01  # it still answers (measured ~0.03)


def _table(rng: np.random.Generator) -> MixTable:
    conf, labels = _draw(rng, 2_000, 2_000)
    table = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA)
    assert table is not None
    return table


@pytest.mark.parametrize("share", [0.2, 0.5, 0.8, 0.97])
def test_the_share_is_estimated_from_confidences_alone(share: float) -> None:
    rng = np.random.default_rng(6)
    table = _table(rng)
    n_unanswerable = round(3_000 * share)
    conf, _ = _draw(rng, 3_000 - n_unanswerable, n_unanswerable)
    counts = np.bincount(
        np.minimum((conf * HISTOGRAM_BINS).astype(int), HISTOGRAM_BINS - 1),
        minlength=HISTOGRAM_BINS,
    )
    reading = estimate_unanswerable_share(counts, table)
    assert reading.share == pytest.approx(share, abs=0.04)
    assert share - 0.06 < reading.lower < reading.share  # a 95% bound on 3,000 queries
    assert reading.share < reading.upper < share + 0.06  # and from above (ADR 030)


def test_a_few_queries_give_a_wide_bound_many_a_narrow_one() -> None:
    table = _table(np.random.default_rng(13))
    few = np.zeros(HISTOGRAM_BINS)
    few[[2, 3, 18]] = (10, 10, 10)  # 30 queries, a third answerable-looking
    many = few * 30
    wide, narrow = (estimate_unanswerable_share(h, table) for h in (few, many))
    assert wide.share == pytest.approx(narrow.share, abs=0.01)
    assert wide.share - wide.lower > 3 * (narrow.share - narrow.lower)
    assert wide.upper - wide.share > 3 * (narrow.upper - narrow.share)


def test_a_bad_histogram_is_refused() -> None:
    table = _table(np.random.default_rng(7))
    for bad in (np.zeros(HISTOGRAM_BINS), np.ones(3), -np.ones(HISTOGRAM_BINS)):
        with pytest.raises(ConfidenceError):
            estimate_unanswerable_share(bad, table)


def test_auto_only_raises_the_bar_and_only_when_the_lower_bound_shows_a_shift() -> None:
    table = _table(np.random.default_rng(8))
    base = table.threshold_at(table.unanswerable_share)
    cal = table.unanswerable_share
    assert mix_threshold(base, table, "auto", None) == base  # too few queries yet
    # A high estimate whose bound is within the dead band: not evidence enough.
    assert mix_threshold(base, table, "auto", MixReading(0.95, cal + DEAD_BAND)) == base
    assert mix_threshold(base, table, "auto", MixReading(0.05, 0.02)) == base  # never lowered
    raised = mix_threshold(base, table, "auto", MixReading(0.9, cal + DEAD_BAND + 0.01))
    assert raised == table.threshold_at(0.9) > base  # the estimate's bar
    assert mix_threshold(base, table, "off", MixReading(0.95, 0.95)) == base
    assert mix_threshold(base, None, "auto", MixReading(0.95, 0.95)) == base


def _counts(conf: FloatArray) -> npt.NDArray[np.int64]:
    return np.bincount(
        np.minimum((conf * HISTOGRAM_BINS).astype(int), HISTOGRAM_BINS - 1),
        minlength=HISTOGRAM_BINS,
    )


@pytest.mark.parametrize("share", [0.3, 0.75, 0.95])
def test_read_above_the_cut_traffic_like_the_sample_is_worth_the_same_share(share: float) -> None:
    """ADR 045: the raise's reading, over the queries at 0.05 and over, means the same
    share as the whole histogram's where the traffic is drawn like the sample."""
    rng = np.random.default_rng(21)
    table = _table(rng)
    n_unanswerable = round(6_000 * share)
    conf, _ = _draw(rng, 6_000 - n_unanswerable, n_unanswerable)
    reading = estimate_unanswerable_share(_counts(conf), table)
    assert reading.above is not None
    above_share, above_lower = reading.above
    assert above_share == pytest.approx(share, abs=0.05)
    assert above_lower <= above_share
    assert reading.raising() == reading.above


def test_questions_far_off_the_subjects_do_not_raise_the_bar() -> None:
    """Answerable traffic plus five times as many queries that score under 0.05: the
    whole histogram reads them as unanswerable and its raise would refuse nearly
    everything; no bar the raise sets would answer them, so it keeps the bar."""
    rng = np.random.default_rng(22)
    table = _table(rng)
    base = table.threshold_at(table.unanswerable_share)
    answerable, _ = _draw(rng, 300, 0)
    far = rng.uniform(0.0, 0.049, 1_500)
    reading = estimate_unanswerable_share(_counts(np.concatenate([answerable, far])), table)
    assert reading.lower > table.unanswerable_share + DEAD_BAND  # the whole reading would raise
    assert table.threshold_at(reading.share) > base
    assert reading.above is not None
    assert reading.above[1] <= table.unanswerable_share + DEAD_BAND
    assert mix_threshold(base, table, "auto", reading) == base
    # the same queries spread as the sample's unanswerable ones: over the cut, they raise it
    near, _ = _draw(rng, 0, 1_500)
    spread = estimate_unanswerable_share(_counts(np.concatenate([answerable, near])), table)
    assert mix_threshold(base, table, "auto", spread) == table.threshold_at(spread.raising()[0])
    assert mix_threshold(base, table, "auto", spread) > base
    # nothing over the cut at all: nothing the bar could answer, nothing to raise it for
    nothing = estimate_unanswerable_share(_counts(far), table)
    assert nothing.above == (0.0, 0.0)
    assert mix_threshold(base, table, "auto", nothing) == base


def test_a_declared_share_moves_the_bar_either_way() -> None:
    table = _table(np.random.default_rng(9))
    base = table.threshold_at(table.unanswerable_share)
    assert mix_threshold(base, table, 0.1, None) == table.threshold_at(0.1) < base
    assert mix_threshold(base, table, 0.95, MixReading(0.2, 0.1)) == table.threshold_at(0.95)


def test_the_monitor_estimates_each_scope_after_enough_queries() -> None:
    rng = np.random.default_rng(10)
    table = _table(rng)
    monitor = MixMonitor(min_samples=30, half_life=500)
    unanswerable, _ = _draw(rng, 0, 400)
    answerable, _ = _draw(rng, 400, 0)
    readings = [monitor.observe("t1", "c", "v1", table, c) for c in unanswerable]
    first = next(i for i, r in enumerate(readings) if r is not None)
    assert 29 <= first <= 31  # 30 queries' (decayed) weight
    young, old = readings[first], readings[-1]
    assert young is not None
    assert old is not None
    assert old.share > 0.9
    assert young.share - young.lower > old.share - old.lower  # evidence narrows the bound
    # Another scope is its own; a new calibration version starts the scope afresh.
    assert monitor.observe("t2", "c", "v1", table, 0.99) is None
    assert monitor.observe("t1", "c", "v2", table, 0.99) is None
    last = None
    for c in answerable:
        last = monitor.observe("t1", "c", "v2", table, c)
    assert last is not None
    assert last.share < 0.1


def test_a_reading_counts_no_query() -> None:
    """``reading`` (a retry's bar, a cache key) is the scope's latest estimate, and
    reading it any number of times leaves the scope as it was."""
    rng = np.random.default_rng(11)
    table = _table(rng)
    monitor = MixMonitor(min_samples=30, half_life=500)
    unanswerable, _ = _draw(rng, 0, 40)
    assert monitor.reading("t1", "c", "v1") is None  # nothing seen
    for c in unanswerable[:28]:
        monitor.observe("t1", "c", "v1", table, c)
    for _ in range(100):
        assert monitor.reading("t1", "c", "v1") is None  # 28 queries, not 128
    readings = [monitor.observe("t1", "c", "v1", table, c) for c in unanswerable[28:]]
    assert readings[0] is None  # the 29th query's weight is still under 30
    latest = readings[-1]
    assert latest is not None
    assert monitor.reading("t1", "c", "v1") == latest
    assert monitor.reading("t1", "c", "v2") is None  # another calibration's scope
    assert monitor.reading("t2", "c", "v1") is None


def test_the_monitor_refuses_settings_it_could_never_reach() -> None:
    with pytest.raises(ConfidenceError):
        MixMonitor(min_samples=1_000, half_life=500)
    with pytest.raises(ConfidenceError):
        MixMonitor(min_samples=0)


def _artifact(mix: MixTable | None) -> CalibrationArtifact:
    return top_score_artifact(
        ConformalSpec(
            alpha=0.1, delta=0.1, threshold=0.5, feasible=True, method="m", n_calibration=9, mix=mix
        )
    )


def test_the_table_is_part_of_the_artifact_and_its_version() -> None:
    table = _table(np.random.default_rng(11))
    with_mix, without = _artifact(table), _artifact(None)
    assert with_mix.version != without.version
    assert '"mix"' not in without.to_json()  # artifacts written before it keep their version
    again = CalibrationArtifact.from_json(with_mix.to_json())
    assert again.conformal.mix == table
    assert again.version == with_mix.version


def test_a_table_that_falls_with_the_share_is_invalid() -> None:
    table = _table(np.random.default_rng(12))
    data = table.model_dump()
    data["thresholds"] = tuple(reversed(table.thresholds))
    with pytest.raises(ValueError, match="must not decrease"):
        MixTable.model_validate(data)


def test_a_scope_decays_its_histogram_lazily_and_exactly() -> None:
    """Weights grow instead of every bin shrinking per query; across a rescale too."""
    from ragsift.confidence.mix_monitor import _MixScope

    decay = 0.5 ** (1 / 500)
    scope = _MixScope("v", np.zeros((1, HISTOGRAM_BINS)))
    eager = np.zeros(HISTOGRAM_BINS)
    rng = np.random.default_rng(14)
    rescaled = False
    for _ in range(200_000):  # ~1e174 of growth: rescaled at least once
        b = int(rng.integers(0, HISTOGRAM_BINS))
        before = scope.increment
        weight = scope.add(b, decay)
        rescaled |= scope.increment < before
        eager *= decay
        eager[b] += 1.0
    assert rescaled
    assert weight == pytest.approx(eager.sum(), rel=1e-9)
    assert scope.decayed(decay) == pytest.approx(eager, rel=1e-9)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("thresholds", [float("nan")] * 99, "finite"),
        ("thresholds", [1e308] * 99, "less than or equal to 1"),
        ("shares", [*MIX_SHARES[:-1], 7.0], "less than 1"),
        ("answerable", [-1.0] + [0.0] * 19, "greater than or equal to 0"),
        ("answerable", [0.5] * 20, "sum 1"),
        ("unanswerable", [1.0] * 3, f"{HISTOGRAM_BINS} bins"),
        ("n_answerable", 10**400, "less than or equal to"),
    ],
)
def test_a_hostile_mix_table_in_an_artifact_file_is_one_clear_error(
    field: str, value: object, says: str
) -> None:
    """An edited artifact file: refused on load, naming the field, whatever its version says."""
    good = _artifact(_table(np.random.default_rng(15)))
    data = json.loads(good.to_json())
    data["conformal"]["mix"][field] = value
    data["version"] = ""  # no hash to catch it: the table's own checks must
    with pytest.raises(ConfidenceError, match="invalid calibration artifact") as err:
        CalibrationArtifact.from_json(json.dumps(data))
    assert says in str(err.value)
    assert "conformal.mix" in str(err.value)  # where in the file


def test_a_scope_past_the_bound_takes_the_place_of_the_least_recently_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many tenants (non-Latin, control characters, huge ids): bounded memory, no
    cross-talk, and a scope past the bound is tracked in place of the one seen least
    recently (a cap that refused it kept the first scopes seen, hostile ones too)."""
    import ragsift.confidence.mix_monitor as mix

    monkeypatch.setattr(mix, "MAX_SCOPES", 3)
    table = _table(np.random.default_rng(16))
    monitor = MixMonitor(min_samples=5, half_life=50)
    evicted: list[None] = []
    monitor.on_evict = lambda: evicted.append(None)
    tenants = ["テナント", "t\x00\x1f", "x" * 100_000]
    for tenant in tenants:
        for _ in range(5):
            monitor.observe(tenant, "c", "v", table, 0.01)
    monitor.observe(tenants[0], "c", "v", table, 0.01)  # now the most recently seen
    for _ in range(5):
        assert monitor.observe("one-too-many", "c", "v", table, 0.01) is None  # young
    assert len(evicted) == 1
    reading = monitor.observe("one-too-many", "c", "v", table, 0.01)
    assert reading is not None
    assert reading.share > 0.5
    assert monitor.reading("t\x00\x1f", "c", "v") is None  # the least recently seen: gone
    for tenant in (tenants[0], tenants[2]):
        reading = monitor.observe(tenant, "c", "v", table, 0.01)
        assert reading is not None
        assert reading.share > 0.5
    assert len(monitor._scopes) == 3
    assert monitor.observe("t\x00\x1f", "other", "v", table, 0.01) is None  # not another's
    assert len(monitor._scopes) == 3


def _ece(conf: FloatArray, labels: FloatArray, bins: int = 10) -> float:
    which = np.minimum((conf * bins).astype(int), bins - 1)
    return float(
        sum(
            abs(conf[which == b].mean() - labels[which == b].mean()) * (which == b).sum()
            for b in range(bins)
            if (which == b).any()
        )
        / conf.size
    )


@pytest.mark.parametrize("share", [0.9, 0.97, 0.3])
def test_a_confidence_reported_at_the_traffic_mix_is_calibrated_there(share: float) -> None:
    # Calibrated by construction at its own mix: each query is answerable with
    # probability equal to its confidence (a third of them are).
    rng = np.random.default_rng(7)
    conf = rng.beta(0.6, 1.2, 200_000)
    labels = (rng.random(conf.size) < conf).astype(np.float64)
    calibration_share = 1.0 - float(labels.mean())
    # The same queries in another mix: every unanswerable one, and answerable ones
    # sampled to reach `share` (or the other way round below the calibration's).
    answerable, unanswerable = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    if share > calibration_share:
        keep = round(unanswerable.size * (1 - share) / share)
        rows = np.concatenate([unanswerable, rng.choice(answerable, keep, replace=False)])
    else:
        keep = round(answerable.size * share / (1 - share))
        rows = np.concatenate([answerable, rng.choice(unanswerable, keep, replace=False)])
    served = np.array([at_share(float(p), calibration_share, share) for p in conf[rows]])
    assert _ece(conf[: rows.size], labels[: rows.size]) < 0.01  # the sample's own mix
    assert _ece(conf[rows], labels[rows]) > 0.1  # the calibration's confidence at this mix
    assert _ece(served, labels[rows]) < 0.01


def test_at_share_is_monotone_keeps_the_ends_and_the_calibration_mix() -> None:
    grid = np.linspace(0.0, 1.0, 101)
    moved = [at_share(float(p), 0.67, 0.95) for p in grid]
    assert moved[0] == 0.0
    assert moved[-1] == 1.0
    assert all(a < b for a, b in itertools.pairwise(moved))
    assert all(m <= p for m, p in zip(moved, grid, strict=True))  # more unanswerable: lower
    assert at_share(0.42, 0.67, 0.67) == pytest.approx(0.42)
    there = at_share(0.8, 0.67, 0.3)
    assert there > 0.8
    assert at_share(there, 0.3, 0.67) == pytest.approx(0.8)  # and back


@pytest.mark.parametrize(
    ("confidence", "calibration_share", "share"),
    [(0.5, 0.0, 0.5), (0.5, 0.5, 1.0), (0.5, 0.5, float("nan")), (1.5, 0.5, 0.6), (-0.1, 0.5, 0.6)],
)
def test_at_share_refuses_what_bayes_rule_cannot_map(
    confidence: float, calibration_share: float, share: float
) -> None:
    with pytest.raises(ConfidenceError):
        at_share(confidence, calibration_share, share)


def test_the_reported_share_stays_within_the_table() -> None:
    assert reported_share(0.67, 1.0) == MIX_SHARES[-1]
    assert reported_share(0.67, 0.0) == MIX_SHARES[0]
    assert reported_share(0.67, 0.67) is None
    assert reported_share(0.67, 0.9) == 0.9
