"""The wire contracts: limits at the boundary, ids, CloudEvents, JSON Schema export."""

from __future__ import annotations

import base64
import hashlib
import json
import math

import jsonschema
import numpy as np
import pytest
from pydantic import ValidationError

from ragsift.errors import describe_validation_error
from ragsift.schemas import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_VECTOR_DIM,
    DeadLetter,
    DocumentEvent,
    EvidenceData,
    EvidenceEvent,
    EvidenceType,
    FeedbackEvent,
    QueryEvent,
    derive_id,
    json_schema_documents,
)
from ragsift.schemas.base import MAX_VECTOR_COMPONENT
from ragsift.schemas.deadletter import DEFAULT_MAX_ORIGINAL_BYTES, MINIMAL_ERROR_CHARS
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
    with pytest.raises(ValidationError, match="non-whitespace") as caught:
        make_query(query="   ")
    # named as the field, with its value: it was "<event>: ... (got {the whole event})"
    assert describe_validation_error(caught.value) == (
        "query: must contain non-whitespace text (got '   ')"
    )


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


@pytest.mark.parametrize(
    "vector",
    [[1e308] * 384, [1e308, 1e308, -1e308], [0.5, -2e15, 0.1], [1e150] * 384, [1e39]],
)
def test_components_whose_norm_overflows_are_refused_by_name(vector: list[float]) -> None:
    # Finite as Python floats, but not as the engines' float32 or their norms: 1e150s
    # made Qdrant Edge fail the whole search batch. Before: 1e308s passed because their
    # sum overflowed to inf and no culprit was found; 1e150s passed outright.
    with pytest.raises(ValidationError, match=r"vector components must be within ±1e\+15 "):
        make_query(vector=vector, embedder_id="e")


def test_largest_allowed_components_have_a_finite_norm() -> None:
    vector = [MAX_VECTOR_COMPONENT, -MAX_VECTOR_COMPONENT] * (MAX_VECTOR_DIM // 2)
    assert make_query(vector=vector, embedder_id="e").vector == vector
    assert math.isfinite(float(np.linalg.norm(np.asarray(vector, dtype=np.float32))))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("collection", "default\n"),
        ("tenant_id", "acme\n"),
        ("query_id", "q-1\n"),
        ("collection", "\ndefault"),
    ],
)
def test_a_trailing_newline_is_not_a_valid_name(field: str, value: str) -> None:
    # re.match with "$" accepts one trailing newline; the names must match in full.
    with pytest.raises(ValidationError, match=field.split("_")[0]):
        make_query(**{field: value})


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


def test_a_dead_letter_id_is_one_workers_letter() -> None:
    # Three workers refusing one record wrote three letters with one id: a consumer
    # keeping one letter per id (ADR 004) kept one and dropped the others.
    fields: dict[str, object] = {
        "original": b"not json at all",
        "stage": "decode",
        "error_type": "DecodeError",
        "error": "bad",
        "topic": "ragsift.retrievals.v1",
        "partition": 0,
        "offset": 9,
    }
    ids = {
        DeadLetter.build(worker=worker, **fields).dead_letter_id  # type: ignore[arg-type]
        for worker in ("decision", "report", "calibration-results")
    }
    assert len(ids) == 3
    again = DeadLetter.build(worker="report", **fields)  # type: ignore[arg-type]
    assert again.dead_letter_id in ids  # a replay of one worker's letter is that letter


def build_letter(original: bytes, **overrides: object) -> DeadLetter:
    fields: dict[str, object] = {
        "original": original,
        "stage": "decode",
        "error_type": "DecodeError",
        "error": "bad",
        "worker": "retrieval",
        "topic": "ragsift.queries.v1",
        "partition": 0,
        "offset": 1,
    }
    fields.update(overrides)
    return DeadLetter.build(**fields)  # type: ignore[arg-type]  # keyword overrides


def test_dead_letter_of_a_huge_message_keeps_a_bounded_prefix_its_length_and_hash() -> None:
    # A 950 KB query fits the broker; its letter with the whole original (1.27 MB of
    # base64) did not, and the failed send stalled the agent.
    original = json.dumps({"query_id": "big", "query": "x" * 950_000}).encode()
    letter = build_letter(original, max_original_bytes=DEFAULT_MAX_ORIGINAL_BYTES)
    assert letter.original == original[:DEFAULT_MAX_ORIGINAL_BYTES]
    assert letter.original_truncated
    assert letter.original_length == len(original)
    assert letter.original_sha256 == hashlib.sha256(original).hexdigest()
    assert len(letter.model_dump_json()) < 100 * 1024


def test_dead_letter_of_a_small_message_is_whole_and_says_so() -> None:
    letter = build_letter(b"not json")
    assert letter.original == b"not json"
    assert not letter.original_truncated
    assert letter.original_length == 8


def test_an_oversized_key_is_cut_too() -> None:
    letter = build_letter(b"v", key=b"k" * 10, max_original_bytes=4)
    assert letter.key_b64 == base64.b64encode(b"kkkk").decode()
    assert letter.original_truncated


def test_minimal_letter_drops_the_original_keeps_where_and_what() -> None:
    letter = build_letter(b"x" * 1000, key=b"key", error="e" * 4000)
    minimal = letter.minimal()
    assert minimal.original == b""
    assert minimal.key_b64 is None
    assert minimal.original_truncated
    assert len(minimal.error) == MINIMAL_ERROR_CHARS
    same = ("dead_letter_id", "topic", "partition", "offset", "original_sha256", "original_length")
    assert all(getattr(minimal, f) == getattr(letter, f) for f in same)


def test_dead_letters_without_the_new_fields_still_parse() -> None:
    # Letters written before original_length/original_sha256/original_truncated existed.
    old = {
        "dead_letter_id": "d1",
        "stage": "decode",
        "error_type": "DecodeError",
        "error": "bad",
        "worker": "retrieval",
        "topic": "ragsift.queries.v1",
        "original_b64": base64.b64encode(b"raw").decode(),
    }
    letter = DeadLetter.model_validate(old)
    assert letter.original == b"raw"
    assert letter.original_length is None
    assert not letter.original_truncated


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


_QUERY = {"query_id": "q-1", "tenant_id": "acme", "query": "refund policy?", "embedder_id": "e"}
_LABEL = {"event_id": "e-1", "query_id": "q-1", "tenant_id": "acme", "relevant": True}


@pytest.mark.parametrize(
    ("model", "fields", "field", "value", "valid"),
    [
        (QueryEvent, _QUERY, "k", 5, True),
        (QueryEvent, _QUERY, "k", 5.0, True),
        (QueryEvent, _QUERY, "k", True, False),
        (QueryEvent, _QUERY, "k", "5", False),
        (QueryEvent, _QUERY, "similarity_threshold", 1, True),
        (QueryEvent, _QUERY, "similarity_threshold", True, False),
        (QueryEvent, _QUERY, "similarity_threshold", "0.5", False),
        (QueryEvent, _QUERY, "vector", [1, 0.5], True),
        (QueryEvent, _QUERY, "vector", [True, 0.5], False),
        (QueryEvent, _QUERY, "vector", ["1", 0.5], False),
        (FeedbackEvent, _LABEL, "confidence", 0.5, True),
        (FeedbackEvent, _LABEL, "confidence", False, False),
        (FeedbackEvent, _LABEL, "signals", {"top": 1}, True),
        (FeedbackEvent, _LABEL, "signals", {"top": "0.5"}, False),
        (FeedbackEvent, _LABEL, "relevant", "no", False),
        (FeedbackEvent, _LABEL, "sampled", 0, False),
        (QueryEvent, _QUERY, "want_report", "true", False),
        (QueryEvent, _QUERY, "want_report", True, True),
        # the schemas said "a string": "2" passed them and was refused here
        (QueryEvent, _QUERY, "schema_version", "1", True),
        (QueryEvent, _QUERY, "schema_version", "1.7", True),
        (QueryEvent, _QUERY, "schema_version", "2", False),
        (QueryEvent, _QUERY, "schema_version", "10", False),
        (QueryEvent, _QUERY, "schema_version", "1\n", False),
        (FeedbackEvent, _LABEL, "schema_version", "2.0", False),
        # a number read as seconds since 1970 (lax mode), where the schemas want a string
        (QueryEvent, _QUERY, "created_at", "2026-12-03T08:00:00Z", True),
        (QueryEvent, _QUERY, "created_at", 0, False),
        (QueryEvent, _QUERY, "created_at", 1.7e9, False),
        (QueryEvent, _QUERY, "created_at", True, False),
    ],
)
def test_a_number_or_flag_reads_json_as_its_json_schema_does(
    model: type[QueryEvent | FeedbackEvent],
    fields: dict[str, object],
    field: str,
    value: object,
    valid: bool,
) -> None:
    """Read laxly, ``true`` was 1 (k = 1; a threshold that refused every hit),
    ``"0.5"`` was 0.5 and a label's ``"no"`` was False, where the published JSON Schema
    refuses them all."""
    payload = json.dumps({**fields, field: value})
    name = {QueryEvent: "query_event", FeedbackEvent: "feedback_event"}[model]
    schema = json.loads((JSON_DIR / f"{name}.v1.schema.json").read_text(encoding="utf-8"))
    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(payload)) is valid
    if valid:
        model.model_validate_json(payload)
        return
    with pytest.raises(ValidationError) as exc:
        model.model_validate_json(payload)
    assert [e["loc"][0] for e in exc.value.errors()] == [field]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize(
    ("model", "body"),
    [
        (
            QueryEvent,
            '{"query_id": "q", "tenant_id": "t", "query": "q", "similarity_threshold": %s}',
        ),
        (
            FeedbackEvent,
            '{"event_id": "e", "query_id": "q", "tenant_id": "t", "relevant": true,'
            ' "confidence": %s}',
        ),
        (
            FeedbackEvent,
            '{"event_id": "e", "query_id": "q", "tenant_id": "t", "relevant": true,'
            ' "signals": {"top_score": %s}}',
        ),
    ],
)
def test_a_number_that_is_not_finite_is_refused_as_such(
    model: type[QueryEvent | FeedbackEvent], body: str, literal: str
) -> None:
    # Python's parser reads NaN and Infinity; JSON has neither. A NaN threshold was told
    # it "should be less than or equal to 1", and a NaN feedback signal was kept.
    with pytest.raises(ValidationError, match="finite number"):
        model.model_validate(json.loads(body % literal))
