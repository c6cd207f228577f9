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


def test_the_default_embedder_is_onnx_and_hashing_stays_selectable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 13: the semantic model is the default; hashing is the zero-dependency fallback.
    assert Settings.from_env().embedder.kind == "onnx"
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "hashing")
    assert Settings.from_env().embedder.kind == "hashing"


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
    with pytest.raises(ValueError, match="needs RAGSIFT_KAFKA_SASL_MECHANISM"):
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


URL_SECRETS = {
    "RAGSIFT_REDIS_URL": ("redis://:redispw@cache:6379/0", "redis://:**********@cache:6379/0"),
    "RAGSIFT_LLM_BASE_URL": (
        "https://svc:llmpw@llm.example/v1",
        "https://svc:**********@llm.example/v1",
    ),
    "RAGSIFT_EMBEDDER_BASE_URL": ("http://tokenonly@emb:8000", "http://**********@emb:8000"),
    "RAGSIFT_QDRANT_URL": ("https://q:qdrantpw@qdrant:6333", "https://q:**********@qdrant:6333"),
    "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": (
        "b1:9092,admin:kafkapw@b2:9092",
        "b1:9092,admin:**********@b2:9092",
    ),
}


def test_masked_hides_passwords_in_url_userinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, (value, _) in URL_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAGSIFT_LLM_MODEL", "m")
    shown = Settings.from_env().masked()
    by_env = {
        "RAGSIFT_REDIS_URL": shown["redis"]["url"],
        "RAGSIFT_LLM_BASE_URL": shown["llm"]["base_url"],
        "RAGSIFT_EMBEDDER_BASE_URL": shown["embedder"]["base_url"],
        "RAGSIFT_QDRANT_URL": shown["qdrant"]["url"],
        "RAGSIFT_KAFKA_BOOTSTRAP_SERVERS": shown["kafka"]["bootstrap_servers"],
    }
    assert by_env == {name: masked for name, (_, masked) in URL_SECRETS.items()}
    for secret in ("redispw", "llmpw", "tokenonly", "qdrantpw", "kafkapw"):
        assert secret not in repr(shown)


def test_masked_hides_secret_query_parameters_and_keeps_plain_urls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGSIFT_REDIS_URL", "redis://cache:6379/0?password=qpw&db=1")
    monkeypatch.setenv("RAGSIFT_QDRANT_URL", "http://qdrant:6333")
    shown = Settings.from_env().masked()
    assert shown["redis"]["url"] == "redis://cache:6379/0?password=**********&db=1"
    assert shown["qdrant"]["url"] == "http://qdrant:6333"  # nothing to hide: unchanged
    assert "qpw" not in repr(shown)


def test_settings_command_prints_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from ragsift.cli import app

    for name, (value, _) in URL_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAGSIFT_LLM_MODEL", "m")
    monkeypatch.setenv("RAGSIFT_LLM_API_KEY", "sk-llmkey")
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0, result.output
    assert "**********" in result.output
    for secret in ("redispw", "llmpw", "tokenonly", "qdrantpw", "kafkapw", "sk-llmkey"):
        assert secret not in result.output


def test_llm_deadline_must_be_below_the_handler_deadline() -> None:
    # Otherwise the runtime's deadline dead-letters a slow report before the
    # chat client's own deadline can fall back to an extractive one.
    from ragsift.settings import LimitSettings, LlmSettings

    with pytest.raises(ConfigurationError, match="RAGSIFT_LLM_DEADLINE_S"):
        Settings.from_env(
            llm=LlmSettings(deadline_s=30), limits=LimitSettings(handler_deadline_s=30)
        )
    assert Settings.from_env().llm.deadline_s < Settings.from_env().limits.handler_deadline_s


def test_feedback_drift_and_calibration_store_variables_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # RAGSIFT_CALIBRATION_STORE once collided with a Settings field of the same name
    # (read as that whole nested object): the worker refused to start.
    monkeypatch.setenv("RAGSIFT_CALIBRATION_STORE", "redis")
    monkeypatch.setenv("RAGSIFT_FEEDBACK_MIN_LABELS", "120")
    monkeypatch.setenv("RAGSIFT_DRIFT_PSI_THRESHOLD", "0.3")
    settings = Settings.from_env()
    assert settings.calibration.store == "redis"
    assert settings.feedback.min_labels == 120
    assert settings.drift.psi_threshold == 0.3
    monkeypatch.setenv("RAGSIFT_FEEDBACK_MIN_LABELS", "5")
    with pytest.raises(ConfigurationError, match="min_labels"):
        Settings.from_env()


@pytest.mark.parametrize(
    ("field", "value"),
    # the unanswerable share: auto, off or a share strictly inside (0, 1)
    [
        ("unanswerable_share", v)
        for v in ["1.5", "-0.1", "0", "1", "nan", "inf", "1e309", "AUTO", "auto\x1f", "", "０.５"]
    ]
    # the near-miss switch: auto or off (ADR 021), nothing else
    + [("near_miss", v) for v in ["maybe", "AUTO", "on", "0.5", "", "auto\x1f", "ａｕｔｏ"]],
)
def test_a_bad_mix_setting_is_one_configuration_error(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    monkeypatch.setenv(f"RAGSIFT_CONFIDENCE_{field.upper()}", value)
    with pytest.raises(ConfigurationError, match=field):
        Settings.from_env()


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("off", "off"), ("0.9", 0.9)])
def test_the_unanswerable_share_takes_auto_off_or_a_share(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: object
) -> None:
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_UNANSWERABLE_SHARE", value)
    assert Settings.from_env().confidence.unanswerable_share == expected


@pytest.mark.parametrize("value", ["auto", "off"])
def test_the_near_miss_switch_takes_auto_or_off(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_NEAR_MISS", value)
    assert Settings.from_env().confidence.near_miss == value


@pytest.mark.parametrize("value", ["auto", "off"])
def test_the_mix_lower_switch_takes_auto_or_off(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    assert Settings.from_env().confidence.mix_lower == "auto"
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_MIX_LOWER", value)
    assert Settings.from_env().confidence.mix_lower == value


def test_reprobe_settings_are_read_and_hostile_values_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST", "false")
    monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_FRACTION", "0.5")
    monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_QUIET_S", "2")
    calibration = Settings.from_env().calibration
    assert (calibration.reprobe_after_ingest, calibration.reprobe_fraction) == (False, 0.5)
    assert calibration.reprobe_quiet_s == 2.0
    hostile = (
        [
            ("RAGSIFT_CALIBRATION_REPROBE_FRACTION", value, "reprobe_fraction")
            for value in ("0", "-1", "nan", "1e400", "101", "zéro\x07", "[[[[1]]]]")
        ]
        + [
            ("RAGSIFT_CALIBRATION_REPROBE_QUIET_S", value, "reprobe_quiet_s")
            for value in ("-1", "inf", "1e9", "三十")
        ]
        + [("RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST", "perhaps", "reprobe_after_ingest")]
    )
    for name, value, field in hostile:
        monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_FRACTION", "0.5")
        monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_QUIET_S", "2")
        monkeypatch.setenv("RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST", "true")
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigurationError, match=field):
            Settings.from_env()


@pytest.mark.parametrize(
    "value", ["0", "-1", "257", "abc", "99999999999999999999", "1e400", "２", "", "1;rm -rf /"]
)
def test_a_hostile_edge_search_pool_size_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RAGSIFT_QDRANT_EDGE_SEARCH_THREADS", value)
    with pytest.raises(ConfigurationError, match="edge_search_threads"):
        Settings.from_env()


def test_the_edge_search_pool_size_is_unset_by_default_and_read_when_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings.from_env().qdrant.edge_search_threads is None
    monkeypatch.setenv("RAGSIFT_QDRANT_EDGE_SEARCH_THREADS", "256")
    assert Settings.from_env().qdrant.edge_search_threads == 256


def _refusal(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> str:
    """The error ``Settings.from_env`` refuses these variables with."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as err:
        Settings.from_env()
    return str(err.value)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (
            "RAGSIFT_CONFIDENCE_NEAR_MISS",
            "maybe",
            "RAGSIFT_CONFIDENCE_NEAR_MISS (confidence.near_miss): Input should be 'auto' or"
            " 'off' (got 'maybe')",
        ),
        (
            "RAGSIFT_CONFIDENCE_MIX_LOWER",
            "lower",
            "RAGSIFT_CONFIDENCE_MIX_LOWER (confidence.mix_lower): Input should be 'auto' or"
            " 'off' (got 'lower')",
        ),
        (  # set by its seed-A alias: both names it is read from are given
            "RAG_MIN_RESULTS",
            "x",
            "RAGSIFT_CONFIDENCE_MIN_RESULTS or RAG_MIN_RESULTS (confidence.min_results):",
        ),
        (
            "RAGSIFT_KAFKA_SECURITY_PROTOCOL",
            "TLS",
            "RAGSIFT_KAFKA_SECURITY_PROTOCOL (kafka.security_protocol):",
        ),
        (  # JSON that does not parse: it was pydantic-settings' "error parsing value for
            # field ... from source EnvSettingsSource", naming no variable
            "RAGSIFT_GUARDRAILS_COLLECTION_THRESHOLDS",
            "{legal: 0.9}",
            "RAGSIFT_GUARDRAILS_COLLECTION_THRESHOLDS (guardrails.collection_thresholds):"
            " not valid JSON (Expecting property name enclosed in double quotes",
        ),
        (  # a Service named ragsift-api, its link injected into every pod of the namespace
            "RAGSIFT_API_PORT",
            "tcp://10.96.0.12:8080",
            "RAGSIFT_API_PORT (api.port): Input should be a valid integer, unable to parse"
            " string as an integer; it looks like the variable Kubernetes sets for a Service"
            " of that name: set enableServiceLinks: false on the pod",
        ),
        (  # a check across concerns names its variables itself; no dump of every concern
            "RAGSIFT_LLM_DEADLINE_S",
            "999",
            "RAGSIFT_LLM_DEADLINE_S (999) must be below RAGSIFT_LIMITS_HANDLER_DEADLINE_S",
        ),
    ],
)
def test_a_bad_variable_is_one_line_naming_it_as_it_is_set(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    # It was pydantic's report: the model and field names, an input line and a URL.
    message = _refusal(monkeypatch, {variable: value})
    assert message.startswith(f"invalid ragsift settings: {says}"), message
    assert "\n" not in message
    assert "errors.pydantic.dev" not in message
    assert "KafkaSettings(" not in message


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        (  # a SASL password without its username: the check across fields got them all
            {
                "RAGSIFT_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "RAGSIFT_KAFKA_SASL_PASSWORD": "hunter2",
            },
            "RAGSIFT_KAFKA_* (kafka): RAGSIFT_KAFKA_SECURITY_PROTOCOL=SASL_SSL needs"
            " RAGSIFT_KAFKA_SASL_MECHANISM, RAGSIFT_KAFKA_SASL_USERNAME and"
            " RAGSIFT_KAFKA_SASL_PASSWORD (set: RAGSIFT_KAFKA_SECURITY_PROTOCOL='SASL_SSL',"
            " RAGSIFT_KAFKA_SASL_PASSWORD=<not shown>)",
        ),
        (
            {"RAGSIFT_REPORT_NONCE_KEY": "hunter2"},
            "RAGSIFT_REPORT_* (report): nonce_key must be at least 16 characters, got 7"
            " (set: RAGSIFT_REPORT_NONCE_KEY=<not shown>)",
        ),
        (
            {
                "RAGSIFT_AUDIT_HMAC_KEY": "hunter2",
                "RAGSIFT_AUDIT_RETRY_INITIAL_S": "9",
                "RAGSIFT_AUDIT_RETRY_MAX_S": "1",
            },
            "RAGSIFT_AUDIT_* (audit): retry_initial_s (9.0) must be <= retry_max_s (1.0)",
        ),
    ],
)
def test_a_check_across_variables_names_them_and_hides_secrets(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], says: str
) -> None:
    # It was "RAGSIFT_KAFKA_ (kafka.): ... (got {'sasl_password': 'hunter2', ...})": the
    # concern's whole input, a secret in clear, on stderr and into the logs.
    message = _refusal(monkeypatch, variables)
    assert message.startswith(f"invalid ragsift settings: {says}"), message
    assert "hunter2" not in message


def test_a_bad_value_is_echoed_without_its_credentials() -> None:
    from pydantic import Field, SecretStr, ValidationError
    from pydantic_settings import BaseSettings, SettingsConfigDict

    from ragsift.settings import _describe_settings_error

    class Probe(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="RAGSIFT_PROBE_")
        port: int = 1
        token: SecretStr = Field(default=SecretStr("long enough"), min_length=8)

    with pytest.raises(ValidationError) as err:
        Probe(port="redis://:hunter2@cache:6379", token="hunter3")
    message = _describe_settings_error(err.value, [Probe])
    assert "RAGSIFT_PROBE_PORT (probe.port)" in message
    assert "RAGSIFT_PROBE_TOKEN (probe.token)" in message
    assert "hunter2" not in message  # a URL's password is masked
    assert "hunter3" not in message  # a secret is never echoed, even a malformed one


@pytest.mark.parametrize(
    "variable", ["RAGSIFT_DATA_DIR", "RAGSIFT_CALIBRATION_STORE_DIR", "RAGSIFT_KAFKA_SSL_CAFILE"]
)
def test_an_empty_path_is_refused_not_read_as_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # RAGSIFT_DATA_DIR= (a compose file's ${VAR} of an unset one) wrote the index, the
    # audit trail and the stores into the folder the command ran in.
    message = _refusal(monkeypatch, {variable: " "})
    assert message.startswith(f"invalid ragsift settings: {variable} (")
    assert "an empty path; unset the variable for the default" in message
