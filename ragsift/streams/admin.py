"""Create the registry's topics on the broker before any worker subscribes.

A consumer subscribed to a topic that does not exist yet only notices it on
its next metadata refresh (minutes), so workers create every registered topic
up front, with the registry's partitions and retention/compaction settings.
Existing topics are left as they are; :func:`prepare_topics` says where one
lacks a setting ragsift relies on (a documents topic the broker made on first
use is neither compacted nor takes documents over 1 MiB), and how to set it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from ragsift.settings import KafkaSettings
from ragsift.streams.clients import admin_client
from ragsift.streams.topics import TOPICS, TopicSpec

__all__ = ["config_fix", "ensure_topics", "prepare_topics"]


async def ensure_topics(kafka: KafkaSettings) -> list[str]:
    """Create missing registry topics; return the names created."""
    created, _ = await prepare_topics(kafka, check=False)
    return created


async def prepare_topics(
    kafka: KafkaSettings, *, check: bool = True
) -> tuple[list[str], list[str]]:
    """Create missing registry topics, in one admin session with the check: the names
    created, and one line per existing topic that lacks a setting ragsift relies on
    (with ``check``). The settings read are compaction (the documents topic keeps each
    document by key; deleted by age, they are gone from a rebuilt index) and a message
    size under the registry's (a document over it is refused); each line names the
    ``kafka-configs.sh`` that sets it. Retention and what else an operator may have
    chosen are not read, and a topic whose settings cannot be read is not named."""
    prefix = kafka.topic_prefix
    admin = admin_client(kafka)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                spec.name(prefix),
                num_partitions=spec.partitions or kafka.partitions,
                replication_factor=kafka.replication_factor,
                topic_configs=spec.config(),
            )
            for spec in TOPICS.values()
            if spec.name(prefix) not in existing
        ]
        if wanted:
            # Another replica may create them first: the outcome is the same.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(wanted)
        checked = [
            spec
            for spec in TOPICS.values()
            if check
            and spec.name(prefix) in existing
            and (spec.cleanup_policy == "compact" or spec.max_message_bytes is not None)
        ]
        configs = await _configs(admin, [spec.name(prefix) for spec in checked])
    finally:
        await admin.close()
    notes = [note for spec in checked for note in _shortfalls(spec, prefix, configs)]
    return [t.name for t in wanted], notes


def config_fix(topic: str, setting: str, value: object) -> str:
    """The command that sets ``setting`` of ``topic`` to ``value``."""
    return (
        "kafka-configs.sh --bootstrap-server BROKER --alter --entity-type topics"
        f" --entity-name {topic} --add-config {setting}={value}"
    )


async def _configs(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each named topic's settings, where the broker gives them (advice only: a refusal
    or an error reads as nothing known)."""
    if not names:
        return {}
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        )
    except KafkaError:
        return {}
    # DescribeConfigs: per resource (error code, message, type, name, [(name, value, ...)])
    return {
        resource[3]: {entry[0]: entry[1] for entry in resource[4]}
        for response in responses
        for resource in response.resources
        if resource[0] == 0
    }


def _shortfalls(spec: TopicSpec, prefix: str, configs: dict[str, dict[str, Any]]) -> list[str]:
    name = spec.name(prefix)
    have = configs.get(name)
    if have is None:
        return []
    notes = []
    policy = have.get("cleanup.policy") or "delete"
    if spec.cleanup_policy == "compact" and "compact" not in policy.split(","):
        fix = config_fix(name, "cleanup.policy", "compact")
        notes.append(
            f"{name} is not compacted (cleanup.policy={policy}): its records are deleted by"
            f" age, and an index rebuilt from it loses them; {fix}"
        )
    size = str(have.get("max.message.bytes"))  # a number as text; anything else: unknown
    wanted = spec.max_message_bytes
    if wanted is not None and size.isascii() and size.isdigit() and int(size) < wanted:
        notes.append(
            f"{name} takes messages up to {size} bytes, under the {wanted} a document may"
            f" need; {config_fix(name, 'max.message.bytes', wanted)}"
        )
    return notes
