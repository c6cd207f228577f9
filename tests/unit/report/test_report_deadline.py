"""The report handler's deadline grows with its batch; only emitted reports (and fallbacks) count.

Before: one flat deadline (30 s) per call. With an LLM slower than ~3.75 s a call, a
batch of 48 (six rounds of 8 concurrent calls, each up to 20 s) overran it, was
rebuilt report by report (88 LLM calls for 48 reports), and the reports the cut-off
batch had finished were counted as well as their rebuilt copies. Their LLM
fallbacks were counted at each build too, by the builder, until the handler counted
them with the reports.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence

import pytest

from ragsift.observability.metrics import Metrics
from ragsift.report import ChatMessage, ChatReply, LlmDeadlineError, ReportBuilder, ReportSettings
from ragsift.schemas import RetrievalResult
from ragsift.settings import Settings
from ragsift.streams.isolation import handle_isolated
from ragsift.wiring import build_report_handler
from ragsift.workers.base import MAX_DEADLINE_S
from ragsift.workers.report import ReportHandler

Make = Callable[..., RetrievalResult]
ANSWER = "Orbit thermostats can be returned within 30 days [1]."


class SlowChat:
    """Answers every call after ``pause_s`` (``hang_on`` queries: after an hour)."""

    def __init__(self, pause_s: float, hang_on: str | None = None) -> None:
        self.pause_s, self.hang_on = pause_s, hang_on
        self.calls = 0

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """The answer, late."""
        self.calls += 1
        hang = self.hang_on is not None and any(self.hang_on in m["content"] for m in messages)
        await asyncio.sleep(3600 if hang else self.pause_s)
        return ChatReply(ANSWER, "slow")

    async def close(self) -> None:
        """Nothing to release."""


def handler(chat: SlowChat | None, metrics: Metrics, llm_deadline_s: float) -> ReportHandler:
    settings = ReportSettings(llm_deadline_s=llm_deadline_s, nonce_key=b"k" * 16)
    return ReportHandler(ReportBuilder(settings, chat), metrics, max_concurrency=8)


def reports_counted(metrics: Metrics) -> float:
    return sum(
        sample.value
        for family in metrics.registry.collect()
        if family.name == "ragsift_reports"
        for sample in family.samples
        if sample.name == "ragsift_reports_total"
    )


def test_the_deadline_grows_by_one_llm_deadline_per_round_of_concurrent_calls() -> None:
    metrics = Metrics()
    slow = handler(SlowChat(0), metrics, llm_deadline_s=20.0)
    results = [RetrievalResult.model_construct()] * 48
    assert slow.deadline_for(results[:1], 30.0) == 30.0
    assert slow.deadline_for(results[:8], 30.0) == 30.0
    assert slow.deadline_for(results[:9], 30.0) == 50.0
    assert slow.deadline_for(results, 30.0) == 130.0  # six rounds
    assert slow.deadline_for(results * 100, 30.0) == MAX_DEADLINE_S
    assert slow.deadline_for(results * 100, 900.0) == 900.0
    # Extractive reports make no LLM calls: the runtime's deadline.
    assert handler(None, metrics, 20.0).deadline_for(results, 30.0) == 30.0


async def test_a_batch_of_slow_llm_calls_is_built_once(make_result: Make) -> None:
    metrics = Metrics()
    chat = SlowChat(0.02)
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(48)]
    # Six rounds of 0.02 s overrun the flat 0.05 s; each round gets its LLM deadline.
    outcomes = await handle_isolated(
        handler(chat, metrics, llm_deadline_s=0.1), results, deadline_s=0.05, metrics=metrics
    )
    assert all(isinstance(outcome, list) for outcome in outcomes)
    assert chat.calls == 48
    assert reports_counted(metrics) == 48
    assert not [s for f in metrics.batch_retries.collect() for s in f.samples if s.value]


async def test_reports_of_a_batch_cut_off_are_not_counted(make_result: Make) -> None:
    metrics = Metrics()
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(3)]
    results[2] = make_result(query_id="q2", result_id="r2", query="Where is the hang marker?")
    chat = SlowChat(0, hang_on="hang marker")
    outcomes = await handle_isolated(
        handler(chat, metrics, llm_deadline_s=0.01), results, deadline_s=0.05, metrics=metrics
    )
    assert [isinstance(outcome, list) for outcome in outcomes] == [True, True, False]
    # q0 and q1 were built twice (in the cut-off batch, then alone), emitted once.
    assert chat.calls == 6
    assert reports_counted(metrics) == 2


class FailingChat:
    """Fails every call after ``pause_s`` (past its own deadline); ``hang_on`` queries hang."""

    def __init__(self, pause_s: float, hang_on: str) -> None:
        self.pause_s, self.hang_on = pause_s, hang_on
        self.calls = 0

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """Never an answer: a deadline error, or (``hang_on``) an hour's wait."""
        self.calls += 1
        if any(self.hang_on in m["content"] for m in messages):
            await asyncio.sleep(3600)
        await asyncio.sleep(self.pause_s)
        raise LlmDeadlineError("slow model", deadline_s=self.pause_s)

    async def close(self) -> None:
        """Nothing to release."""


def fallbacks_counted(metrics: Metrics, reason: str) -> float | None:
    return metrics.registry.get_sample_value(
        "ragsift_report_llm_fallbacks_total", {"reason": reason}
    )


async def test_a_fallback_in_a_batch_cut_off_is_counted_once(
    monkeypatch: pytest.MonkeyPatch, make_result: Make
) -> None:
    # Wired as the worker is (a builder with metrics counted a fallback at each build).
    for name in list(os.environ):
        if name.startswith("RAGSIFT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RAGSIFT_LLM_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RAGSIFT_LLM_MODEL", "m")
    metrics = Metrics()
    worker = build_report_handler(Settings.from_env(), metrics)
    assert worker.builder.llm is not None
    await worker.builder.llm.close()
    chat = FailingChat(0.001, hang_on="hang marker")
    worker.builder.llm = chat
    results = [make_result(query_id=f"q{n}", result_id=f"r{n}") for n in range(3)]
    results[2] = make_result(query_id="q2", result_id="r2", query="Where is the hang marker?")
    outcomes = await handle_isolated(worker, results, deadline_s=0.05, metrics=metrics)
    assert [isinstance(outcome, list) for outcome in outcomes] == [True, True, False]
    # q0 and q1 fell back twice (in the cut-off batch, then alone); each went out once.
    assert chat.calls == 6
    assert reports_counted(metrics) == 2
    assert fallbacks_counted(metrics, "deadline") == 2
