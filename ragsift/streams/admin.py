"""Create the registry's topics on the broker before any worker subscribes.

A consumer subscribed to a topic that does not exist yet only notices it on
its next metadata refresh (minutes), so workers create every registered topic
up front, with the registry's partitions and retention/compaction settings.
Existing topics are left as they are; :func:`topic_shortfalls` says where one
lacks a setting ragsift relies on (a documents topic the broker made on first
use is neither compacted nor takes documents over 1 MiB), and how to set it.
"""

from __future__ import annotations

import contextlib

from aiokafka.admin import NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from ragsift.settings import KafkaSettings
from ragsift.streams.clients import admin_client
from ragsift.streams.topics import TOPICS

__all__ = ["ensure_topics", "topic_shortfalls"]


async def ensure_topics(kafka: KafkaSettings) -> list[str]:
    """Create missing registry topics; return the names created."""
    admin = admin_client(kafka)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                spec.name(kafka.topic_prefix),
                num_partitions=spec.partitions or kafka.partitions,
                replication_factor=kafka.replication_factor,
                topic_configs=spec.config(),
            )
            for spec in TOPICS.values()
            if spec.name(kafka.topic_prefix) not in existing
        ]
        if not wanted:
            return []
        # Another replica may create them first: the outcome is the same.
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics(wanted)
        return [t.name for t in wanted]
    finally:
        await admin.close()


async def topic_shortfalls(kafka: KafkaSettings) -> list[str]:
    """One line per existing registry topic that lacks a setting ragsift relies on:
    compaction (the documents topic keeps each document by key; deleted by age, they
    are gone from a rebuilt index) or a message size under the registry's (a document
    over it is refused). Each names the ``kafka-configs.sh`` that sets it. Retention
    and other settings an operator may have chosen are not read."""
    prefix = kafka.topic_prefix
    admin = admin_client(kafka)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        specs = [
            spec
            for spec in TOPICS.values()
            if spec.name(prefix) in existing
            and (spec.cleanup_policy == "compact" or spec.max_message_bytes is not None)
        ]
        if not specs:
            return []
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, spec.name(prefix)) for spec in specs]
        )
    finally:
        await admin.close()
    # DescribeConfigs: per resource (error code, message, type, name, [(name, value, ...)])
    configs = {
        resource[3]: {entry[0]: entry[1] for entry in resource[4]}
        for response in responses
        for resource in response.resources
        if resource[0] == 0
    }
    notes = []
    for spec in specs:
        name = spec.name(prefix)
        have = configs.get(name)
        if have is None:
            continue  # not described (no permission): nothing known, nothing said
        fix = (
            "kafka-configs.sh --bootstrap-server BROKER --alter --entity-type topics"
            f" --entity-name {name} --add-config"
        )
        policy = have.get("cleanup.policy") or "delete"
        if spec.cleanup_policy == "compact" and "compact" not in policy.split(","):
            notes.append(
                f"{name} is not compacted (cleanup.policy={policy}): its records are deleted"
                f" by age, and an index rebuilt from it loses them; {fix} cleanup.policy=compact"
            )
        size = int(have.get("max.message.bytes") or 0)
        if spec.max_message_bytes is not None and size < spec.max_message_bytes:
            notes.append(
                f"{name} takes messages up to {size} bytes, under the {spec.max_message_bytes}"
                f" a document may need; {fix} max.message.bytes={spec.max_message_bytes}"
            )
    return notes
