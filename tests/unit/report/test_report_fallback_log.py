"""An LLM outage is one warning per batch of reports, naming how many fell back.

Before, the builder logged a warning at each report that fell back: while the LLM
was down every report of every batch logged the same line, its query id aside (at 8
calls at once, 1.5 s of retries each, about five lines a second per replica), and
the first line's error was buried under the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ragsift.observability.metrics import Metrics
from ragsift.report import (
    ChatMessage,
    ChatReply,
    LlmDeadlineError,
    LlmUnavailableError,
    ReportBuilder,
    ReportSettings,
)
from ragsift.schemas import RetrievalResult
from ragsift.workers.report import ReportHandler

Make = Callable[..., RetrievalResult]
ANSWER = "Orbit thermostats can be returned within 30 days [1]."


class DownFor:
    """Answers, except for queries naming one of ``down`` (mapped to the error raised)."""

    def __init__(self, down: dict[str, Exception]) -> None:
        self.down = down

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """The answer, or the error of the marker the prompt names."""
        for marker, error in self.down.items():
            if any(marker in m["content"] for m in messages):
                raise error
        return ChatReply(ANSWER, "m")

    async def close(self) -> None:
        """Nothing to release."""


def _builder(chat: Any) -> ReportBuilder:
    return ReportBuilder(ReportSettings(nonce_key=b"k" * 16), chat)


def _handler(chat: Any) -> ReportHandler:
    return ReportHandler(_builder(chat), Metrics(), max_concurrency=8)


def _fallback_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "extractively" in r.getMessage()
    ]


async def test_an_outage_is_one_warning_per_batch_naming_the_count(
    make_result: Make, caplog: pytest.LogCaptureFixture
) -> None:
    down = LlmUnavailableError("connection refused", attempts=3)
    handler = _handler(DownFor({"": down}))
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(20)]
    with caplog.at_level(logging.WARNING):
        outcomes = await handler.handle_batch(results)
    assert all(isinstance(o, list) for o in outcomes)
    [line] = _fallback_lines(caplog)
    assert "20 of 20 reports" in line
    assert "unavailable 20" in line
    assert "connection refused" in line  # the first one's error, and its query
    assert "q0" in line
    total = handler.metrics.registry.get_sample_value(  # type: ignore[union-attr]
        "ragsift_report_llm_fallbacks_total", {"reason": "unavailable"}
    )
    assert total == 20  # every fallback still counted


async def test_a_batch_with_some_fallbacks_names_them_by_reason(
    make_result: Make, caplog: pytest.LogCaptureFixture
) -> None:
    chat = DownFor(
        {
            "marker-a": LlmUnavailableError("503", attempts=3),
            "marker-b": LlmDeadlineError("slow model", deadline_s=20.0),
        }
    )
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(5)]
    results[1] = make_result(query_id="q1", result_id="r1", query="Refund days? marker-a")
    results[3] = make_result(query_id="q3", result_id="r3", query="Refund days? marker-b")
    with caplog.at_level(logging.WARNING):
        await _handler(chat).handle_batch(results)
    [line] = _fallback_lines(caplog)
    assert "2 of 5 reports" in line
    assert "deadline 1" in line
    assert "unavailable 1" in line


async def test_a_batch_without_a_fallback_logs_none(
    make_result: Make, caplog: pytest.LogCaptureFixture
) -> None:
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(3)]
    with caplog.at_level(logging.WARNING):
        await _handler(DownFor({})).handle_batch(results)
    assert _fallback_lines(caplog) == []


async def test_a_report_built_alone_still_warns_once(
    make_result: Make, caplog: pytest.LogCaptureFixture
) -> None:
    builder = _builder(DownFor({"": LlmUnavailableError("down", attempts=3)}))
    with caplog.at_level(logging.WARNING):
        report, _ = await builder.build(make_result(query_id="q9"))
    assert report.generated_by == "extractive"
    [line] = _fallback_lines(caplog)
    assert "q9" in line
    assert "down" in line
