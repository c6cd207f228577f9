"""The ragsift commands the deployment runs, and the generated KafkaTopic resources."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from deploy_support import REPO, load_yaml, load_yaml_all, ragsift_command, service_commands

from ragsift.deploy_manifests import strimzi_topics, to_yaml, write_strimzi_topics
from ragsift.streams.topics import TOPICS

KAFKA_TOPICS = REPO / "k8s" / "base" / "kafka-topics.yaml"
# Commands the deployment uses that are not service commands (topics listing, manifest generator).
EXTRA_COMMANDS = {("topics",), ("k8s", "topics")}


def _compose_argvs() -> list[list[str]]:
    services = load_yaml(REPO / "docker-compose.yml")["services"]
    return [s["command"] for s in services.values() if s.get("image", "").startswith("ragsift")]


def _k8s_argvs() -> list[list[str]]:
    argvs = []
    for path in sorted((REPO / "k8s").rglob("*.yaml")):
        for doc in load_yaml_all(path.read_text(encoding="utf-8")):
            if doc.get("kind") != "Deployment":
                continue
            # Patches (k8s/**/patches, overlay patches) are partial Deployments: no image.
            for container in doc["spec"]["template"]["spec"].get("containers", []):
                if container.get("image", "").split(":")[0].endswith("ragsift"):
                    argvs.append(container["args"])
    return argvs


def _commands() -> list[tuple[str, ...]]:
    return sorted(service_commands(_compose_argvs() + _k8s_argvs()) | EXTRA_COMMANDS)


def test_compose_and_k8s_run_the_same_commands() -> None:
    assert service_commands(_compose_argvs()) == service_commands(_k8s_argvs())
    assert len(service_commands(_compose_argvs())) == 7  # api + six workers


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_ragsift_command_exists(command: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [*ragsift_command(), *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, f"ragsift {' '.join(command)} --help failed:\n{proc.stderr}"
    assert "Usage" in proc.stdout


def test_every_option_the_deployment_passes_is_known_to_the_cli() -> None:
    """An option --help does not list (a typo, a renamed flag) would crash-loop the pod."""
    used: dict[tuple[str, ...], set[str]] = {}
    for argv in _compose_argvs() + _k8s_argvs():
        # One --help per top-level command: every worker shares `ragsift worker`'s options.
        [command] = service_commands([argv[:1]])
        used.setdefault(command, set()).update(w.split("=")[0] for w in argv if w.startswith("--"))
    assert used[("api",)] >= {"--host", "--metrics-host"}, "the API must bind beyond loopback"
    for command, options in sorted(used.items()):
        proc = subprocess.run(
            [*ragsift_command(), *command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert proc.returncode == 0, proc.stderr
        listed = set(re.findall(r"--[a-z][a-z0-9-]*", proc.stdout))
        assert options <= listed, f"ragsift {' '.join(command)}: unknown {sorted(options - listed)}"


def test_deployed_workers_are_known_to_the_cli() -> None:
    # `ragsift worker NAME... --help` succeeds for any NAME (Typer shows help
    # before checking arguments), so the names are checked against the CLI's table.
    from ragsift.streams.worker import WORKER_NAMES

    deployed = {c[1] for c in _commands() if c[0] == "worker" and len(c) > 1}
    assert deployed, "no worker commands found in compose or k8s"
    unknown = sorted(deployed - set(WORKER_NAMES))
    assert not unknown, f"deployed workers the CLI does not know: {unknown} (known: {WORKER_NAMES})"


def test_kafka_topics_yaml_is_current() -> None:
    committed = load_yaml_all(KAFKA_TOPICS.read_text(encoding="utf-8"))
    assert committed == strimzi_topics(), (
        "k8s/base/kafka-topics.yaml is stale: run"
        " `ragsift k8s topics --out k8s/base/kafka-topics.yaml`"
    )


def test_one_topic_resource_per_registered_topic() -> None:
    resources = strimzi_topics(prefix="acme", partitions=12, replicas=1, cluster="c1")
    assert [r["spec"]["topicName"] for r in resources] == [s.name("acme") for s in TOPICS.values()]
    for resource, spec in zip(resources, TOPICS.values(), strict=True):
        assert resource["metadata"]["labels"]["strimzi.io/cluster"] == "c1"
        assert resource["spec"]["partitions"] == (spec.partitions or 12)
        assert resource["spec"]["config"]["cleanup.policy"] == spec.cleanup_policy
        assert resource["spec"]["config"]["min.insync.replicas"] == "1"
    documents = next(r for r in resources if r["spec"]["topicName"] == "acme.documents.v1")
    assert "retention.ms" not in documents["spec"]["config"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"partitions": 0}, "partitions must be >= 1, got 0"),
        ({"replicas": 0}, "replicas must be >= 1, got 0"),
        ({"cluster": ""}, "cluster must be"),
    ],
)
def test_generator_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        strimzi_topics(**kwargs)  # type: ignore[arg-type]


def test_to_yaml_round_trips_and_quotes_what_yaml_would_retype() -> None:
    docs = [{"a": {"b": "604800000", "c": 3, "d": "yes", "e": "x y", "f": "kafka.strimzi.io/v1"}}]
    text = to_yaml(docs)
    assert list(yaml.safe_load_all(text)) == docs
    assert 'b: "604800000"' in text
    assert 'd: "yes"' in text
    assert "f: kafka.strimzi.io/v1" in text


def test_write_strimzi_topics_writes_a_loadable_file(tmp_path: Path) -> None:
    out = write_strimzi_topics(tmp_path / "k8s" / "topics.yaml", replicas=1)
    assert load_yaml_all(out.read_text(encoding="utf-8")) == strimzi_topics(replicas=1)
    assert out.read_text(encoding="utf-8").startswith("# Generated from ragsift/streams/topics.py")
