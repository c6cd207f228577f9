"""Past the tenant label bound, ``ragsift_answer_threshold{tenant="(other)"}`` reads the
strictest bar of the scopes folded into it, so RagsiftAnswerBarRaised still fires.

Before, every folded scope set the series in turn: a tenant whose mix raised its bar
to 1.0 (it answers nothing) read 0.30 again at the next query of a tenant held to
the certified bar, and the alert (>= 0.95 for 30 minutes) could never fire for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from tests.unit.retrieval.test_mix_pipeline import CERTIFIED, _ask, _pipeline, index

__all__ = ["index"]  # the two tenants' shard

pytestmark = pytest.mark.unit

OTHER = {"tenant": "(other)", "collection": "default"}


@pytest.mark.parametrize("calm_last", [True, False], ids=["calm-last", "calm-first"])
async def test_the_other_series_reads_the_strictest_bar(
    tmp_path: Path, index: EdgeIndex, calm_last: bool
) -> None:
    metrics = Metrics(max_tenants=0)  # every tenant folds into "(other)"
    pipe = _pipeline(tmp_path, index, "auto", metrics)
    if not calm_last:
        await _ask(pipe, "beta", 1)
    raised = await _ask(pipe, "alpha", 260)  # its mix raised its bar past every answer
    assert not raised[-1].answerable
    if calm_last:
        (calm,) = await _ask(pipe, "beta", 1)  # too few queries: the certified bar
        assert calm.answerable
    bar = metrics.registry.get_sample_value("ragsift_answer_threshold", OTHER)
    assert bar is not None
    assert bar > CERTIFIED
    assert bar >= 0.95  # RagsiftAnswerBarRaised's threshold
