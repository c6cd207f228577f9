"""The answer policy of a query is copied only where something in it changes.

Every query builds its policy (the tenant's, the guardrails', the mix's bar); each
``dataclasses.replace`` re-runs AnswerPolicy's checks. Strict mode with no
collection threshold and D1's default changed nothing and copied anyway; a bar the
mix lowered was copied twice, once per field (issue 17).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ragsift.confidence.policy import AnswerPolicy
from ragsift.observability.metrics import Metrics
from ragsift.retrieval import mix_watch
from ragsift.retrieval import pipeline as pipeline_module
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.mix_watch import LOWERED_ADVICE_CODE
from ragsift.schemas import QueryEvent
from ragsift.settings import GuardrailSettings, Settings
from ragsift.wiring import build_pipeline
from tests.unit.confidence.test_scoped_calibration_pipeline import EMBEDDER, index
from tests.unit.retrieval.test_mix_lower_pipeline import _pipeline
from tests.unit.retrieval.test_mix_pipeline import _ask

__all__ = ["index"]

pytestmark = pytest.mark.unit


def _query(*collections: str) -> QueryEvent:
    extra: dict[str, Any] = {"collections": list(collections)} if collections else {}
    return QueryEvent(query_id="q1", tenant_id="alpha", query="refunds?", **extra)


def test_strict_mode_without_collection_thresholds_keeps_the_tenants_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=tmp_path)
    pipe = build_pipeline(
        settings, index=EdgeIndex(tmp_path / "edge"), embedder=EMBEDDER, metrics=Metrics()
    )
    assert settings.guardrails.strict_mode
    copies: list[dict[str, Any]] = []

    def counting(obj: Any, /, **changes: Any) -> Any:
        copies.append(changes)
        return dataclasses.replace(obj, **changes)

    monkeypatch.setattr(pipeline_module, "dataclasses", type("dc", (), {"replace": counting}))
    assert pipe._policy(_query()) == AnswerPolicy()
    assert copies == []


def test_a_collection_threshold_and_d1_still_make_the_bars(tmp_path: Path) -> None:
    guard = GuardrailSettings(collection_thresholds={"legal": 0.8}, min_documents=2)
    pipe = build_pipeline(
        Settings(data_dir=tmp_path, guardrails=guard),
        index=EdgeIndex(tmp_path / "edge"),
        embedder=EMBEDDER,
        metrics=Metrics(),
    )
    assert pipe._policy(_query("default", "legal")) == AnswerPolicy(
        answer_floor=0.8, min_documents=2
    )
    assert pipe._policy(_query()) == AnswerPolicy(min_documents=2)


async def test_a_bar_the_mix_lowered_is_one_copy_of_the_policy(
    tmp_path: Path, index: EdgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies: list[dict[str, Any]] = []

    def counting(obj: Any, /, **changes: Any) -> Any:
        if isinstance(obj, AnswerPolicy):
            copies.append(changes)
        return dataclasses.replace(obj, **changes)

    monkeypatch.setattr(mix_watch, "dataclasses", type("dc", (), {"replace": counting}))
    results = await _ask(_pipeline(tmp_path, index, "auto"), "alpha", 260)
    lowered = [r for r in results if any(a.code == LOWERED_ADVICE_CODE for a in r.recommendations)]
    assert lowered  # the scenario lowers the bar for most of its queries
    assert len(copies) <= len(results)  # at most one copy a query
    assert {"answer_threshold", "prior"} in [set(c) for c in copies]
