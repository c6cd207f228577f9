"""The report worker's settings from the environment: nonce key (masked, warned about), deadline."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import pytest

from ragsift.errors import ConfigurationError
from ragsift.observability.metrics import Metrics
from ragsift.report import OpenAIChatClient, ReportBuilder, ReportSettings, make_nonce
from ragsift.schemas import RetrievalResult
from ragsift.settings import Settings
from ragsift.wiring import build_report_handler
from ragsift.workers.report import ReportHandler

Make = Callable[..., RetrievalResult]
KEY = "a-nonce-key-of-32-characters-xyz"
WARNING = "no prompt nonce key configured"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("RAGSIFT_", "RAG_")):
            monkeypatch.delenv(name)


def _report_handler(settings: Settings) -> ReportHandler:
    handler = build_report_handler(settings, Metrics())
    assert isinstance(handler, ReportHandler)
    return handler


async def test_configured_key_reaches_the_prompt(
    monkeypatch: pytest.MonkeyPatch, make_result: Make, chat: Any
) -> None:
    monkeypatch.setenv("RAGSIFT_REPORT_NONCE_KEY", KEY)
    settings = Settings.from_env()
    assert settings.masked()["report"]["nonce_key"] == "**********"
    report_settings = _report_handler(settings).builder.settings
    assert report_settings.nonce_key == KEY.encode()
    llm = chat("Within 30 days [1].")
    await ReportBuilder(report_settings, llm).build(make_result(query_id="q-key"))
    system = llm.calls[0][0]["content"]
    assert make_nonce("q-key", KEY.encode()) in system
    assert make_nonce("q-key") not in system  # not the per-process key


async def test_unset_key_warns_when_prompts_are_built(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RAGSIFT_LLM_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RAGSIFT_LLM_MODEL", "m")
    monkeypatch.setenv("RAGSIFT_REPORT_NONCE_KEY", "")  # compose's ${VAR:-}: unset
    with caplog.at_level(logging.WARNING, logger="ragsift.report.builder"):
        handler = _report_handler(Settings.from_env())
    assert handler.builder.settings.nonce_key is None
    assert WARNING in caplog.text
    await handler.close()


def test_no_warning_for_extractive_reports(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ragsift.report.builder"):
        ReportBuilder(ReportSettings())
    assert WARNING not in caplog.text


def test_short_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_REPORT_NONCE_KEY", "short")
    with pytest.raises(ConfigurationError, match="nonce_key must be at least 16 characters"):
        Settings.from_env()


async def test_llm_deadline_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_LLM_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RAGSIFT_LLM_MODEL", "m")
    monkeypatch.setenv("RAGSIFT_LLM_TIMEOUT_S", "5")
    monkeypatch.setenv("RAGSIFT_LLM_DEADLINE_S", "12.5")
    handler = _report_handler(Settings.from_env())
    client = handler.builder.llm
    assert isinstance(client, OpenAIChatClient)
    assert client.deadline == 12.5
    assert handler.metrics is not None  # fallbacks are counted
    await handler.close()


def test_llm_deadline_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_LLM_DEADLINE_S", "0")
    with pytest.raises(ConfigurationError, match="deadline_s"):
        Settings.from_env()
    with pytest.raises(ConfigurationError, match="llm_deadline_s must be > 0, got 0"):
        ReportSettings(llm_deadline_s=0)
