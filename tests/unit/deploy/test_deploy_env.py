"""Every ``RAGSIFT_*`` variable the deployment sets is one ragsift reads, set to a value it takes.

pydantic-settings ignores a variable it does not know (``extra="ignore"``), so a typo in
docker-compose.yml, a manifest or the image (``RAGSIFT_KAFKA_BOOTSRAP_SERVERS``) deploys
without a word and the service runs on the default. The names come from the files
themselves (compose ``environment``, the Dockerfile's ``ENV``, Kubernetes ``env`` and
ConfigMap literals, inline kustomize patches); every other mention of a name in the
deployment and build files (comments included) must also be one something reads.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import REPO, load_yaml, load_yaml_all

from ragsift.errors import ConfigurationError
from ragsift.settings import Settings
from ragsift.unknown_variables import unknown_variables
from tests.unit.test_docs_agree import NAME, PYTHON_READ, read_directly, setting_names

COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
MANIFESTS = sorted((REPO / "k8s").rglob("*.yaml"))
#: Files that may name a variable in prose or comments: each name must be read somewhere.
MENTIONING = [
    COMPOSE,
    DOCKERFILE,
    *MANIFESTS,
    *sorted((REPO / "deploy").rglob("*.yml")),
    *sorted((REPO / "deploy").rglob("*.yaml")),
    *sorted((REPO / "deploy").rglob("*.json")),
    *sorted(p for p in (REPO / "infra").rglob("*") if p.is_file()),
    REPO / "pyproject.toml",
    REPO / "Makefile",
    *sorted(REPO.glob(".env*")),
]
#: ``${VAR:-default}`` in a compose value, which compose replaces from the shell.
COMPOSE_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}")
#: Placeholder for a value Kubernetes takes from a Secret (long enough for every key check).
SECRET_PLACEHOLDER = "s" * 32


def runtime_variables() -> set[str]:
    """What a running ragsift reads: its settings, and the few the package reads itself."""
    direct = {
        match.group(1)
        for path in (REPO / "ragsift").rglob("*.py")
        for match in PYTHON_READ.finditer(path.read_text(encoding="utf-8"))
    }
    return setting_names() | direct


def _ragsift_services() -> dict[str, dict[str, Any]]:
    services = load_yaml(COMPOSE)["services"]
    return {n: s for n, s in services.items() if str(s.get("image", "")).startswith("ragsift")}


def _environment(service: dict[str, Any]) -> dict[str, str]:
    """A compose service's ``environment``, in either of its two forms."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def dockerfile_env() -> dict[str, str]:
    """The image's ``ENV`` variables (``ARG``s are build-time only and not set at run time)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    env: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["ENV"]:
            env.update(word.partition("=")[::2] for word in words[1:] if "=" in word)
    return env


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping of a YAML tree, inline kustomize patches parsed too."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nodes(item)
    elif isinstance(node, str) and "\n" in node and "RAGSIFT_" in node:
        try:  # an inline patch (JSON 6902 or strategic merge) is YAML in a string
            yield from _nodes(yaml.safe_load(node))
        except yaml.YAMLError:
            return  # prose: the mention check below still reads its names


def _names_set(node: dict[str, Any]) -> set[str]:
    """The variables one mapping sets: a container's ``env``, a generator's ``literals``,
    or a JSON 6902 operation on an ``env`` list."""
    names: set[str] = set()
    env = node.get("env")
    if isinstance(env, list):
        names.update(str(e["name"]) for e in env if isinstance(e, dict) and "name" in e)
    literals = node.get("literals")
    if isinstance(literals, list):
        names.update(str(literal).partition("=")[0] for literal in literals)
    if "op" in node and re.search(r"/env(/|$)", str(node.get("path", ""))):
        value = node.get("value")
        items = value if isinstance(value, list) else [value]
        names.update(str(i["name"]) for i in items if isinstance(i, dict) and "name" in i)
    return names


def manifest_variables() -> dict[str, set[str]]:
    """Variable -> the manifests that set it: container ``env``, ConfigMap ``data``,
    ``configMapGenerator`` literals and inline patches, in every file under k8s/."""
    found: dict[str, set[str]] = {}
    for path in MANIFESTS:
        where = str(path.relative_to(REPO))
        for doc in load_yaml_all(path.read_text(encoding="utf-8")):
            names = set(doc.get("data") or {}) if doc.get("kind") == "ConfigMap" else set()
            for node in _nodes(doc):
                names |= _names_set(node)
            for name in names:
                if name.startswith("RAGSIFT_"):
                    found.setdefault(name, set()).add(where)
    return found


def set_variables() -> dict[str, set[str]]:
    """Variable -> the deployment files that set it."""
    found = {name: {"Dockerfile"} for name in dockerfile_env() if name.startswith("RAGSIFT_")}
    for service, spec in _ragsift_services().items():
        for name in _environment(spec):
            if name.startswith("RAGSIFT_"):
                found.setdefault(name, set()).add(f"docker-compose.yml ({service})")
    for name, where in manifest_variables().items():
        found.setdefault(name, set()).update(where)
    return found


def test_the_deployment_files_are_read_at_all() -> None:
    found = set_variables()
    assert "Dockerfile" in found["RAGSIFT_DATA_DIR"]
    assert "docker-compose.yml (api)" in found["RAGSIFT_KAFKA_APP_ID"]
    assert "k8s/base/workers/retrieval.yaml" in found["RAGSIFT_KAFKA_APP_ID"]
    assert "k8s/base/patches/pod-defaults.yaml" in found["RAGSIFT_KAFKA_SASL_PASSWORD"]
    assert "k8s/overlays/dev/kustomization.yaml" in found["RAGSIFT_CONFIDENCE_SCORER"]
    assert "k8s/overlays/prod/kustomization.yaml" in found["RAGSIFT_KAFKA_SSL_CAFILE"]
    assert "RAGSIFT_SQUAD2_DIR" in runtime_variables()  # a direct read counts


def test_every_variable_the_deployment_sets_is_one_ragsift_reads() -> None:
    known = runtime_variables()
    unread = {name: sorted(where) for name, where in set_variables().items() if name not in known}
    assert unread == {}, f"set for ragsift, read by nothing (a typo?): {unread}"


def test_no_variable_the_deployment_sets_is_warned_of_at_start_up() -> None:
    """The start-up warning of a variable no setting reads (ragsift.unknown_variables)
    stays quiet on every deployment file, and every variable the image or compose sets."""
    environ = {name: "" for name in set_variables()}
    environ |= dockerfile_env()
    for spec in _ragsift_services().values():
        environ |= _environment(spec)
    assert "RAGSIFT_KAFKA_APP_ID" in environ
    assert unknown_variables(environ) == []


def test_the_services_script_exports_only_what_a_setting_reads(tmp_path: Path) -> None:
    """``eval "$(scripts/services env)"`` (scripts/test, the README) exports the
    settings that point ragsift at the local Kafka and Redis, and nothing no setting
    reads: such a name is set for nothing (a script reading it would miss a deployment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGSIFT_", "RAG_"))}
    env |= {"RAGSIFT_RUN_DIR": str(tmp_path), "RAGSIFT_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "services"), "env"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    exported = dict(re.findall(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", out, re.M))
    assert exported["RAGSIFT_KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:19092"
    assert exported["RAGSIFT_REDIS_URL"] == "redis://127.0.0.1:16379/0"
    assert sorted(set(exported) - setting_names()) == []


def test_a_misspelt_variable_is_caught() -> None:
    # Guards the test above against a known set that takes anything, and the reading
    # of a JSON 6902 patch that adds a variable to a container.
    patch = "- op: add\n  path: /spec/template/spec/containers/0/env/-\n  value:\n"
    patch += "    name: RAGSIFT_API_CONSOLEE\n    value: 'false'\n"
    kustomization = {"patches": [{"target": {"kind": "Deployment"}, "patch": patch}]}
    assert set().union(*map(_names_set, _nodes(kustomization))) == {"RAGSIFT_API_CONSOLEE"}
    assert "RAGSIFT_KAFKA_BOOTSRAP_SERVERS" not in runtime_variables()
    assert "RAGSIFT_KAFKA" not in runtime_variables()  # a prefix is no variable
    # ... and guards the start-up check above against one that reports nothing.
    [typo] = unknown_variables({"RAGSIFT_API_CONSOLEE": "false"})
    assert typo.suggestion == "RAGSIFT_API_CONSOLE"


def _build_args() -> set[str]:
    return set(re.findall(r"^ARG\s+([A-Z0-9_]+)", DOCKERFILE.read_text(encoding="utf-8"), re.M))


def test_every_variable_named_in_the_deployment_and_build_files_is_read() -> None:
    """Comments too: a comment that names a variable sends the reader to set it."""
    known = setting_names() | read_directly() | _build_args()
    unknown: dict[str, set[str]] = {}
    for path in MENTIONING:
        for match in NAME.finditer(path.read_text(encoding="utf-8")):
            name = match.group(0)
            if name.endswith("_*"):  # RAGSIFT_API_JWT_* stands for every name it starts
                if not any(k.startswith(name[:-1]) for k in known):
                    unknown.setdefault(name, set()).add(str(path.relative_to(REPO)))
            elif name not in known:
                unknown.setdefault(name, set()).add(str(path.relative_to(REPO)))
    assert unknown == {}, f"named in deployment or build files, read by nothing: {unknown}"


def _settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in list(os.environ):
        if name.startswith(("RAGSIFT_", "RAG_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


@pytest.mark.parametrize("service", sorted(_ragsift_services()))
def test_each_compose_service_starts_on_valid_settings(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's ENV under the service's environment, ``${VAR:-}`` as compose reads it
    with the variable unset: a value the settings refuse stops the service at start."""
    env = {
        **dockerfile_env(),
        **{
            name: COMPOSE_DEFAULT.sub(r"\1", value)
            for name, value in _environment(_ragsift_services()[service]).items()
        },
    }
    settings = _settings_from(env, monkeypatch)
    assert settings.kafka.app_id == env["RAGSIFT_KAFKA_APP_ID"]


def _deployment_env(resources: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Each Deployment's container environment: its ConfigMaps, then its ``env``."""
    config_maps = {
        r["metadata"]["name"]: r.get("data") or {} for r in resources if r["kind"] == "ConfigMap"
    }
    found = {}
    for resource in resources:
        if resource["kind"] != "Deployment":
            continue
        [container] = resource["spec"]["template"]["spec"]["containers"]
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            env.update(config_maps[source["configMapRef"]["name"]])
        for item in container.get("env", []):
            env[item["name"]] = item.get("value", SECRET_PLACEHOLDER)
        found[resource["metadata"]["name"]] = env
    return found


def test_each_kubernetes_deployment_starts_on_valid_settings(
    overlay: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    deployments = _deployment_env(overlay)
    assert len(deployments) == 7  # the API and six workers
    for name, env in deployments.items():
        with monkeypatch.context() as patch:
            settings = _settings_from(env, patch)
        assert settings.kafka.app_id == env["RAGSIFT_KAFKA_APP_ID"] == name, name


def test_a_value_the_settings_refuse_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**dockerfile_env(), "RAGSIFT_KAFKA_PARTITIONS": "eight"}
    with pytest.raises(ConfigurationError, match="RAGSIFT_KAFKA_PARTITIONS"):
        _settings_from(env, monkeypatch)


def test_dockerfile_env_reads_continued_lines() -> None:
    env = dockerfile_env()
    assert env["RAGSIFT_API_HOST"] == "0.0.0.0"
    assert "RAGSIFT_UID" not in env  # an ARG
    assert Path(env["RAGSIFT_DATA_DIR"]).is_absolute()
