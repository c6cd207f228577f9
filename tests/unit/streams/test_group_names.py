"""A worker whose consumer group does not name its topic prefix says so at start.

Groups are named by RAGSIFT_KAFKA_APP_ID. A staging deployment that changes only the
topic prefix would share every group with the default deployment on the same cluster.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragsift.settings import EmbedderSettings, KafkaSettings, Settings
from ragsift.streams.assembly import assemble, shared_group_warning


@pytest.mark.parametrize(
    ("group", "prefix", "warned"),
    [
        ("ragsift-retrieval", "ragsift", False),  # the default deployment
        ("ragsift-retrieval", "staging", True),
        ("staging-retrieval", "staging", False),  # the group names the prefix
        ("acme.prod-decision", "acme.prod", False),
        ("workers", "staging", True),
    ],
)
def test_which_groups_are_warned_about(group: str, prefix: str, warned: bool) -> None:
    assert (shared_group_warning(group, prefix) is not None) is warned


def test_the_warning_names_a_group_to_set() -> None:
    words = shared_group_warning("ragsift-retrieval", "staging")
    assert words is not None
    assert "'ragsift-retrieval' does not name the topic prefix 'staging'" in words
    assert "RAGSIFT_KAFKA_APP_ID, e.g. staging-retrieval" in words


async def test_a_worker_logs_it_at_assembly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        embedder=EmbedderSettings(kind="hashing"),
        kafka=KafkaSettings(topic_prefix="staging"),
    )
    with caplog.at_level(logging.WARNING, logger="ragsift.streams.assembly"):
        parts = assemble(["decision"], settings)
    await parts.close()
    assert parts.group_id == "ragsift-decision"  # unchanged: renaming would replay topics
    assert any("e.g. staging-decision" in r.getMessage() for r in caplog.records)
    caplog.clear()
    named = settings.model_copy(
        update={"kafka": KafkaSettings(topic_prefix="staging", app_id="staging-decision")}
    )
    with caplog.at_level(logging.WARNING, logger="ragsift.streams.assembly"):
        parts = assemble(["decision"], named)
    await parts.close()
    assert not [r for r in caplog.records if "topic prefix" in r.getMessage()]
