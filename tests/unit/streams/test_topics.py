"""The topic registry covers every topic in ARCHITECTURE.md, with sane policies."""

from __future__ import annotations

import pytest

from ragsift.schemas import MAX_TEXT_CHARS, DocumentEvent, QueryEvent
from ragsift.streams.codec import MAX_PAYLOAD_BYTES
from ragsift.streams.topics import MAX_MESSAGE_BYTES, TOPICS, topic_name


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
        fields = (spec.key,) if isinstance(spec.key, str) else spec.key
        for field in fields:
            assert field in spec.model.model_fields, (spec.logical, field)


def test_a_compacted_topic_keeps_one_tenants_document_apart_from_anothers() -> None:
    """Compaction keeps the latest record per key: two tenants' "faq.md", or one's
    delete, must not compact away the other's document."""
    spec = TOPICS["documents"]
    acme = DocumentEvent(event_id="e1", tenant_id="acme", doc_id="faq.md", text="Returns: 30 days.")
    globex = DocumentEvent(event_id="e2", tenant_id="globex", doc_id="faq.md", op="delete")
    other = acme.model_copy(update={"collection": "manuals"})
    keys = {spec.key_of(e) for e in (acme, globex, other)}
    assert len(keys) == 3
    assert spec.key_of(acme) == "acme/default/faq.md"
    assert spec.key_name == "tenant_id/collection/doc_id"
    query = QueryEvent(query_id="q1", tenant_id="t", query="How long is the warranty?")
    assert TOPICS["queries"].key_of(query) == str(getattr(query, str(TOPICS["queries"].key)))


def test_documents_topic_is_compacted_and_prefix_applies() -> None:
    # compacted, and taking a document of MAX_TEXT_CHARS as UTF-8 (over Kafka's 1 MiB)
    assert TOPICS["documents"].config() == {
        "cleanup.policy": "compact",
        "max.message.bytes": str(MAX_MESSAGE_BYTES),
    }
    assert MAX_MESSAGE_BYTES > MAX_PAYLOAD_BYTES >= 4 * MAX_TEXT_CHARS
    assert "max.message.bytes" not in TOPICS["queries"].config()  # the broker's own
    assert topic_name("queries", "acme") == "acme.queries.v1"
    with pytest.raises(KeyError, match="unknown topic"):
        topic_name("nope")
