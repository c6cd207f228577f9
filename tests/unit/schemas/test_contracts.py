"""The wire contracts: limits at the boundary, ids, CloudEvents, JSON Schema export."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from ragsift.schemas import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_VECTOR_DIM,
    DeadLetter,
    DocumentEvent,
    EvidenceData,
    EvidenceEvent,
    EvidenceType,
    QueryEvent,
    derive_id,
    json_schema_documents,
)
from ragsift.schemas.registry import JSON_DIR


def make_query(**overrides: object) -> QueryEvent:
    fields: dict[str, object] = {"query_id": "q-1", "tenant_id": "acme", "query": "refund policy?"}
    fields.update(overrides)
    return QueryEvent.model_validate(fields)


def error_text(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return str(exc.value)


def test_minimal_query_gets_defaults() -> None:
    q = make_query()
    assert q.schema_version == "1"
    assert q.mode == "hybrid"
    assert q.selection is None
    assert q.created_at.tzinfo is not None


@pytest.mark.parametrize("k", [0, MAX_K + 1, -3])
def test_k_out_of_range_names_field(k: int) -> None:
    with pytest.raises(ValidationError) as exc:
        make_query(k=k)
    assert "k" in [e["loc"][0] for e in exc.value.errors()]


def test_query_too_long_is_rejected() -> None:
    make_query(query="x" * MAX_QUERY_CHARS)
    with pytest.raises(ValidationError) as exc:
        make_query(query="x" * (MAX_QUERY_CHARS + 1))
    assert "query" in error_text(exc)


def test_blank_query_is_rejected() -> None:
    with pytest.raises(ValidationError, match="non-whitespace"):
        make_query(query="   ")


@pytest.mark.parametrize("tenant", ["", "a b", "x" * 65, "-lead", "ten/ant", "é"])
def test_bad_tenant_ids(tenant: str) -> None:
    with pytest.raises(ValidationError, match="tenant_id must match"):
        make_query(tenant_id=tenant)


@pytest.mark.parametrize("tenant", ["a", "acme-corp", "T_1.eu", "x" * 64])
def test_good_tenant_ids(tenant: str) -> None:
    assert make_query(tenant_id=tenant).tenant_id == tenant


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_vector_is_rejected(bad: float) -> None:
    with pytest.raises(ValidationError, match="vector must be finite") as exc:
        make_query(vector=[0.1, bad, 0.2], embedder_id="e")
    assert "index 1" in error_text(exc)


def test_first_non_finite_component_is_named() -> None:
    with pytest.raises(ValidationError, match=r"got inf at index 2"):
        make_query(vector=[0.1, 0.2, math.inf, math.nan], embedder_id="e")


def test_huge_finite_components_are_accepted() -> None:
    # Their sum overflows to inf: the fast check must not mistake that for a bad component.
    assert make_query(vector=[1e308, 1e308, -1e308], embedder_id="e").vector == [
        1e308,
        1e308,
        -1e308,
    ]


def test_vector_dimension_limits() -> None:
    with pytest.raises(ValidationError, match="vector dimension"):
        make_query(vector=[], embedder_id="e")
    with pytest.raises(ValidationError, match="vector dimension"):
        make_query(vector=[0.0] * (MAX_VECTOR_DIM + 1), embedder_id="e")


def test_vector_needs_embedder_id() -> None:
    with pytest.raises(ValidationError, match="embedder_id is required"):
        make_query(vector=[0.1, 0.2])


def test_unknown_fields_and_other_major_versions_are_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        make_query(surprise=1)
    with pytest.raises(ValidationError, match=r"schema_version must be 1\.x"):
        make_query(schema_version="2")
    assert make_query(schema_version="1.3").schema_version == "1.3"


def test_derived_ids_are_deterministic_and_distinct() -> None:
    assert derive_id("q-1", "retrieval") == derive_id("q-1", "retrieval")
    assert derive_id("q-1", "retrieval") != derive_id("q-1", "report")
    assert derive_id("q-1", "retrieval") != derive_id("q-2", "retrieval")


def test_evidence_is_a_cloudevent_with_stable_id() -> None:
    data = EvidenceData(
        query_id="q-1", tenant_id="acme", summary="low", confidence=0.41, threshold=0.7
    )
    a = EvidenceEvent.for_query(EvidenceType.ADVISORY_LOW_CONFIDENCE, data, source="/w/retrieval")
    b = EvidenceEvent.for_query(EvidenceType.ADVISORY_LOW_CONFIDENCE, data, source="/w/retrieval")
    other = EvidenceEvent.for_query(EvidenceType.REFUSAL, data, source="/w/retrieval")
    assert a.id == b.id != other.id
    doc = json.loads(a.model_dump_json())
    for attr in ("specversion", "id", "source", "type"):  # CloudEvents 1.0 required attributes
        assert doc[attr]
    assert doc["specversion"] == "1.0"
    assert doc["type"] == "RAG_ADVISORY_LOW_CONFIDENCE"
    assert doc["subject"] == "q-1"


def test_evidence_types_cover_the_required_set() -> None:
    names = {t.value for t in EvidenceType}
    assert {
        "RAG_ADVISORY_LOW_CONFIDENCE",
        "RAG_NO_RELEVANT_CONTEXT",
        "RAG_REFUSAL",
        "RAG_RETRIEVAL_FAILED",
    } <= names


def test_dead_letter_keeps_original_bytes() -> None:
    original = b"\x00\xffnot json"
    dl = DeadLetter.build(
        original=original,
        stage="decode",
        error_type="DecodeError",
        error="bad",
        worker="retrieval",
        topic="ragsift.queries.v1",
        partition=3,
        offset=17,
    )
    assert dl.original == original
    again = DeadLetter.model_validate_json(dl.model_dump_json())
    assert again.original == original
    assert again.dead_letter_id == dl.dead_letter_id


def test_document_upsert_requires_text() -> None:
    with pytest.raises(ValidationError, match="text is required"):
        DocumentEvent(event_id="e1", tenant_id="acme", doc_id="d1", op="upsert")
    assert DocumentEvent(event_id="e1", tenant_id="acme", doc_id="d1", op="delete").text is None


def test_exported_json_schemas_are_current() -> None:
    """Fails when a model changed but `ragsift schemas export` was not run."""
    expected = json_schema_documents()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in JSON_DIR.glob("*.schema.json")}
    assert set(on_disk) == set(expected), "run `ragsift schemas export`"
    stale = [name for name, text in expected.items() if on_disk[name] != text]
    assert not stale, f"stale JSON Schemas {stale}: run `ragsift schemas export`"
