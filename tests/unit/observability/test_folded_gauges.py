"""Every per-scope gauge's ``(other)`` series keeps the value its alert needs, whichever
folded scope wrote last.

Past the label bound, scopes share one ``(other)`` series. Each gauge was set by
each scope in turn, so the series read whichever wrote last: a calm tenant's next
query hid another's no-context status, raised bar or unanswerable traffic. Each test
has two folded scopes write, in both orders, and reads the series: the worse value
(the highest share or bar; the lowest status) stands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import Gauge

from ragsift.confidence import save_calibration
from ragsift.confidence.mix import MixReading
from ragsift.confidence.near_miss import NearMissReading
from ragsift.confidence.registry import CalibrationScope
from ragsift.evaluation.holes import MissingAnswers
from ragsift.observability.folded import FoldedGauge, Keep
from ragsift.observability.metrics import BoundedLabeler, Metrics
from ragsift.retrieval import mix_watch
from ragsift.retrieval.index import VectorIndex
from ragsift.settings import ConfidenceSettings, Settings
from ragsift.wiring import build_reprober
from tests.unit.retrieval.test_mix_pipeline import EMBEDDER, _artifact

pytestmark = pytest.mark.unit

ORDERS = pytest.mark.parametrize("calm_last", [True, False], ids=["calm-last", "calm-first"])
OTHER = {"tenant": "(other)", "collection": "docs"}


def _value(metrics: Metrics, name: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@ORDERS
def test_the_other_status_reads_the_lowest_latest_status(calm_last: bool) -> None:
    metrics = Metrics(max_tenants=0)
    writes = [("lost", "no_relevant_context"), ("calm", "high_confidence")]
    for tenant, status in writes if calm_last else writes[::-1]:
        metrics.observe_result(tenant, status, 0.5, "ok", {})
    assert _value(metrics, "ragsift_confidence_status", {"tenant": "(other)"}) == 0


@ORDERS
@pytest.mark.parametrize(
    ("name", "worst", "calm"),
    [
        (
            "ragsift_unanswerable_share",
            MixReading(0.9, 0.85, above=(0.9, 0.85)),
            MixReading(0.1, 0.05, above=(0.1, 0.05)),
        ),
        (
            "ragsift_unanswerable_share_raise",
            MixReading(0.5, 0.45, above=(0.8, 0.75)),
            MixReading(0.5, 0.45, above=(0.1, 0.05)),
        ),
        (
            "ragsift_near_miss_share",
            MixReading(0.1, 0.05, NearMissReading(0.4, 0.3, 0.1)),
            MixReading(0.1, 0.05, NearMissReading(0.02, 0.01, 0.1)),
        ),
    ],
)
def test_the_other_mix_shares_read_the_highest_share(
    name: str, worst: MixReading, calm: MixReading, calm_last: bool
) -> None:
    metrics = Metrics(max_tenants=0)
    writes = [("worst", worst), ("calm", calm)]
    for tenant, reading in writes if calm_last else writes[::-1]:
        mix_watch._export(metrics, tenant, "docs", reading)
    expected = {
        "ragsift_unanswerable_share": worst.share,
        "ragsift_unanswerable_share_raise": worst.raising()[0],
        "ragsift_near_miss_share": worst.near_miss.share if worst.near_miss else None,
    }[name]
    assert _value(metrics, name, OTHER) == expected


def _holes_callback(
    tmp_path: Path, metrics: Metrics
) -> Callable[[CalibrationScope, MissingAnswers], None]:
    """What the indexer's re-prober (wiring.build_reprober) calls with a scope's holes."""
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_artifact(0.4), tmp_path / "cal.json")
        ),
    )
    index: VectorIndex = None  # type: ignore[assignment]  # the callback never searches
    reprober = build_reprober(settings, index, EMBEDDER, metrics, tmp_path / "calibrations")
    assert reprober is not None
    assert reprober._holes is not None
    return reprober._holes


@ORDERS
def test_the_other_missing_answer_share_reads_the_highest(tmp_path: Path, calm_last: bool) -> None:
    """Set by the indexer's re-probes, rarely: the share of a scope's missing answers
    its calibration still answers; the highest is the worst."""
    metrics = Metrics(max_tenants=0)
    holes = _holes_callback(tmp_path, metrics)
    writes = [("holed", MissingAnswers(10, 6, 0.3)), ("whole", MissingAnswers(10, 1, 0.3))]
    for tenant, missing in writes if calm_last else writes[::-1]:
        holes(CalibrationScope("docs", tenant), missing)
    assert _value(metrics, "ragsift_calibration_missing_answer_share", OTHER) == 0.6


def test_a_whole_collection_scope_takes_no_tenant_slot(tmp_path: Path) -> None:
    """A calibration of all of a collection's tenants is exported with tenant "": it
    took one of the tenant label's slots, which then folded a real tenant."""
    metrics = Metrics(max_tenants=1)
    holes = _holes_callback(tmp_path, metrics)
    holes(CalibrationScope("docs"), MissingAnswers(10, 2, 0.3))
    holes(CalibrationScope("docs", "acme"), MissingAnswers(10, 3, 0.3))
    name = "ragsift_calibration_missing_answer_share"
    assert _value(metrics, name, {"tenant": "", "collection": "docs"}) == 0.2
    assert _value(metrics, name, {"tenant": "acme", "collection": "docs"}) == 0.3


def _gauge(keep: Keep) -> tuple[FoldedGauge, Metrics]:
    metrics = Metrics(max_tenants=1)
    gauge = Gauge("g", "test", ["tenant"], registry=metrics.registry)
    return FoldedGauge(gauge, [metrics.tenant], keep, BoundedLabeler.OTHER), metrics


@pytest.mark.parametrize(
    ("keep", "values", "read"),
    [
        # (scope, value) writes, then what "(other)" reads
        ("highest", [("a", 0.9), ("b", 0.1), ("a", 0.5), ("b", 0.2)], 0.5),
        ("highest", [("a", 0.9), ("b", 0.95), ("a", 0.1)], 0.95),
        ("lowest", [("a", 0.0), ("b", 3.0), ("a", 2.0), ("b", 3.0)], 2.0),
        ("lowest", [("a", 1.0), ("b", 0.0), ("a", 0.5)], 0.0),
    ],
)
def test_the_holder_may_move_its_value_back_and_others_only_make_it_worse(
    keep: Keep, values: list[tuple[str, float]], read: float
) -> None:
    folded, metrics = _gauge(keep)
    folded.set(("own",), 7.0)  # the one tenant with its own series
    for tenant, value in values:
        folded.set((tenant,), value)
    assert metrics.registry.get_sample_value("g", {"tenant": "(other)"}) == read
    assert metrics.registry.get_sample_value("g", {"tenant": "own"}) == 7.0
    own = [("own", 1.0), ("own", 9.0), ("own", 2.0)]  # a series of its own: the latest
    for tenant, value in own:
        folded.set((tenant,), value)
    assert metrics.registry.get_sample_value("g", {"tenant": "own"}) == 2.0


def test_keep_is_checked() -> None:
    metrics = Metrics()
    gauge = Gauge("g", "test", ["tenant"], registry=metrics.registry)
    with pytest.raises(ValueError, match="keep must be 'highest' or 'lowest', got 'max'"):
        FoldedGauge(gauge, [metrics.tenant], "max", BoundedLabeler.OTHER)  # type: ignore[arg-type]
