"""Settings: prefixes, seed-A aliases, validation that names the problem, masking."""

from __future__ import annotations

import pytest

from ragsift.errors import ConfigurationError
from ragsift.settings import KafkaSettings, Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("RAGSIFT_", "RAG_")):
            monkeypatch.delenv(name)


def test_defaults_are_the_seed_figures() -> None:
    s = Settings.from_env()
    c = s.confidence
    assert (c.similarity_threshold, c.min_results) == (0.70, 3)
    assert (c.high_threshold, c.medium_threshold, c.low_threshold) == (0.85, 0.70, 0.50)
    assert (s.cache.ttl_high_s, s.cache.ttl_medium_s, s.cache.ttl_low_s) == (86400, 3600, 300)
    assert s.qdrant.mode == "edge"


def test_seed_a_aliases_and_prefixed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_HIGH_CONFIDENCE_THRESHOLD", "0.9")
    monkeypatch.setenv("RAG_MIN_RESULTS", "5")
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_LOW_THRESHOLD", "0.4")
    monkeypatch.setenv("RAGSIFT_KAFKA_BOOTSTRAP_SERVERS", "h1:1,h2:2")
    s = Settings.from_env()
    assert s.confidence.high_threshold == 0.9
    assert s.confidence.min_results == 5
    assert s.confidence.low_threshold == 0.4
    assert s.kafka.broker_url == "kafka://h1:1;kafka://h2:2"


def test_misordered_thresholds_are_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_LOW_CONFIDENCE_THRESHOLD", "0.95")
    with pytest.raises(ConfigurationError, match="low < medium < high"):
        Settings.from_env()


def test_sasl_needs_credentials_and_secrets_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="needs sasl_mechanism"):
        KafkaSettings(security_protocol="SASL_SSL")
    monkeypatch.setenv("RAGSIFT_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("RAGSIFT_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RAGSIFT_KAFKA_SASL_USERNAME", "svc")
    monkeypatch.setenv("RAGSIFT_KAFKA_SASL_PASSWORD", "hunter2")
    shown = Settings.from_env().masked()
    assert shown["kafka"]["sasl_password"] == "**********"
    assert "hunter2" not in repr(shown)


def test_settings_are_frozen() -> None:
    s = Settings.from_env()
    with pytest.raises(ValueError, match="frozen"):
        s.confidence.high_threshold = 0.1  # type: ignore[misc]  # asserting immutability
