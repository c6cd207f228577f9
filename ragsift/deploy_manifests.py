"""Kubernetes manifests generated from ragsift's own tables (the topic registry).

``k8s/base/kafka-topics.yaml`` is written by :func:`write_strimzi_topics`
(``ragsift k8s topics``) and checked against it by a unit test, so a topic added
to the registry cannot be forgotten in the cluster. No YAML library is needed:
the manifests are plain nested mappings of strings and integers, emitted by
:func:`to_yaml`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragsift.streams.topics import TOPICS

__all__ = [
    "DEFAULT_CLUSTER",
    "DEFAULT_PARTITIONS",
    "DEFAULT_PREFIX",
    "DEFAULT_REPLICAS",
    "STRIMZI_API_VERSION",
    "strimzi_topics",
    "to_yaml",
    "write_strimzi_topics",
]

STRIMZI_API_VERSION = "kafka.strimzi.io/v1beta2"
DEFAULT_PREFIX = "ragsift"
#: Same as ``KafkaSettings.partitions``; KEDA's maxReplicaCount must not exceed it.
DEFAULT_PARTITIONS = 8
#: Production default: three brokers; the dev overlay patches it down to 1.
DEFAULT_REPLICAS = 3
#: Name of the Strimzi ``Kafka`` resource the topic operator manages.
DEFAULT_CLUSTER = "ragsift-kafka"

_HEADER = (
    "# Generated from ragsift/streams/topics.py by `ragsift k8s topics`; do not edit.\n"
    "# tests/unit/deploy checks that this file is current.\n"
)
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
# What a worker's RAGSIFT_KAFKA_TOPIC_PREFIX accepts (ragsift.settings), and Kafka's
# longest topic name.
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+$")
_MAX_TOPIC_NAME = 249
# A Kubernetes object name that is also a label value (Strimzi labels each topic with
# its cluster's name): a DNS-1123 label.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def strimzi_topics(
    prefix: str = DEFAULT_PREFIX,
    partitions: int = DEFAULT_PARTITIONS,
    replicas: int = DEFAULT_REPLICAS,
    cluster: str = DEFAULT_CLUSTER,
) -> list[dict[str, Any]]:
    """One Strimzi ``KafkaTopic`` per registered topic, in registry order.

    ``partitions`` applies to topics whose spec leaves it unset. With producers
    waiting for all in-sync replicas (``acks=-1``), ``min.insync.replicas`` of
    2 (or fewer when there are fewer replicas) makes a write survive one broker.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if not _DNS_LABEL.match(cluster):
        raise ValueError(
            f"cluster must be a Strimzi Kafka resource's name (lower-case letters, digits"
            f" and '-', starting and ending with a letter or digit, at most 63), got {cluster!r}"
        )
    if not _PREFIX.match(prefix):
        raise ValueError(
            f"prefix must be letters, digits, '.', '_' or '-' (as RAGSIFT_KAFKA_TOPIC_PREFIX),"
            f" got {prefix!r}"
        )
    if not prefix[0].isalnum():  # the resource names are the topic names in dashes
        raise ValueError(
            f"prefix must start with a letter or digit: topics named {prefix}.… would get"
            f" Kubernetes names starting with '-', got {prefix!r}"
        )
    resources: list[dict[str, Any]] = []
    for spec in TOPICS.values():
        name = spec.name(prefix)
        if len(name) > _MAX_TOPIC_NAME:
            raise ValueError(
                f"prefix is too long: topic {name[:40]}... would be {len(name)} characters,"
                f" Kafka's limit is {_MAX_TOPIC_NAME}"
            )
        resource = name.replace(".", "-").replace("_", "-").lower()
        config: dict[str, Any] = dict(spec.config())
        config["min.insync.replicas"] = str(min(2, replicas))
        resources.append(
            {
                "apiVersion": STRIMZI_API_VERSION,
                "kind": "KafkaTopic",
                "metadata": {
                    # Resource names use dashes; the Kafka name stays in topicName.
                    "name": resource,
                    "labels": {
                        "strimzi.io/cluster": cluster,
                        "app.kubernetes.io/part-of": "ragsift",
                        "ragsift.io/topic": spec.logical,
                    },
                },
                "spec": {
                    "topicName": name,
                    "partitions": spec.partitions or partitions,
                    "replicas": replicas,
                    "config": config,
                },
            }
        )
    return resources


def to_yaml(documents: list[dict[str, Any]]) -> str:
    """Block-style YAML for mappings of strings, integers and nested mappings."""
    parts = []
    for doc in documents:
        lines: list[str] = []
        _emit(doc, 0, lines)
        parts.append("\n".join(lines) + "\n")
    return "---\n".join(parts)


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        raise TypeError(f"only strings and integers are emitted, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
            return value
        return json.dumps(value)  # a JSON string is a valid double-quoted YAML scalar
    raise TypeError(f"only strings and integers are emitted, got {type(value).__name__}")


def _emit(mapping: Mapping[str, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            lines.append(f"{pad}{_scalar(key)}:")
            _emit(value, indent + 2, lines)
        else:
            lines.append(f"{pad}{_scalar(key)}: {_scalar(value)}")


def write_strimzi_topics(
    path: Path | str,
    *,
    prefix: str = DEFAULT_PREFIX,
    partitions: int = DEFAULT_PARTITIONS,
    replicas: int = DEFAULT_REPLICAS,
    cluster: str = DEFAULT_CLUSTER,
) -> Path:
    """Write the ``KafkaTopic`` resources to ``path`` (multi-document YAML); return it."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = _HEADER + to_yaml(strimzi_topics(prefix, partitions, replicas, cluster))
    out.write_text(text, encoding="utf-8")
    return out
