"""The topic registry covers every topic in ARCHITECTURE.md, with sane policies."""

from __future__ import annotations

import pytest

from ragsift.streams.topics import TOPICS, topic_name


def test_every_architecture_topic_is_registered() -> None:
    names = {spec.name() for spec in TOPICS.values()}
    assert names == {
        f"ragsift.{n}.v1"
        for n in (
            "queries",
            "retrievals",
            "reports",
            "decisions",
            "review",
            "audit",
            "deadletter",
            "documents",
            "feedback",
        )
    }


def test_keys_are_fields_of_their_contract() -> None:
    for spec in TOPICS.values():
        assert spec.key in spec.model.model_fields, (spec.logical, spec.key)


def test_documents_topic_is_compacted_and_prefix_applies() -> None:
    assert TOPICS["documents"].config() == {"cleanup.policy": "compact"}
    assert topic_name("queries", "acme") == "acme.queries.v1"
    with pytest.raises(KeyError, match="unknown topic"):
        topic_name("nope")
