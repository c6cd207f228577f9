"""The base's near-miss table carried onto a feedback re-map's scale (ADR 039)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsift.confidence.artifact import load_calibration
from ragsift.confidence.mix import HISTOGRAM_BINS, MixReading
from ragsift.confidence.mix_monitor import MixMonitor
from ragsift.confidence.mix_state import ScopeState, decode_states, encode_states
from ragsift.confidence.near_miss import NearMissReading, NearMissTable, near_miss_threshold
from ragsift.confidence.probes import ProbeRemap
from ragsift.confidence.refit_near_miss import carried_near_miss
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.mix_watch import _export


@pytest.fixture(scope="module")
def table() -> NearMissTable:
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    near = load_calibration(path).conformal.near_miss
    assert near is not None
    return near


def drawn(shares: tuple[float, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` confidences from a histogram: a bin by its share, then evenly within it."""
    bins = rng.choice(HISTOGRAM_BINS, size=n, p=np.asarray(shares) / sum(shares))
    return (bins + rng.random(n)) / HISTOGRAM_BINS


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def test_the_identity_map_carries_the_table_unchanged(table: NearMissTable) -> None:
    answers = drawn(table.answerable, 500, np.random.default_rng(0))
    same = carried_near_miss(table, None, 1.0, 0.0, 0.0, answers)
    assert same is not None
    assert same.thresholds == table.thresholds
    for kind in ("answerable", "near_miss", "out_of_scope"):
        assert getattr(same, kind) == getattr(table, kind)  # the base's, as they were
    assert same.edges is not None
    assert np.allclose(same.edges, np.linspace(0, 1, HISTOGRAM_BINS + 1), atol=1e-9)
    # Labels on answerable traffic held few near misses: the bar rises past a few.
    assert 0.01 <= same.near_miss_share <= 0.05


@pytest.mark.parametrize(("t", "a"), [(0.5, -1.0), (1.7, 0.8), (3.0, -2.5)])
@pytest.mark.parametrize("remapped", [False, True])
def test_each_bar_answers_the_queries_the_base_bar_answered(
    table: NearMissTable, t: float, a: float, remapped: bool
) -> None:
    # A probe re-map with a flat stretch (0.6 ... 0.8 all serve 0.55).
    remap = ProbeRemap(x=(0.0, 0.6, 0.8, 1.0), y=(0.0, 0.55, 0.55, 1.0)) if remapped else None
    carried = carried_near_miss(table, remap, t, a, 0.4, np.full(100, 0.9))
    assert carried is not None
    logits = np.linspace(-30, 30, 600_001)
    base = 1 / (1 + np.exp(-logits))
    if remap is not None:
        base = remap.apply(base)
    refit = 1 / (1 + np.exp(-(a + t * logits)))
    grid = np.asarray(carried.thresholds)
    assert (np.diff(grid, axis=0) >= 0).all()
    assert (np.diff(grid, axis=1) >= 0).all()
    for was, now in zip(np.ravel(table.thresholds), np.ravel(carried.thresholds), strict=True):
        assert now >= 0.4  # never under the re-fit's own bar
        answered = base >= was
        if was >= 1.0 or not answered.any():
            assert now == 1.0  # none certified there (or none reachable): still none
            continue
        # The least re-fit confidence among the queries the base bar answered, rounded
        # up to the grid (within the logits' step), or the re-fit's bar if higher.
        least = refit[answered].min()
        assert max(least - 0.0006, 0.4) <= now <= max(least + 0.01, 0.4) + 1e-9


def test_the_bins_move_with_the_map(table: NearMissTable) -> None:
    sharper = carried_near_miss(table, None, 2.0, 0.0, 0.0, np.full(50, 0.9))
    assert sharper is not None
    assert sharper.answerable == table.answerable  # the base's histograms ...
    assert sharper.edges is not None  # ... on the bins the re-map serves them at
    for k, edge in enumerate(sharper.edges[1:-1], start=1):
        # A base edge at p serves sigmoid(2 * logit(p)): the logit doubled.
        assert edge == pytest.approx(sigmoid(2 * logit(k / HISTOGRAM_BINS)), abs=1e-6)
    dumped = sharper.model_dump()
    assert "edges" in dumped
    assert "edges" not in table.model_dump()  # equal bins: written as before ADR 039
    assert NearMissTable.model_validate(dumped) == sharper


def test_the_bar_rises_past_the_near_misses_the_labelled_traffic_held(
    table: NearMissTable,
) -> None:
    rng = np.random.default_rng(1)
    # Labelled traffic with a quarter near misses, against the sample's 0.066.
    traffic = np.concatenate(
        [
            drawn(table.answerable, 150, rng),
            drawn(table.near_miss, 250, rng),
            drawn(table.out_of_scope, 600, rng),
        ]
    )
    carried = carried_near_miss(table, None, 1.0, 0.0, 0.3, traffic)
    assert carried is not None
    assert 0.25 <= carried.near_miss_share <= 0.35  # the labels' share, bounded above
    # The same share again raises nothing; a clearly larger one does.
    same = NearMissReading(carried.near_miss_share, carried.near_miss_share - 0.05, 0.6)
    assert near_miss_threshold(carried, same) is None
    more = NearMissReading(0.4, 0.36, 0.4)
    assert near_miss_threshold(carried, more) == carried.threshold_at(0.4, 0.4)


def test_nothing_is_carried_without_a_table_or_through_a_flat_map(
    table: NearMissTable,
) -> None:
    assert carried_near_miss(None, None, 1.0, 0.0, 0.5, np.full(10, 0.5)) is None
    assert carried_near_miss(table, None, 0.0, 0.3, 0.5, np.full(10, 0.5)) is None


def test_the_scope_reads_the_carried_table_on_its_bins(table: NearMissTable) -> None:
    """The monitor bins a scope's confidences at the carried table's edges, so it reads
    a near-miss-heavy stream served on the re-fit's scale as the base reads it on its
    own: the same shares, where equal bins on the re-fit's scale blur the top."""
    rng = np.random.default_rng(2)
    t, a = 1.2, 0.5
    carried = carried_near_miss(table, None, t, a, 0.3, np.full(100, 0.5))
    assert carried is not None
    base = np.concatenate(
        [
            drawn(table.answerable, 200, rng),
            drawn(table.near_miss, 150, rng),
            drawn(table.out_of_scope, 650, rng),
        ]
    ).clip(1e-6, 1 - 1e-6)
    served = 1 / (1 + np.exp(-(a + t * np.log(base / (1 - base)))))
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    mix = load_calibration(path).conformal.mix
    assert mix is not None
    on_base, on_refit = MixMonitor(), MixMonitor()
    order = rng.permutation(base.size)
    for i in order:
        was = on_base.observe("t", "c", "base", mix, float(base[i]), table)
        now = on_refit.observe("t", "c", "refit", mix, float(served[i]), carried)
    assert was is not None
    assert was.near_miss is not None
    assert now is not None
    assert now.near_miss is not None
    assert now.near_miss.share == pytest.approx(was.near_miss.share, abs=0.011)
    assert now.near_miss.lower == pytest.approx(was.near_miss.lower, abs=0.011)
    assert was.near_miss.share >= 0.1  # the stream's 15% near misses show


@pytest.mark.parametrize(
    "edges",
    [
        (0.0, 1.0),  # too few
        tuple(np.linspace(0, 1, HISTOGRAM_BINS + 1)[::-1]),  # falling
        (0.1, *np.linspace(0, 1, HISTOGRAM_BINS + 1)[1:]),  # not from 0
        (*np.linspace(0, 1, HISTOGRAM_BINS + 1)[:-1], 0.9),  # not to 1
    ],
)
def test_a_table_with_bad_edges_is_refused(table: NearMissTable, edges: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="edges must be 21 values rising from 0 to 1"):
        NearMissTable.model_validate({**table.model_dump(), "edges": edges})


def test_the_scopes_own_bins_outlive_a_restart(table: NearMissTable) -> None:
    """A re-fit scope's near-miss histogram is saved and restored with the other, so
    a restarted process reads what the last one had seen (ADR 039)."""
    rng = np.random.default_rng(3)
    carried = carried_near_miss(table, None, 1.2, 0.5, 0.3, np.full(100, 0.5))
    assert carried is not None
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    mix = load_calibration(path).conformal.mix
    assert mix is not None
    traffic = np.concatenate(
        [drawn(table.near_miss, 150, rng), drawn(table.out_of_scope, 250, rng)]
    )
    first = MixMonitor()
    for c in traffic:
        first.observe("t", "c", "refit", mix, float(c), carried)
    (state,) = first.export()
    assert state.near_counts is not None
    assert sum(state.near_counts) == pytest.approx(sum(state.counts))
    assert decode_states(encode_states([state]))[0] == [state]
    plain = first.export()[0].model_copy(update={"near_counts": None})
    assert "near_counts" not in encode_states([plain])  # written as before ADR 039
    restarted, cold = MixMonitor(), MixMonitor()
    restarted.restore([state])
    cold.restore([plain])
    after = restarted.observe("t", "c", "refit", mix, 0.5, carried)
    before_any = cold.observe("t", "c", "refit", mix, 0.5, carried)
    assert after is not None
    assert after.near_miss is not None  # read at once, from the saved histogram
    assert after.near_miss.share >= 0.2
    assert before_any is not None
    assert before_any.near_miss is None  # without it: afresh, from the 30th query


def served_on(base: np.ndarray, t: float, a: float) -> np.ndarray:
    """What a re-fit ``sigmoid(a + t z)`` serves for base confidences ``sigmoid(z)``."""
    c = base.clip(1e-6, 1 - 1e-6)
    return np.asarray(1 / (1 + np.exp(-(a + t * np.log(c / (1 - c))))))


def test_a_scopes_reading_carries_over_a_refit_on_its_bins(table: NearMissTable) -> None:
    """A version change starts a scope afresh, but for the histograms on the scale of
    one it kept (ADR 040): a re-fit reads its base's bins, so the near misses the base
    saw raise the re-fit's bar from its first query, not its 30th; another re-fit of the
    same base takes them on, and a re-fit that kept the base's map takes all of it."""
    rng = np.random.default_rng(4)
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    mix = load_calibration(path).conformal.mix
    assert mix is not None
    assert table.scales("base") == ("base", None)
    # Labelled before any near miss showed: answers and off-topic questions.
    clean = np.concatenate([drawn(table.answerable, 100, rng), drawn(table.out_of_scope, 200, rng)])
    refit = carried_near_miss(table, None, 1.2, 0.5, 0.3, served_on(clean, 1.2, 0.5))
    other = carried_near_miss(table, None, 0.8, -0.2, 0.3, served_on(clean, 0.8, -0.2))
    assert refit is not None
    assert other is not None
    on_base = {"binned_on": "base"}
    refit, other = refit.model_copy(update=on_base), other.model_copy(update=on_base)
    kept_map = table.model_copy(update=on_base)  # an answered-only re-fit's
    traffic = np.concatenate(
        [
            drawn(table.answerable, 100, rng),
            drawn(table.near_miss, 150, rng),
            drawn(table.out_of_scope, 250, rng),
        ]
    )[rng.permutation(500)]

    def after_base(
        version: str, near: NearMissTable, confidence: float
    ) -> tuple[MixReading, MixMonitor, MixReading | None]:
        monitor = MixMonitor()
        for c in traffic:
            was = monitor.observe("t", "c", "base", mix, float(c), table)
        assert was is not None
        assert was.near_miss is not None
        return was, monitor, monitor.observe("t", "c", version, mix, confidence, near)

    was, monitor, now = after_base("refit", refit, float(served_on(np.array([0.5]), 1.2, 0.5)[0]))
    assert was.near_miss is not None
    assert was.near_miss.lower > table.near_miss_share  # the base saw them
    assert now is not None  # the first query on the re-fit: read at once
    assert now.near_miss is not None
    assert not now.mixed  # the two-kind part starts afresh on the new scale
    assert (now.share, now.lower, now.upper) == (mix.unanswerable_share, 0.0, 1.0)
    assert now.near_miss.share == pytest.approx(was.near_miss.share, abs=0.011)
    assert not now.near_miss.young
    assert near_miss_threshold(refit, now.near_miss) is not None  # the bar rises at once
    for c in served_on(traffic[:40], 1.2, 0.5):
        later = monitor.observe("t", "c", "refit", mix, float(c), refit)
    assert later is not None
    assert later.mixed  # 30 queries on: the two-kind mix is read again
    # Another re-fit of the same base reads the same bins: it takes them on.
    on_other = monitor.observe("t", "c", "refit-2", mix, 0.5, other)
    assert on_other is not None
    assert on_other.near_miss is not None
    assert near_miss_threshold(other, on_other.near_miss) is not None
    # A re-fit that kept the base's map serves the base's confidences: all carries.
    _, _, kept = after_base("raised", kept_map, 0.5)
    assert kept is not None
    assert kept.mixed
    # Without a scale in common, afresh as before.
    unknown = carried_near_miss(table, None, 1.2, 0.5, 0.3, np.full(100, 0.5))
    assert unknown is not None
    assert after_base("refit", unknown, 0.5)[2] is None
    assert after_base("another", table, 0.5)[2] is None


def test_a_restarted_process_carries_a_saved_reading_over_a_refit(table: NearMissTable) -> None:
    """A process restarted after a re-fit took over (ADR 040) takes up the histograms
    saved under another version that are on a scale the new one reads, as a running
    process carries them; a state saved before scales were (none recorded) does not."""
    rng = np.random.default_rng(5)
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8-384")
    assert path is not None
    mix = load_calibration(path).conformal.mix
    assert mix is not None
    clean = np.concatenate([drawn(table.answerable, 100, rng), drawn(table.out_of_scope, 200, rng)])
    on_base = {"binned_on": "base"}
    refit = carried_near_miss(table, None, 1.2, 0.5, 0.3, served_on(clean, 1.2, 0.5))
    other = carried_near_miss(table, None, 0.8, -0.2, 0.3, served_on(clean, 0.8, -0.2))
    assert refit is not None
    assert other is not None
    refit, other = refit.model_copy(update=on_base), other.model_copy(update=on_base)
    traffic = np.concatenate(
        [
            drawn(table.answerable, 100, rng),
            drawn(table.near_miss, 150, rng),
            drawn(table.out_of_scope, 250, rng),
        ]
    )[rng.permutation(500)]
    running = MixMonitor()
    for c in traffic:
        running.observe("t", "c", "base", mix, float(c), table)

    def restarted(state: ScopeState, version: str, near: NearMissTable) -> MixReading | None:
        [saved], skipped = decode_states(encode_states([state]))
        assert skipped == 0
        monitor = MixMonitor()
        assert monitor.restore([saved]) == 1
        return monitor.observe("t", "c", version, mix, 0.5, near)

    [under_base] = running.export()
    assert (under_base.scale, under_base.near_scale) == (None, None)  # its own, no edges
    now = restarted(under_base, "refit", refit)
    assert now is not None  # read at once, from the saved base histogram
    assert now.near_miss is not None
    assert not now.mixed
    assert near_miss_threshold(refit, now.near_miss) is not None
    whole = restarted(under_base, "raised", table.model_copy(update=on_base))
    assert whole is not None
    assert whole.mixed  # an answered-only re-fit serves the base's scale: all of it
    # Saved under the re-fit: its near-miss histogram is on the base's bins.
    for c in served_on(traffic[:40], 1.2, 0.5):
        running.observe("t", "c", "refit", mix, float(c), refit)
    [under_refit] = running.export()
    assert (under_refit.scale, under_refit.near_scale) == (None, "base")
    again = restarted(under_refit, "refit-2", other)
    assert again is not None
    assert again.near_miss is not None
    assert near_miss_threshold(other, again.near_miss) is not None
    assert restarted(under_refit.model_copy(update={"near_scale": None}), "refit-2", other) is None
    assert restarted(under_base, "another", table) is None  # no scale in common


def test_a_carried_reading_exports_no_unanswerable_share() -> None:
    """The calibration's share stands in for a two-kind reading not made yet (ADR 040):
    it is not exported as if the traffic had been read."""
    metrics = Metrics()
    reading = NearMissReading(share=0.2, lower=0.15, out_of_scope=0.5)
    _export(metrics, "t", "c", MixReading(0.7, 0.0, reading, mixed=False))
    labels = {"tenant": "t", "collection": "c"}
    got = metrics.registry.get_sample_value
    assert got("ragsift_unanswerable_share", labels) is None
    assert got("ragsift_near_miss_share", labels) == pytest.approx(0.2)
    _export(metrics, "t", "c", MixReading(0.7, 0.6, reading))
    assert got("ragsift_unanswerable_share", labels) == pytest.approx(0.7)


@pytest.mark.parametrize(
    "scale", ["a b\n", "", "x" * 129, "名前", "cal-1\x00", "../cal-1/x", 12, {"a": [1]}]
)
def test_a_table_with_a_bad_scale_is_refused(table: NearMissTable, scale: object) -> None:
    with pytest.raises(ValueError, match="binned_on"):
        NearMissTable.model_validate({**table.model_dump(), "binned_on": scale})
    assert "binned_on" not in table.model_dump_json()  # unset: written as before ADR 040
