"""The pipeline raises a scope's bar where its traffic is full of near misses (ADR 021).

The artifact certifies 0.30 on a sample with 5% near misses (on-topic queries
without the answer, which scored 0.55-0.65) and nothing past 10%. Its mix table
is flat, so only near misses can move the bar. A tenant whose queries all
score where the near misses did gets its answerable-looking queries refused
with a ``near_miss_mix`` advice; their confidence is reported as scored (the
near-miss bar changes no prior), the scope's near-miss share is exported, and
``RAGSIFT_CONFIDENCE_NEAR_MISS=off`` keeps the certified bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from ragsift.confidence import CalibrationArtifact, save_calibration
from ragsift.confidence.mix import MIX_SHARES
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import MIX_ADVICE_CODE, NEAR_MISS_ADVICE_CODE
from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.settings import CacheSettings, ConfidenceSettings, Settings
from ragsift.wiring import build_pipeline
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER, index
from tests.unit.retrieval.test_mix_pipeline import (
    CALIBRATED,
    CERTIFIED,
    _ask,
    _histogram,
    _near_table,
    _with_tables,
)

__all__ = ["index"]


def _with_near_misses() -> CalibrationArtifact:
    # The two-kind view counts near misses as answerable, as it does on real traffic.
    flat = {
        "thresholds": (CERTIFIED,) * len(MIX_SHARES),
        "answerable": _histogram({11, 12, 19}),
        "unanswerable": _histogram({1, 2}),
    }
    near = _near_table(lambda n, _: CERTIFIED if n <= 0.1 else 1.0, {19}, {11, 12}, 450)
    return _with_tables(flat, near)


def _pipeline(
    tmp_path: Path, index: EdgeIndex, near_miss: Literal["auto", "off"], metrics: Metrics
) -> RetrievalPipeline:
    settings = Settings(
        data_dir=tmp_path,
        confidence=ConfidenceSettings(
            calibration_path=save_calibration(_with_near_misses(), tmp_path / "cal.json"),
            near_miss=near_miss,
        ),
        cache=CacheSettings(enabled=False),
    )
    return build_pipeline(settings, index=index, embedder=EMBEDDER, metrics=metrics)


async def test_a_scope_full_of_near_misses_gets_the_bar_of_their_share(
    tmp_path: Path, index: EdgeIndex
) -> None:
    metrics = Metrics()
    results = await _ask(_pipeline(tmp_path, index, "auto", metrics), "alpha", 260)
    first, last = results[0], results[-1]
    assert first.answerable  # too few queries yet: the certified bar
    assert not last.answerable
    (advice,) = [a for a in last.recommendations if a.code == NEAR_MISS_ADVICE_CODE]
    assert "on its subjects but unanswered by its documents" in advice.message
    assert "no confidence is certified" in advice.message
    assert not any(a.code == MIX_ADVICE_CODE for a in last.recommendations)
    # Held to a higher bar, but reported as scored: no prior was changed.
    assert last.confidence == pytest.approx(CALIBRATED, abs=1e-4)
    share = metrics.registry.get_sample_value(
        "ragsift_near_miss_share", {"tenant": "alpha", "collection": "default"}
    )
    assert share is not None
    assert share > 0.5


async def test_off_reads_no_near_misses(tmp_path: Path, index: EdgeIndex) -> None:
    metrics = Metrics()
    results = await _ask(_pipeline(tmp_path, index, "off", metrics), "alpha", 260)
    assert all(r.answerable for r in results)
    assert not any(a.code == NEAR_MISS_ADVICE_CODE for r in results for a in r.recommendations)
    share = metrics.registry.get_sample_value(
        "ragsift_near_miss_share", {"tenant": "alpha", "collection": "default"}
    )
    assert share is None
