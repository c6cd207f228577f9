"""Helpers for the deployment tests: finding the tools, reading manifests, PromQL names.

The tools (promtool, kustomize, the CRD validators) are installed by
``scripts/deploy-tools install`` into ``${RAGSIFT_CACHE_DIR:-~/.cache/ragsift}``.
A missing tool skips its tests on a developer's machine and fails them under
``CI`` or ``RAGSIFT_REQUIRE_SERVICES``, like the integration tests' services.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

REPO = Path(__file__).resolve().parents[3]
INSTALL_HINT = "run scripts/deploy-tools install"

# Metrics that appear in rules or the dashboard but are not exported by ragsift.
EXTERNAL_METRICS = {
    "kafka_consumergroup_lag": "Kafka exporter (danielqsj/kafka-exporter in compose, "
    "Strimzi's kafkaExporter on Kubernetes)",
    "up": "Prometheus itself, one series per scrape target",
}

# PromQL words that look like identifiers but are not metric names.
_PROMQL_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
    "atan2",
}
# Grafana's variables, replaced with something PromQL accepts.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$tenant": ".*",
}


def cache_dir() -> Path:
    """Where scripts/deploy-tools installs (same default as the script)."""
    return Path(os.environ.get("RAGSIFT_CACHE_DIR") or Path.home() / ".cache" / "ragsift")


def tools_required() -> bool:
    """True under CI or RAGSIFT_REQUIRE_SERVICES: a missing tool fails, never skips."""
    for var in ("CI", "RAGSIFT_REQUIRE_SERVICES"):
        if os.environ.get(var, "").strip().lower() not in ("", "0", "false", "no"):
            return True
    return False


def missing(what: str) -> None:
    """Skip, or fail under CI, naming the install command."""
    message = f"{what} not found; {INSTALL_HINT}"
    if tools_required():
        pytest.fail(message)
    pytest.skip(message)


def tool(name: str) -> str:
    """Path of a tool: the cache's pinned copy first, then PATH."""
    cached = cache_dir() / "bin" / name
    if cached.is_file() and os.access(cached, os.X_OK):
        return str(cached)
    found = shutil.which(name)
    if found is None:
        missing(f"{name} (looked in {cached.parent} and on PATH)")
    return str(found)


def run(args: list[str], *, stdin: str | None = None, cwd: Path = REPO) -> str:
    """Run a command; fail the test with its output when it exits non-zero."""
    proc = subprocess.run(
        args, input=stdin, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited {proc.returncode}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout


def load_yaml(path: Path) -> Any:
    """One YAML document."""
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_yaml_all(text: str) -> list[dict[str, Any]]:
    """Every non-empty document of a YAML stream."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def ragsift_command() -> list[str]:
    """How to run the ``ragsift`` CLI of this interpreter's environment."""
    script = Path(sys.executable).with_name("ragsift")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from ragsift.cli import main; sys.exit(main())"]


def substitute_grafana_variables(expr: str) -> str:
    """A dashboard expression with Grafana's variables replaced (longest first)."""
    for var in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(var, GRAFANA_VARIABLES[var])
    return expr


def promql_metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (a small tokenizer, not a full parser).

    Removes string literals, label matchers, range/subquery brackets, the label
    lists of by/without/on/ignoring/group_*, offsets and numbers; what remains
    that is an identifier not followed by ``(`` (a function or aggregation) and
    not a keyword is a metric name.
    """
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _PROMQL_KEYWORDS:
            continue
        names.add(word)
    return names


def process_registries() -> list[CollectorRegistry]:
    """The registry each kind of ragsift process serves on ``/metrics``, its metrics
    registered as that process registers them: a worker's container (with the audit
    worker's metrics on it), and the API's, whose :class:`~ragsift.api.app.QueryApi`
    adds its ``ragsift_api_*`` metrics and, with the console on, the console's.

    Nothing connects: the API only reaches Kafka once started.
    """
    from ragsift.api.app import QueryApi
    from ragsift.api.auth import Authenticator
    from ragsift.api.console import ConsoleHub
    from ragsift.audit import AuditMetrics
    from ragsift.observability.metrics import Metrics
    from ragsift.settings import KafkaSettings

    worker = Metrics()
    AuditMetrics(worker)
    api = Metrics()
    QueryApi(
        KafkaSettings(),
        auth=Authenticator(None, None, insecure=True),
        metrics=api,
        hub=ConsoleHub(backlog=1),
    )
    return [worker.registry, api.registry]


def exported_metric_names() -> set[str]:
    """Every series name a ragsift process can export (:func:`process_registries`).

    Labelled metrics have no samples until used, so names follow prometheus-client's
    suffix rules per metric type instead of being read from samples.
    """
    suffixes = {
        "counter": ("_total", "_created"),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
        "stateset": ("",),
        "unknown": ("",),
    }
    names: set[str] = set()
    for registry in process_registries():
        for family in registry.collect():
            names.update(family.name + suffix for suffix in suffixes[family.type])
            names.update(sample.name for sample in family.samples)
    return names


def service_commands(argvs: Iterable[list[str]]) -> set[tuple[str, ...]]:
    """The command path of each ragsift argv: leading words up to the first option."""
    commands = set()
    for argv in argvs:
        path = []
        for word in argv:
            if word.startswith("-"):
                break
            path.append(word)
        if path:
            commands.add(tuple(path))
    return commands


# Where the API's hardened binds must point in a container (issue 12): every
# interface for both the query port and the metrics/health port.
API_QUERY_PORT = 8080
API_METRICS_PORT = 9464
ALL_INTERFACES = "0.0.0.0"
API_KEYS_FILE = "/etc/ragsift/api-keys/api-keys.json"


def option_values(argv: list[str]) -> dict[str, str]:
    """``--name value`` pairs of an argv (flags without a value map to "")."""
    options: dict[str, str] = {}
    for i, word in enumerate(argv):
        if not word.startswith("--"):
            continue
        name, eq, value = word.partition("=")
        if eq:
            options[name] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            options[name] = argv[i + 1]
        else:
            options[name] = ""
    return options


#: Labels Prometheus adds to every scraped series (the target's).
TARGET_LABELS = frozenset({"job", "instance"})
#: The label names of the metrics in EXTERNAL_METRICS (beyond the target's).
EXTERNAL_METRIC_LABELS: dict[str, frozenset[str]] = {
    "kafka_consumergroup_lag": frozenset({"consumergroup", "topic", "partition"}),
    "up": frozenset(),
}
#: The labels prometheus-client adds to a series of a metric type (the bucket's bound).
_SUFFIX_LABELS = {"_bucket": frozenset({"le"})}


def exported_metric_labels() -> dict[str, frozenset[str]]:
    """Every series name ragsift can export (as ``exported_metric_names``) -> its label
    names, the target's labels included, and those of EXTERNAL_METRICS."""
    labels_of = {
        family.name: frozenset(getattr(collector, "_labelnames", ()))
        # labelled metrics have no samples until used: their names come from the collectors
        for registry in process_registries()
        for collector in registry._collector_to_names
        for family in collector.describe()
    }
    found = {
        name: labels | TARGET_LABELS | EXTERNAL_METRIC_LABELS.get(name, frozenset())
        for name, labels in EXTERNAL_METRIC_LABELS.items()
    }
    for name in exported_metric_names():
        family = next(f for f in sorted(labels_of, key=len, reverse=True) if name.startswith(f))
        suffix = name.removeprefix(family)
        found[name] = labels_of[family] | TARGET_LABELS | _SUFFIX_LABELS.get(suffix, frozenset())
    return found
