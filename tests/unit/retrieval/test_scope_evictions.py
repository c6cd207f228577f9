"""Per-scope monitors on the query path under a flood of tenant ids: bounded, counted,
and a tenant that comes after the flood is still watched.

The drift monitor and the mix monitor each keep state per (tenant, collection), and
tenant ids come from query events. Each keeps at most its ``MAX_SCOPES``; past it the
least recently seen scope is dropped and counted in
``ragsift_scope_state_evictions_total{monitor}``. Before, a scope past the cap was not
monitored at all: the first scopes seen held the cap until the worker restarted, and
a later tenant's traffic, however unanswerable, kept the certified bar.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ragsift.confidence.drift as drift
import ragsift.confidence.mix_monitor as mix_monitor
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE
from tests.unit.retrieval.test_mix_pipeline import _ask, _pipeline, index

__all__ = ["index"]

pytestmark = pytest.mark.unit

CAP = 3
FLOOD = 40


async def test_a_flood_of_tenants_is_bounded_counted_and_a_later_tenant_gets_its_bar(
    tmp_path: Path, index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drift, "MAX_SCOPES", CAP)
    monkeypatch.setattr(mix_monitor, "MAX_SCOPES", CAP)
    metrics = Metrics()
    pipe = _pipeline(tmp_path, index, "auto", metrics)
    assert pipe.drift is not None
    assert pipe.mix is not None
    for n in range(FLOOD):
        await _ask(pipe, f"flood{n}", 1)
    assert len(pipe.drift._scopes) == CAP
    assert len(pipe.mix._scopes) == CAP
    # A tenant first seen after the flood: its queries all look unanswerable (as in
    # test_mix_pipeline), so its scope's bar rises once it holds enough of them.
    results = await _ask(pipe, "alpha", 260)
    assert results[0].answerable
    assert not results[-1].answerable
    assert any(a.code == MIX_ADVICE_CODE for a in results[-1].recommendations)
    assert len(pipe.drift._scopes) == CAP
    assert len(pipe.mix._scopes) == CAP
    for monitor in ("drift", "mix"):
        evicted = metrics.registry.get_sample_value(
            "ragsift_scope_state_evictions_total", {"monitor": monitor}
        )
        assert evicted == FLOOD + 1 - CAP, monitor
