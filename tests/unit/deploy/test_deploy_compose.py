"""docker-compose.yml and the Dockerfile, checked without a Docker engine."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from deploy_support import (
    ALL_INTERFACES,
    API_KEYS_FILE,
    API_METRICS_PORT,
    API_QUERY_PORT,
    REPO,
    load_yaml,
    option_values,
    ragsift_command,
)

COMPOSE = REPO / "docker-compose.yml"
SCHEMA = REPO / "deploy" / "schemas" / "compose-spec.json"
# Images by role; each must be pinned to a version (no `latest`, no bare name).
REQUIRED_IMAGES = {
    "kafka": "apache/kafka",
    "kafka-exporter": "danielqsj/kafka-exporter",
    "qdrant": "qdrant/qdrant",
    "redis": "redis",
    "prometheus": "prom/prometheus",
    "grafana": "grafana/grafana",
}
RAGSIFT_SERVICES = {
    "api": [
        "api",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--metrics-host",
        "0.0.0.0",
        "--metrics-port",
        "9464",
    ],
    "retrieval-worker": ["worker", "retrieval"],
    "indexer-worker": ["worker", "indexer"],
    "report-worker": ["worker", "report"],
    "decision-worker": ["worker", "decision"],
    "calibration-worker": ["worker", "calibration"],
    "audit-worker": ["worker", "audit"],
}


def _compose() -> dict[str, Any]:
    return load_yaml(COMPOSE)


def test_compose_file_matches_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft201909Validator.check_schema(schema)
    errors = [
        f"{e.json_path}: {e.message}"
        for e in jsonschema.Draft201909Validator(schema).iter_errors(_compose())
    ]
    assert not errors, "\n".join(errors)


def test_schema_rejects_an_unknown_service_key() -> None:
    # Guards against a schema that accepts anything.
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    broken = _compose()
    broken["services"]["api"]["replicaz"] = 2
    assert not jsonschema.Draft201909Validator(schema).is_valid(broken)


@pytest.mark.parametrize(("service", "image"), sorted(REQUIRED_IMAGES.items()))
def test_third_party_images_are_pinned(service: str, image: str) -> None:
    ref = _compose()["services"][service]["image"]
    name, _, tag = ref.partition(":")
    assert name == image
    assert re.fullmatch(r"v?\d+\.\d+\.\d+(-[a-z0-9.]+)?", tag), f"{service}: pin {ref} to a version"


def test_ragsift_services_run_the_expected_commands() -> None:
    services = _compose()["services"]
    for name, command in RAGSIFT_SERVICES.items():
        service = services[name]
        assert service["command"] == command, name
        assert service["build"]["dockerfile"] == "Dockerfile"
        assert "healthcheck" in service, name
        env = service["environment"]
        assert env["RAGSIFT_QDRANT_MODE"] == "server"
        assert env["RAGSIFT_KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert services["retrieval-worker"]["deploy"]["replicas"] == 2


def test_each_worker_has_its_own_consumer_group() -> None:
    services = _compose()["services"]
    app_ids = [services[name]["environment"]["RAGSIFT_KAFKA_APP_ID"] for name in RAGSIFT_SERVICES]
    assert len(set(app_ids)) == len(app_ids)


def test_prometheus_scrapes_every_ragsift_service_and_the_exporter() -> None:
    config = load_yaml(REPO / "deploy" / "prometheus" / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    worker_names = jobs["ragsift-workers"]["dns_sd_configs"][0]["names"]
    assert set(worker_names) == {n for n in RAGSIFT_SERVICES if n != "api"}
    # /metrics is on the API's metrics port since issue 12; 8080 answers it 404.
    assert jobs["ragsift-api"]["static_configs"][0]["targets"] == [f"api:{API_METRICS_PORT}"]
    assert jobs["kafka-exporter"]["static_configs"][0]["targets"] == ["kafka-exporter:9308"]


def test_redis_keeps_its_lasting_state() -> None:
    # It ran as a disposable cache (allkeys-lru, --save ""), yet holds labels, the
    # results they join to, calibrations and index versions: a restart lost every
    # label, and an evicted index version let old cached results be read again.
    redis = _compose()["services"]["redis"]
    command = redis["command"]
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags["--maxmemory-policy"] == "volatile-lru"  # only keys with a TTL go
    assert flags["--appendonly"] == "yes"
    assert "--save" not in flags
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def test_kafka_runs_in_kraft_mode() -> None:
    env = _compose()["services"]["kafka"]["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "ZOOKEEPER" not in " ".join(env)


def test_dockerfile_is_multi_stage_non_root_with_healthcheck() -> None:
    lines = [
        line.strip()
        for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    froms = [line for line in lines if line.startswith("FROM ")]
    assert len(froms) >= 2, "multi-stage build expected"
    assert any(line.startswith("COPY --from=build") for line in lines)
    base = next(line for line in lines if line.startswith("ARG PYTHON_IMAGE="))
    assert re.fullmatch(r"ARG PYTHON_IMAGE=python:3\.11\.\d+-slim-\w+", base)
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users
    assert users[-1] not in {"root", "0", "0:0"}
    assert any(line.startswith("HEALTHCHECK ") for line in lines)
    assert 'ENTRYPOINT ["ragsift"]' in lines


def test_the_image_serves_on_every_interface_and_checks_the_api_admin_port() -> None:
    # ragsift binds loopback outside a container; the image must not, or nothing
    # outside the container reaches it. Health lives on the API's admin port.
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    for variable in ("RAGSIFT_API_HOST", "RAGSIFT_API_METRICS_HOST", "RAGSIFT_WORKER_WEB_HOST"):
        assert re.search(rf"\b{variable}=0\.0\.0\.0\b", text), variable
    assert "HEALTHCHECK_URL=http://127.0.0.1:9464/healthz" in text
    exposed = {
        port
        for line in text.splitlines()
        if line.startswith("EXPOSE ")
        for port in line.split()[1:]
    }
    assert {"8080", "9464", "6066"} <= exposed


def test_the_probe_vector_cache_is_kept_where_the_deployments_can_write() -> None:
    # Under a read-only root, a cache the indexer cannot write costs it 18 s of
    # embedding per process; it must sit in the data dir the manifests mount.
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    data = re.search(r"\bRAGSIFT_DATA_DIR=(\S+)", text)
    cache = re.search(r"\bRAGSIFT_CALIBRATION_PROBE_VECTORS_DIR=(\S+)", text)
    assert data
    assert cache
    assert cache.group(1).startswith(data.group(1).rstrip("/") + "/")
    pods = (REPO / "k8s" / "base" / "patches" / "pod-defaults.yaml").read_text(encoding="utf-8")
    assert f"mountPath: {data.group(1)}" in pods
    assert f"- {data.group(1)}" in (REPO / "docker-compose.yml").read_text(encoding="utf-8")


def test_dockerignore_keeps_the_build_context_small() -> None:
    rules = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert rules[0] == "**", "exclude everything, then allow what the image needs"
    assert {"!ragsift/", "!requirements-runtime.lock", "!pyproject.toml"} <= set(rules)


# Services whose ports may be published on every interface: the API (the product).
# Everything else (broker, vector store, cache, monitoring) has no authentication in
# this file, so it is published on the loopback interface only, if at all.
PUBLIC_SERVICES = {"api"}
LOOPBACK = "127.0.0.1"


def _published_host_ip(port: str | int | dict[str, Any]) -> str:
    """The host IP a compose port entry binds ("" = every interface)."""
    if isinstance(port, dict):
        return str(port.get("host_ip", ""))
    parts = str(port).rsplit(":", 2)
    return parts[0] if len(parts) == 3 else ""


def test_backing_services_are_not_published_on_all_interfaces() -> None:
    exposed = {
        f"{name}: {port}"
        for name, service in _compose()["services"].items()
        if name not in PUBLIC_SERVICES
        for port in service.get("ports", [])
        if _published_host_ip(port) != LOOPBACK
    }
    assert not exposed, f"published beyond {LOOPBACK}: {sorted(exposed)}"
    assert _compose()["services"]["api"]["ports"] == ["8080:8080"]


@pytest.mark.parametrize(
    ("port", "host_ip"),
    [("8080:8080", ""), ("127.0.0.1:6333:6333", LOOPBACK), (6333, ""), ({"host_ip": "::"}, "::")],
)
def test_host_ip_reading(port: str | int | dict[str, Any], host_ip: str) -> None:
    assert _published_host_ip(port) == host_ip


def test_report_secrets_come_from_the_environment_not_the_file() -> None:
    env = _compose()["services"]["report-worker"]["environment"]
    assert env["RAGSIFT_LLM_API_KEY"] == "${RAGSIFT_LLM_API_KEY:-}"
    assert env["RAGSIFT_REPORT_NONCE_KEY"] == "${RAGSIFT_REPORT_NONCE_KEY:-}"


def _api() -> dict[str, Any]:
    return dict(_compose()["services"]["api"])


def test_api_binds_every_interface_and_is_health_checked_on_the_metrics_port() -> None:
    api = _api()
    options = option_values(api["command"])
    env = api["environment"]
    host = options.get("--host", env.get("RAGSIFT_API_HOST"))
    metrics_host = options.get("--metrics-host", env.get("RAGSIFT_API_METRICS_HOST"))
    # Loopback binds would be unreachable through the published port and from Prometheus.
    assert (host, metrics_host) == (ALL_INTERFACES, ALL_INTERFACES)
    assert "--insecure-no-auth" not in api["command"]
    assert int(options.get("--port", API_QUERY_PORT)) == API_QUERY_PORT
    assert int(options.get("--metrics-port", API_METRICS_PORT)) == API_METRICS_PORT
    probe = " ".join(api["healthcheck"]["test"])
    assert f"http://127.0.0.1:{API_METRICS_PORT}/healthz" in probe
    assert f":{API_QUERY_PORT}/" not in probe
    assert {str(API_QUERY_PORT), str(API_METRICS_PORT)} <= set(api["expose"])
    # Metrics are not published to the host, only the query port.
    assert api["ports"] == [f"{API_QUERY_PORT}:{API_QUERY_PORT}"]


def test_api_keys_come_from_a_read_only_bind_docker_never_creates() -> None:
    api = _api()
    keys_file = api["environment"]["RAGSIFT_API_KEYS_FILE"]
    assert keys_file == API_KEYS_FILE
    [mount] = [
        v for v in api["volumes"] if isinstance(v, dict) and keys_file.startswith(v["target"] + "/")
    ]
    assert mount["type"] == "bind"
    assert mount["read_only"] is True
    # A missing source must stop `docker compose up`, not become an empty directory.
    assert mount["bind"]["create_host_path"] is False
    assert mount["source"] == "./api-keys"
    # The data dir is a tmpfs: a key written there would vanish on restart.
    assert not keys_file.startswith(api["environment"]["RAGSIFT_DATA_DIR"])


def test_api_with_the_compose_command_refuses_to_start_without_keys(tmp_path: Path) -> None:
    """The compose API with an empty keys directory exits with a message, never serves open."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAGSIFT_API_")},
        "RAGSIFT_API_KEYS_FILE": str(tmp_path / "api-keys" / "api-keys.json"),
        "RAGSIFT_DATA_DIR": str(tmp_path / "data"),
    }
    proc = subprocess.run(
        [*ragsift_command(), *_api()["command"]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    message = " ".join(proc.stderr.split())  # the console wraps long lines
    assert "no API keys" in message
    assert "ragsift keys create" in message
