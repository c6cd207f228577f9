"""D9 in reports and decisions alike: a collection's own threshold, and the strictest
one for a result of several collections (D3)."""

from __future__ import annotations

from ragsift.observability.metrics import Metrics
from ragsift.report.builder import ReportSettings, badge_for
from ragsift.schemas import Decision, Report
from ragsift.settings import GuardrailSettings, Settings
from ragsift.wiring import build_report_handler
from ragsift.workers.decision import DecisionHandler
from tests.unit.report.conftest import build_result

THRESHOLDS = {"legal": 0.95}
# Above the moderate preset (0.70), below legal's 0.95 and the green badge's 0.90.
CONFIDENCE = 0.80


async def decision_of(**fields: object) -> Decision:
    handler = DecisionHandler(GuardrailSettings(collection_thresholds=THRESHOLDS), Metrics())
    [emits] = await handler.handle_batch([build_result(confidence=CONFIDENCE, **fields)])
    assert isinstance(emits, list)
    return next(e.event for e in emits if isinstance(e.event, Decision))


async def report_of(**fields: object) -> Report:
    settings = Settings(guardrails=GuardrailSettings(collection_thresholds=THRESHOLDS))
    handler = build_report_handler(settings, Metrics())
    [emits] = await handler.handle_batch([build_result(confidence=CONFIDENCE, **fields)])
    assert isinstance(emits, list)
    return next(e.event for e in emits if isinstance(e.event, Report))


async def test_a_result_of_several_collections_is_decided_by_the_strictest() -> None:
    plain = await decision_of(collection="default")
    assert plain.use_context
    assert plain.threshold == 0.70
    both = await decision_of(collection="default", collections=["default", "legal"])
    assert not both.use_context
    assert both.threshold == 0.95


async def test_reports_honour_the_collection_threshold() -> None:
    plain = await report_of(collection="default")
    assert not plain.advisory_only
    assert plain.badge == "orange"
    legal = await report_of(collection="legal")  # was the preset's 0.70: not advisory
    assert legal.advisory_only
    assert legal.banner is not None
    assert legal.badge == "red"
    both = await report_of(collection="default", collections=["default", "legal"])
    assert both.advisory_only


def test_a_collection_threshold_over_green_never_shows_green() -> None:
    settings = ReportSettings(collection_thresholds={"legal": 0.97})
    assert badge_for(0.93, settings) == "green"
    assert badge_for(0.93, settings, 0.97) == "red"
    result = build_result(confidence=0.93, collection="legal")
    assert settings.advisory_threshold_for(result) == 0.97
