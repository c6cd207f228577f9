"""Past the tenant label bound, the drift gauge's ``(other)`` series reads the highest
PSI of the scopes folded into it, so a drifting tenant there still fires the alert.

Before, each folded scope set ``ragsift_calibration_drift_psi{tenant="(other)"}`` in
turn: a drifting tenant's PSI of 12 was overwritten with a calm one's 0.0 at the
calm one's next query, and RagsiftCalibrationDrift (PSI > 0.25 for 10 minutes) could
not fire for any tenant past the first fifty.
"""

from __future__ import annotations

import pytest

from ragsift.confidence.drift import DriftMonitor
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.drift_watch import watch_drift
from tests.unit.workers.test_calibration_worker import result

pytestmark = pytest.mark.unit

MIN_SAMPLES = 40
OTHER = {"tenant": "(other)", "collection": "docs"}


def _psi(metrics: Metrics, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value("ragsift_calibration_drift_psi", labels)


def test_a_drifting_tenant_past_the_label_bound_holds_the_other_series_up() -> None:
    metrics = Metrics(max_tenants=2)
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    for tenant in ("first", "second"):  # the two tenants with series of their own
        watch_drift(monitor, result(f"{tenant}-0", 0.3, tenant=tenant), metrics, source="t")
    events = []
    for i in range(10 * MIN_SAMPLES):
        top = 0.3 if i < 3 * MIN_SAMPLES else 0.95  # "late" moves; "calm" does not
        late, event = watch_drift(monitor, result(f"l{i}", top, tenant="late"), metrics, source="t")
        events.append(event)
        for n in range(3):
            watch_drift(monitor, result(f"c{n}-{i}", 0.3, tenant=f"calm{n}"), metrics, source="t")
    assert late.calibration_shift
    assert len([e for e in events if e is not None]) == 1
    other = _psi(metrics, OTHER)
    assert other is not None
    assert other > 0.25  # the shipped alert's threshold
    # "late" comes back in domain: its own lower PSI lowers the series it held.
    for i in range(20 * MIN_SAMPLES):
        late, _ = watch_drift(monitor, result(f"b{i}", 0.3, tenant="late"), metrics, source="t")
    assert not late.calibration_shift
    other = _psi(metrics, OTHER)
    assert other is not None
    assert other < 0.25


def test_tenants_within_the_bound_keep_their_own_series() -> None:
    metrics = Metrics(max_tenants=5)
    monitor = DriftMonitor(min_samples=MIN_SAMPLES, half_life=60)
    for i in range(6 * MIN_SAMPLES):
        top = 0.3 if i < 3 * MIN_SAMPLES else 0.95
        watch_drift(monitor, result(f"a{i}", top, tenant="acme"), metrics, source="t")
        watch_drift(monitor, result(f"b{i}", 0.3, tenant="beta"), metrics, source="t")
    acme = _psi(metrics, {"tenant": "acme", "collection": "docs"})
    beta = _psi(metrics, {"tenant": "beta", "collection": "docs"})
    assert acme is not None
    assert beta is not None
    assert acme > 0.25 > beta
    assert _psi(metrics, OTHER) is None
