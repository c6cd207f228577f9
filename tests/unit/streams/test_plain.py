"""The plain runtime without a broker: what it refuses, and /readyz before it runs."""

from __future__ import annotations

import pytest

from ragsift.errors import ConfigurationError
from ragsift.settings import KafkaSettings, Settings
from ragsift.streams.assembly import assemble
from ragsift.streams.plain import PlainWorker


def test_exactly_once_is_refused_with_the_runtime_that_has_it() -> None:
    settings = Settings(kafka=KafkaSettings(processing_guarantee="exactly_once"))
    with pytest.raises(ConfigurationError, match="--runtime faust"):
        PlainWorker(assemble(["decision"], settings), settings)


def test_before_it_runs_every_agent_is_down_and_nothing_is_assigned() -> None:
    settings = Settings()
    worker = PlainWorker(assemble(["decision", "report"], settings), settings)
    assert worker.readiness() == {
        "ready": False,
        "rebalancing": False,
        "agents_down": ["ragsift.decision", "ragsift.report"],
        "handlers_stalled": [],
        "assigned_partitions": None,
    }


def test_the_web_host_defaults_to_the_settings_and_the_option_wins() -> None:
    settings = Settings()
    parts = assemble(["decision"], settings)
    assert PlainWorker(parts, settings).web_host == "127.0.0.1"
    assert PlainWorker(parts, settings, web_host="127.0.0.2").web_host == "127.0.0.2"
