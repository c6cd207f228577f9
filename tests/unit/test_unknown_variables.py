"""A ``RAGSIFT_*`` variable no setting reads is named once at start-up, with the setting meant.

The deployment files' variables are checked in tests/unit/deploy/test_deploy_env.py.
"""

from __future__ import annotations

import logging

import pytest

from ragsift import unknown_variables as module
from ragsift.observability.metrics import Metrics
from ragsift.settings import Settings
from ragsift.unknown_variables import (
    NOT_SETTINGS,
    UnknownVariableCheck,
    setting_variables,
    unknown_variables,
)
from tests.unit.test_docs_agree import read_by_name, setting_names

pytestmark = pytest.mark.unit

# Misspelt names are built, not written out: tests/unit/test_docs_agree.py counts every
# RAGSIFT_* name written in a test as one something reads.
P = "RAGSIFT_"
SERVERS = "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS"
ONE_S_SHORT = SERVERS[:-1]


def _typo(name: str, right: str, wrong: str) -> str:
    return name.replace(right, wrong)


def _suggested(name: str) -> str | None:
    [found] = unknown_variables({name: "x"})
    assert found.name == name
    return found.suggestion


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        (ONE_S_SHORT, SERVERS),
        (_typo("RAGSIFT_QDRANT_URL", "URL", "URI"), "RAGSIFT_QDRANT_URL"),
        (
            _typo("RAGSIFT_CONFIDENCE_HIGH_THRESHOLD", "TH", "T"),
            "RAGSIFT_CONFIDENCE_HIGH_THRESHOLD",
        ),
        (_typo("RAGSIFT_REDIS_URL", "URL", "ULR"), "RAGSIFT_REDIS_URL"),
        (_typo("RAGSIFT_DATA_DIR", "A_D", "AD"), "RAGSIFT_DATA_DIR"),
        ("RAGSIFT_CACHE_TTL_HIGH_S"[:-2].lower(), "RAGSIFT_CACHE_TTL_HIGH_S"),  # any case
    ],
)
def test_a_misspelt_setting_is_named_with_the_one_meant(name: str, meant: str) -> None:
    assert _suggested(name) == meant
    assert f"did you mean {meant}?" in unknown_variables({name: "x"})[0].message()


def test_a_name_like_no_setting_gets_no_suggestion() -> None:
    for name in (P + "FOO", P + "KAFKA_FOO", P + "KAFKA"):
        assert _suggested(name) is None, name
        message = unknown_variables({name: "x"})[0].message()
        assert "docs/configuration.md" in message
        assert "did you mean" not in message


def test_what_the_settings_read_is_not_reported() -> None:
    environ = {name: "x" for name in setting_variables()}
    environ |= {name.lower(): "x" for name in setting_variables()}
    assert unknown_variables(environ) == []
    assert len(setting_variables()) >= 143  # every setting, and its aliases
    assert setting_variables() == setting_names()  # the docs' checks read the same names


def test_other_variables_are_none_of_its_business() -> None:
    # RAG_* names are the aliases of seed A; PATH and the rest are not ragsift's.
    environ = {"RAG_HIGH_CONFIDENCE_THRESHOLD": "0.9", "PATH": "/bin", "MY_RAGSIFT_X": "1"}
    assert unknown_variables(environ) == []


def test_the_scripts_variables_are_exactly_the_allowed_ones() -> None:
    """NOT_SETTINGS is what the scripts, tests, benches and CI read by name (and the
    package reads itself) besides the settings: none is warned about, and none is
    allowed that nothing reads."""
    read = {name for name in read_by_name() if name not in setting_names()}
    assert "RAGSIFT_REDIS_PORT" in read
    assert "RAGSIFT_SQUAD2_DIR" in read
    assert set(NOT_SETTINGS) == read
    assert unknown_variables({name: "1" for name in read_by_name()}) == []


def test_it_warns_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    check = UnknownVariableCheck()
    assert check.found == ()
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        first = check.run({ONE_S_SHORT: "broker:9092", "RAGSIFT_DATA_DIR": "/data"})
        again = check.run({P + "OTHER": "1"})
    assert [v.name for v in first] == [ONE_S_SHORT]
    assert again == first == check.found
    assert [r.getMessage() for r in caplog.records] == [first[0].message()]
    assert caplog.records[0].levelno == logging.WARNING


def test_settings_from_env_runs_the_check(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(module, "UNKNOWN_VARIABLES", UnknownVariableCheck())
    monkeypatch.setenv(ONE_S_SHORT, "broker:9092")
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        settings = Settings.from_env()
        Settings.from_env()  # a command that reads its settings twice warns once
    assert settings.kafka.bootstrap_servers != "broker:9092"  # not read: the default
    messages = [r.getMessage() for r in caplog.records if r.name == module.__name__]
    assert messages == [
        f"{ONE_S_SHORT} is set but no ragsift setting reads it, so it is ignored:"
        f" did you mean {SERVERS}?"
    ]


def test_the_metric_counts_what_the_check_found(monkeypatch: pytest.MonkeyPatch) -> None:
    check = UnknownVariableCheck()
    monkeypatch.setattr("ragsift.observability.metrics.UNKNOWN_VARIABLES", check)
    metrics = Metrics()
    gauge = "ragsift_settings_unknown_variables"
    assert metrics.registry.get_sample_value(gauge) == 0
    check.run({ONE_S_SHORT: "x", P + "FOO": "y", "RAGSIFT_REDIS_URL": "redis://r"})
    assert metrics.registry.get_sample_value(gauge) == 2


def test_hostile_names_and_values_stay_out_of_the_log(caplog: pytest.LogCaptureFixture) -> None:
    secret = "hunter2-" * 10
    environ = {
        _typo("RAGSIFT_KAFKA_SASL_PASSWORD", "WORD", "WROD"): secret,  # never shown
        P + "A\n\x1b[31mFORGED LINE": "1",  # a newline or escape cannot forge a line
        P + "Ä" * 100_000: "2",  # huge and non-Latin
        P + "_" * 5: "3",
    }
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        found = UnknownVariableCheck().run(environ)
    assert len(found) == len(caplog.records) == 4
    suggestions = {v.name: v.suggestion for v in found}
    assert suggestions[_typo("RAGSIFT_KAFKA_SASL_PASSWORD", "WORD", "WROD")] == (
        "RAGSIFT_KAFKA_SASL_PASSWORD"
    )
    for record in caplog.records:
        text = record.getMessage()
        assert secret[:8] not in text
        assert "\n" not in text
        assert "\x1b" not in text
        assert len(text) < 300
    many = {f"{P}{'Z' * 20}{i}": "v" for i in range(1000)}
    assert len(unknown_variables(many)) == 1000  # each named, none dropped
