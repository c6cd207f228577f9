"""The answer threshold re-certified at another share of near misses (ADR 021).

Near misses (on-topic questions whose hits lack the answer) score between
answerable and out-of-scope questions. A bar certified on a sample with few of
them lets them through where traffic holds many; the table certified at their
share holds the risk, the share is estimated from confidences alone, and the
bar only ever rises.
"""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt
import pytest

from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.artifact import ConformalSpec
from ragsift.confidence.conformal import _group_index, risk_upper_bounds
from ragsift.confidence.mix import (
    DEAD_BAND,
    HISTOGRAM_BINS,
    MixReading,
    MixTable,
    _histogram,
    fit_mix_table,
)
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.near_miss import (
    _CANDIDATES,
    MIN_NEAR_MISSES,
    NEAR_MISS_LOWER_DROP,
    YOUNG_WEIGHT,
    NearMissReading,
    NearMissTable,
    estimate_near_miss,
    fit_near_miss_table,
    near_miss_log_mixture,
    near_miss_threshold,
)
from ragsift.confidence.reweight import KindCounts
from ragsift.confidence.served import ServedBar, even_evidence, lowered_to, served_bar
from tests.factories import top_score_artifact

ALPHA = DELTA = 0.1
FloatArray = npt.NDArray[np.float64]


def _sample(
    rng: np.random.Generator, n: tuple[int, int, int], near: tuple[float, float] = (5.0, 3.0)
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """(answerable, near miss, out of scope) confidences: high, ``near``-shaped, low."""
    conf = np.concatenate(
        [rng.beta(8.0, 1.5, n[0]), rng.beta(*near, n[1]), rng.beta(1.2, 8.0, n[2])]
    )
    labels = np.concatenate([np.ones(n[0]), np.zeros(n[1] + n[2])])
    inside = np.concatenate([np.ones(n[0] + n[1], bool), np.zeros(n[2], bool)])
    return np.round(conf, 4), labels, inside


def _risk(conf: FloatArray, labels: FloatArray, threshold: float) -> float:
    answered = conf >= threshold
    return float(1.0 - labels[answered].mean()) if answered.any() else 0.0


def test_kinds_weighed_as_the_label_give_the_two_kind_bound() -> None:
    rng = np.random.default_rng(1)
    conf = rng.random(1_500)
    wrong = (rng.random(1_500) > conf).astype(np.int64)
    # Wrong answers split into two kinds of equal weight: ADR 013's bound exactly.
    kind = np.where(wrong == 0, 0, 1 + (rng.random(1_500) < 0.3)).astype(np.intp)
    for groups in (None, _group_index(rng.integers(0, 25, 1_500), conf.shape)):
        pair = risk_upper_bounds(conf, wrong, groups, DELTA, weights=(1.7, 0.6))
        kinds = KindCounts(conf, kind, (False, True, True), groups).bounds((0.6, 1.7, 1.7), DELTA)
        np.testing.assert_allclose(kinds[0], pair[0], atol=1e-12)
        np.testing.assert_array_equal(kinds[1], pair[1])


def test_the_table_rises_with_either_share_and_refuses_past_what_it_can_certify() -> None:
    conf, labels, inside = _sample(np.random.default_rng(2), (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    assert table is not None
    grid = np.asarray(table.thresholds)
    assert (np.diff(grid, axis=0) >= 0).all()
    assert (np.diff(grid, axis=1) >= 0).all()
    assert table.threshold_at(0.02, 0.6) < table.threshold_at(0.2, 0.6)
    assert table.threshold_at(0.99, 0.0) == 1.0  # past the tabulated shares: answer nothing
    assert table.near_miss_share == pytest.approx(120 / 2_520, abs=1e-4)
    assert (table.n_answerable, table.n_near_miss, table.n_out_of_scope) == (800, 120, 1_600)


def test_the_bar_at_a_traffic_s_near_miss_share_holds_the_risk_there() -> None:
    rng = np.random.default_rng(3)
    conf, labels, inside = _sample(rng, (800, 120, 1_600))
    groups = [f"a{i % 40}" for i in range(conf.size)]
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA, groups=groups)
    assert table is not None
    # Traffic a quarter near misses: the sample's own bar lets too many through.
    t_conf, t_labels, _ = _sample(rng, (2_000, 1_250, 1_750))
    own = table.threshold_at(table.near_miss_share, table.out_of_scope_share)
    at_traffic = table.threshold_at(0.25, 0.35)
    assert _risk(t_conf, t_labels, own) > ALPHA
    assert _risk(t_conf, t_labels, at_traffic) <= ALPHA


def test_too_few_near_misses_or_no_other_kind_make_no_table() -> None:
    conf, labels, inside = _sample(np.random.default_rng(4), (300, MIN_NEAR_MISSES - 1, 300))
    assert fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA) is None
    conf, labels, inside = _sample(np.random.default_rng(4), (300, 50, 0))
    assert fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA) is None


@pytest.mark.parametrize("near", [0.0, 0.1, 0.25])
def test_the_near_miss_share_is_estimated_from_confidences_alone(near: float) -> None:
    rng = np.random.default_rng(5)
    conf, labels, inside = _sample(rng, (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    assert table is not None
    n = 3_000
    counts = (round(n * (0.4 - near)), round(n * near), round(n * 0.6))
    traffic, _, _ = _sample(rng, counts)
    reading = estimate_near_miss(near_miss_log_mixture(table), _histogram(traffic))
    assert reading.share == pytest.approx(near, abs=0.04)
    assert reading.out_of_scope == pytest.approx(0.6, abs=0.06)
    assert reading.lower <= reading.share


def test_the_bar_moves_only_when_the_lower_bound_clears_the_samples_share() -> None:
    conf, labels, inside = _sample(np.random.default_rng(6), (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    assert table is not None
    edge = table.near_miss_share  # ADR 033: the bound (97.5%, ADR 036), no band over it
    assert near_miss_threshold(table, None) is None
    assert near_miss_threshold(table, NearMissReading(0.3, edge, 0.5)) is None
    moved = near_miss_threshold(table, NearMissReading(0.3, edge + 0.01, 0.5))
    assert moved == table.threshold_at(0.3, 0.5)


def test_a_young_reading_raises_the_bar_on_its_estimate() -> None:
    """ADR 037: under YOUNG_WEIGHT queries the bound is too wide to clear in time, so
    the estimate must exceed the sample's share; a settled reading needs its bound."""
    conf, labels, inside = _sample(np.random.default_rng(6), (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    assert table is not None
    edge = table.near_miss_share
    wide = NearMissReading(0.3, 0.0, 0.5, young=True)
    assert near_miss_threshold(table, wide) == table.threshold_at(0.3, 0.5)
    assert near_miss_threshold(table, NearMissReading(0.3, 0.0, 0.5)) is None
    assert near_miss_threshold(table, NearMissReading(edge, 0.0, 0.5, young=True)) is None


def test_a_reading_is_young_until_its_histogram_weighs_young_weight() -> None:
    table, mix = _tables(12)
    rng = np.random.default_rng(13)
    logmix = near_miss_log_mixture(table)
    traffic, _, _ = _sample(rng, (50, 50, 50))
    histogram = _histogram(traffic)
    assert histogram.sum() < YOUNG_WEIGHT
    assert estimate_near_miss(logmix, histogram).young
    assert not estimate_near_miss(logmix, histogram * 2).young
    monitor = MixMonitor()
    young = []
    for c in rng.permutation(np.concatenate([traffic, traffic])):
        reading = monitor.observe("t", "c", "v1", mix, float(c), table)
        if reading is not None:
            assert reading.near_miss is not None
            young.append(reading.near_miss.young)
    # Young from the first reading (30 queries) until the decayed weight reaches 200.
    assert young[0]
    assert not young[-1]
    assert young == sorted(young, reverse=True)


def test_a_stream_like_the_sample_rarely_reads_more_near_misses() -> None:
    """ADR 033, ADR 036: the lower bound is one-sided 97.5%, so a stream drawn like the
    sample clears the sample's share about one time in forty; at 95% it was one in
    twenty, and with readings refreshed as queries come, bars rose by chance."""
    rng = np.random.default_rng(11)
    conf, labels, inside = _sample(rng, (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    assert table is not None
    logmix = near_miss_log_mixture(table)
    cleared = at_95 = 0
    for _ in range(300):
        traffic, _, _ = _sample(rng, (160, 24, 320))
        histogram = _histogram(traffic)
        reading = estimate_near_miss(logmix, histogram)
        cleared += reading.lower > table.near_miss_share
        # The same reading at the old 95% drop, from the profile likelihood.
        loglik = logmix @ histogram
        plausible = _CANDIDATES[loglik >= loglik.max() - 2.7055 / 2, 1]
        at_95 += plausible.min() > table.near_miss_share
    assert pytest.approx(3.8415 / 2) == NEAR_MISS_LOWER_DROP
    assert cleared <= 6  # 2% of 300 (5 of them here; 9 at 95%, 2 at 99%)
    assert at_95 > cleared


def _tables(seed: int) -> tuple[NearMissTable, MixTable]:
    """Both tables of one sample (800 answerable, 120 near misses, 1,600 out of scope)."""
    conf, labels, inside = _sample(np.random.default_rng(seed), (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    mix = fit_mix_table(conf, labels, alpha=ALPHA, delta=DELTA)
    assert table is not None
    assert mix is not None
    return table, mix


def test_the_served_bar_rises_where_near_misses_show_and_only_auto_reads_them() -> None:
    table, mix = _tables(7)
    many = MixReading(0.6, 0.55, NearMissReading(0.3, 0.25, 0.5))
    none = MixReading(0.6, 0.55, NearMissReading(0.0, 0.0, 0.6))
    base = 0.5
    served = served_bar(base, mix, table, "auto", many)
    assert served.bar == max(base, table.threshold_at(0.3, 0.5)) > served.mixed == base
    assert served.reported_at is None  # the near-miss bar changes no prior
    assert served_bar(base, mix, table, "auto", none) == ServedBar(base, base)
    assert served_bar(base, mix, None, "auto", many) == ServedBar(base, base)
    assert served_bar(base, mix, table, "off", many) == ServedBar(base, base)
    declared = served_bar(base, mix, table, 0.5, many)
    assert declared == ServedBar(mix.threshold_at(0.5), mix.threshold_at(0.5), 0.5)


def test_the_served_bar_rises_on_the_share_read_over_the_cut() -> None:
    """ADR 045: the raise, and the share a raised scope is reported at, are the
    reading over the queries at 0.05 and over; the lowering still reads the whole."""
    table, mix = _tables(8)
    base, cal = mix.threshold_at(mix.unanswerable_share), mix.unanswerable_share
    quiet = NearMissReading(0.0, 0.0, 0.9)
    far = MixReading(0.95, 0.93, quiet, upper=0.97, above=(0.2, 0.1))
    assert served_bar(base, mix, table, "auto", far) == ServedBar(base, base)
    near = MixReading(0.95, 0.93, quiet, upper=0.97, above=(0.9, cal + DEAD_BAND + 0.01))
    raised = served_bar(base, mix, table, "auto", near)
    assert raised == ServedBar(mix.threshold_at(0.9), mix.threshold_at(0.9), 0.9)
    assert raised.bar > base


def test_the_served_bar_falls_only_where_the_traffic_is_clearly_more_answerable() -> None:
    table, mix = _tables(9)
    base, cal = 0.95, mix.unanswerable_share
    quiet = NearMissReading(table.near_miss_share, 0.0, 0.05)
    clear = MixReading(0.05, 0.03, quiet, upper=0.08)
    served = served_bar(base, mix, table, "auto", clear)
    # A certified bar stricter than the table's at the sample's share keeps its margin.
    drop = mix.threshold_at(cal) - mix.threshold_at(0.08)
    assert drop > 0
    assert base > mix.threshold_at(cal)
    even = even_evidence(mix)
    assert even == pytest.approx(1.0 - cal)
    assert served == ServedBar(max(base - drop, even), max(base - drop, even), 0.08)
    # One at or under it falls to the table's bar at the new share, and no further:
    # nor under the near-miss table's at the shares read (ADR 032), nor under even
    # evidence (ADR 046).
    floor = table.threshold_at(quiet.share, quiet.out_of_scope)
    assert floor > mix.threshold_at(0.08)  # it binds here
    for certified in (mix.threshold_at(cal), mix.threshold_at(cal) - 0.01, 0.9):
        lowered = served_bar(certified, mix, table, "auto", clear).bar
        want = max(min(certified, mix.threshold_at(0.08)), floor, even)
        assert lowered == pytest.approx(min(want, certified))
    assert lowered_to(mix, clear) == 0.08
    # The upper bound within the dead band of the sample's share: no evidence.
    edge = MixReading(0.05, 0.03, quiet, upper=cal - DEAD_BAND)
    assert served_bar(base, mix, table, "auto", edge) == ServedBar(base, base)
    # More near misses than the sample held pull the two-kind estimate down: the bar
    # never falls under the three-kind table's at the shares read (ADR 032).
    for near in (0.06, 0.1, 0.2, 0.3):
        loud = MixReading(0.05, 0.03, NearMissReading(near, 0.0, 0.05), upper=0.08)
        assert lowered_to(mix, loud) == 0.08
        floor = table.threshold_at(near, 0.05)
        got = served_bar(base, mix, table, "auto", loud)
        if floor >= base:
            assert got == ServedBar(base, base)
        else:
            bar = max(base - drop, floor, even)
            assert got == ServedBar(bar, bar, 0.08)
    assert table.threshold_at(0.3, 0.05) > base - drop  # the floor binds somewhere
    # No three-kind reading, no near-miss table, a declared share, or lowering off.
    assert lowered_to(mix, MixReading(0.05, 0.03, None, upper=0.08)) is None
    assert served_bar(base, mix, None, "auto", clear) == ServedBar(base, base)
    assert served_bar(base, mix, table, "auto", clear, lower=False) == ServedBar(base, base)
    assert served_bar(base, mix, table, 0.08, clear).reported_at == 0.08
    # Never above the certified bar, whatever the table says at that share.
    assert served_bar(0.05, mix, table, "auto", clear).bar <= 0.05


def test_a_lowered_bar_stops_at_even_evidence() -> None:
    """ADR 046: traffic read as almost all answerable has the table certify answering
    everything; the bar still keeps every query whose own evidence is against an answer
    (a likelihood ratio under 1: under the sample's answerable share, in its terms)."""
    table, mix = _tables(9)
    quiet = NearMissReading(0.0, 0.0, 0.0)
    almost_all = MixReading(0.0, 0.0, quiet, upper=0.01)
    even = even_evidence(mix)
    assert max(mix.threshold_at(0.01), table.threshold_at(0.0, 0.0)) < even  # both under it
    at_sample = mix.threshold_at(mix.unanswerable_share)
    for certified in (at_sample, at_sample - 0.01):
        assert certified > even
        lowered = max(mix.threshold_at(0.01), table.threshold_at(0.0, 0.0))
        lowered = max(lowered, certified - (at_sample - mix.threshold_at(0.01)))
        assert served_bar(certified, mix, table, "auto", almost_all) == ServedBar(
            even, even, 0.01, stopped_from=lowered
        )
    # A certified bar already under even evidence is not lowered at all.
    assert served_bar(even - 0.05, mix, table, "auto", almost_all) == ServedBar(
        even - 0.05, even - 0.05
    )


def test_the_monitor_reads_near_misses_when_the_calibration_has_a_table() -> None:
    table, mix = _tables(8)
    rng = np.random.default_rng(9)
    traffic, _, _ = _sample(rng, (300, 300, 400))
    monitor = MixMonitor()
    plain = MixMonitor()
    for c in rng.permutation(traffic):
        reading = monitor.observe("t", "c", "v1", mix, float(c), table)
        without = plain.observe("t", "c", "v1", mix, float(c))
    assert reading is not None
    assert reading.near_miss is not None
    assert reading.near_miss.share == pytest.approx(0.3, abs=0.08)
    assert reading.near_miss.lower > table.near_miss_share
    assert without is not None
    assert without.near_miss is None
    assert monitor.reading("t", "c", "v1") == reading


def _artifact(table: NearMissTable | None) -> CalibrationArtifact:
    return top_score_artifact(
        ConformalSpec(
            alpha=ALPHA,
            delta=DELTA,
            threshold=0.5,
            feasible=True,
            method="test",
            n_calibration=2_520,
            near_miss=table,
        )
    )


def test_the_table_is_part_of_the_artifact_and_its_version() -> None:
    conf, labels, inside = _sample(np.random.default_rng(9), (800, 120, 1_600))
    table = fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA)
    with_table, without = _artifact(table), _artifact(None)
    assert with_table.version != without.version
    assert '"near_miss"' not in without.to_json()  # older artifacts keep their version
    again = CalibrationArtifact.from_json(with_table.to_json())
    assert again.conformal.near_miss == table
    assert again.version == with_table.version


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("thresholds", "reverse_rows", "must not decrease"),
        ("thresholds", [[0.5] * 20] * 3, "one row per near-miss share"),
        ("near_miss", [1.0] * (HISTOGRAM_BINS - 1), f"{HISTOGRAM_BINS} bins"),
        ("answerable", [0.5] * HISTOGRAM_BINS, "sum 1"),
        ("out_of_scope", [float("nan")] * HISTOGRAM_BINS, "finite number"),
        ("near_miss_shares", [0.1, 0.1], "increasing"),
        ("n_near_miss", 0, "greater than 0"),
        ("n_out_of_scope", 10**400, "less than or equal to"),
        ("near_miss_share", 1.5, "less than 1"),
        ("out_of_scope_shares", [i / 2_000 for i in range(1_000)], "at most 100"),
    ],
)
def test_a_hostile_table_in_an_artifact_file_is_one_clear_error(
    field: str, value: object, says: str
) -> None:
    """An edited artifact file: refused on load, naming the field, whatever its version says."""
    conf, labels, inside = _sample(np.random.default_rng(10), (800, 120, 1_600))
    good = _artifact(fit_near_miss_table(conf, labels, inside, alpha=ALPHA, delta=DELTA))
    data = json.loads(good.to_json())
    table = data["conformal"]["near_miss"]
    table[field] = list(reversed(table["thresholds"])) if value == "reverse_rows" else value
    data["version"] = ""  # no hash to catch it: the table's own checks must
    with pytest.raises(ConfidenceError, match="invalid calibration artifact") as err:
        CalibrationArtifact.from_json(json.dumps(data))
    assert says in str(err.value)
    assert "conformal.near_miss" in str(err.value)  # where in the file
