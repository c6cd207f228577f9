"""Create the registry's topics on the broker before any worker subscribes.

A consumer subscribed to a topic that does not exist yet only notices it on
its next metadata refresh (minutes), so workers create every registered topic
up front, with the registry's partitions and retention/compaction settings.
Existing topics are left as they are.
"""

from __future__ import annotations

import contextlib

from aiokafka.admin import NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from ragsift.settings import KafkaSettings
from ragsift.streams.clients import admin_client
from ragsift.streams.topics import TOPICS

__all__ = ["ensure_topics"]


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
