"""The codec turns bytes into events, or into errors that say what is wrong."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, field_validator

from ragsift.errors import DecodeError
from ragsift.schemas import (
    DocumentEvent,
    EvidenceData,
    EvidenceEvent,
    EvidenceType,
    FeedbackEvent,
    QueryEvent,
)
from ragsift.streams.codec import MAX_PAYLOAD_BYTES, EventCodec

codec = EventCodec(QueryEvent)


def test_round_trip_is_equal() -> None:
    event = QueryEvent(query_id="q1", tenant_id="acme", query="hello?", k=5, entities=["x"])
    assert codec.decode(codec.encode(event)) == event


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"{", "not JSON"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (None, "empty message"),
        (b'{"query_id": "q1", "tenant_id": "acme"}', "query: Field required"),
        (b'{"query_id": "q1", "tenant_id": "acme", "query": "x", "k": 0}', "k: Input should be"),
        (b'{"query_id": "q1", "tenant_id": "a b", "query": "x"}', "tenant_id: tenant_id must"),
    ],
)
def test_malformed_payloads_name_the_problem(payload: bytes | None, fragment: str) -> None:
    with pytest.raises(DecodeError) as exc:
        codec.decode(payload)
    assert fragment in str(exc.value)
    assert exc.value.stage == "decode"


def test_decode_error_carries_query_id_when_readable() -> None:
    with pytest.raises(DecodeError) as exc:
        codec.decode(b'{"query_id": "q-9", "tenant_id": "acme", "query": ""}')
    assert exc.value.query_id == "q-9"
    assert exc.value.errors
    assert exc.value.errors[0]["loc"] == ("query",)


def test_oversized_payload_is_refused_before_parsing() -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        codec.decode(b" " * (MAX_PAYLOAD_BYTES + 1))


def test_encode_checks_the_type() -> None:
    with pytest.raises(TypeError, match="expected QueryEvent"):
        codec.encode("nope")  # type: ignore[arg-type]  # checking the runtime guard


def _query_with(field: bytes) -> bytes:
    return b'{"query_id": "q-1", "tenant_id": "acme", "query": "x", ' + field + b"}"


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        # 10 KB of nested brackets: json raised RecursionError past the codec's mapping.
        (b"[" * 5000 + b"]" * 5000, "nests too deeply"),
        (_query_with(b'"entities": ' + b"[" * 5000 + b"]" * 5000), "nests too deeply"),
        # Deep, but within the parser's reach: the error message must not recurse either.
        (_query_with(b'"entities": ' + b"[" * 300 + b"]" * 300), "entities.0"),
        # A 5,000-digit integer: int() refuses past 4,300 digits with a ValueError.
        (_query_with(b'"k": ' + b"9" * 5000), "not usable JSON"),
        (b"9" * 5000, "not usable JSON"),
        (_query_with(b'"collection": "default\\n"'), "collection: collection must match"),
        (_query_with(b'"vector": [' + b",".join([b"1e308"] * 384) + b"]"), "within"),
        (b'{"query": "\xff"}', "not UTF-8"),
    ],
)
def test_poison_payloads_are_decode_errors_with_a_reason(payload: bytes, fragment: str) -> None:
    with pytest.raises(DecodeError) as exc:
        codec.decode(payload)
    assert fragment in str(exc.value)
    assert exc.value.stage == "decode"


def test_nothing_but_decode_error_escapes_whatever_a_validator_raises() -> None:
    class Touchy(BaseModel):
        value: int

        @field_validator("value")
        @classmethod
        def _explode(cls, value: int) -> int:
            raise KeyError("a validator bug")

    with pytest.raises(DecodeError, match="KeyError"):
        EventCodec(Touchy).decode(b'{"value": 1}')


@pytest.mark.parametrize(
    "payload",
    [
        b'{"query_id": "q-7", "tenant_id": "acme", "tenant_id": "evil", "query": "x"}',
        b'{"query_id": "q-7", "tenant_id": "acme", "query": "x", "tenant_id": "acme"}',
        # An escape spells the same name: the byte search alone would miss it.
        b'{"query_id": "q-7", "tenant\\u005fid": "acme", "tenant_id": "evil", "query": "x"}',
        b'{"query_id": "q-7", "\\u0074enant_id": "evil", "tenant_id": "acme", "query": "x"}',
    ],
)
def test_a_payload_that_names_its_tenant_twice_is_refused(payload: bytes) -> None:
    # Python keeps the last of a repeated name, many parsers the first: a gateway that
    # checked acme's event would have seen ragsift serve evil.
    with pytest.raises(DecodeError, match="gives tenant_id more than once") as exc:
        codec.decode(payload)
    assert exc.value.stage == "decode"
    assert exc.value.query_id == "q-7"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_json_in_another_unicode_encoding_is_refused(encoding: str) -> None:
    # json.loads reads these too, and in UTF-16 the byte search for "tenant_id" saw no
    # name at all: a repeated tenant passed the guard, the last one winning.
    text = '{"query_id": "q-7", "tenant_id": "acme", "tenant_id": "evil", "query": "x"}'
    with pytest.raises(DecodeError, match=f"payload is {encoding}; events must be UTF-8"):
        codec.decode(text.encode(encoding))


def test_a_utf8_byte_order_mark_is_ignored() -> None:
    text = '{"query_id": "q-7", "tenant_id": "acme", "query": "x"}'
    assert codec.decode(text.encode("utf-8-sig")).tenant_id == "acme"


@pytest.mark.parametrize(
    "payload",
    [
        # The name inside a value, once as text and once escaped as a quoted word.
        b'{"query_id": "q1", "tenant_id": "acme", "query": "tenant_id \\"tenant_id\\""}',
        # An escape elsewhere (non-ASCII text as Python's json.dumps writes it).
        b'{"query_id": "q1", "tenant_id": "acme", "query": "caf\\u00e9 \\"tenant_id\\""}',
    ],
)
def test_the_name_in_a_value_or_an_escape_elsewhere_is_no_repeat(payload: bytes) -> None:
    assert codec.decode(payload).tenant_id == "acme"


def test_a_nested_object_may_name_a_tenant_and_repeat_names_as_before() -> None:
    documents = EventCodec(DocumentEvent)
    event = documents.decode(
        b'{"event_id": "e1", "tenant_id": "acme", "doc_id": "d1", "text": "hi",'
        b' "metadata": {"tenant_id": "x", "tag": "a", "tag": "b"}}'
    )
    assert (event.tenant_id, event.metadata) == ("acme", {"tenant_id": "x", "tag": "b"})


def test_every_event_a_tenant_sends_refuses_a_repeated_tenant() -> None:
    for model in (QueryEvent, DocumentEvent, FeedbackEvent):
        assert "tenant_id" in model.UNREPEATED_KEYS
        with pytest.raises(DecodeError, match="more than once"):
            EventCodec(model).decode(b'{"tenant_id": "acme", "tenant_id": "evil"}')


@pytest.mark.parametrize("payload", [b"\x00\x01garbage{", b"\x00\x00\x00\x07junk"])
def test_bytes_that_only_look_like_another_encoding_are_reported_as_not_json(
    payload: bytes,
) -> None:
    # json.detect_encoding reads the NUL bytes alone: these were "payload is utf-16-be"
    # and "utf-32-be", which sent whoever read the dead letter after an encoding bug.
    with pytest.raises(DecodeError, match="payload is not JSON"):
        codec.decode(payload)


def test_utf16_json_with_a_lone_surrogate_is_still_refused_as_utf16() -> None:
    # json.loads decodes with surrogatepass: the check must read it the same way, or this
    # payload would pass the check and then parse, repeated tenant and all.
    text = '{"query_id": "q-7", "tenant_id": "acme", "tenant_id": "evil", "query": "\ud800"}'
    with pytest.raises(DecodeError, match="payload is utf-16-le; events must be UTF-8"):
        codec.decode(text.encode("utf-16-le", "surrogatepass"))


EVIDENCE = EvidenceEvent.for_query(
    EvidenceType.REFUSAL,
    EvidenceData(query_id="q-1", tenant_id="acme", summary="SURR"),
    source="/test",
)


@pytest.mark.parametrize("escape", [r"\ud800", r"x\udfffy", r"\ude00\ud83d"])
@pytest.mark.parametrize("nudge", ["", ' "extra": 1,'])
def test_a_lone_surrogate_escape_is_refused_whichever_path_reads_it(
    escape: str, nudge: str
) -> None:
    # pydantic's one-call path refuses "\ud800" as invalid JSON; a payload it refuses
    # for any reason goes on to json.loads, which took the escape for a lone surrogate.
    # Before: the step-by-step path then accepted it in any free text field (an
    # evidence summary, a hit's title), and the event failed later where its text was
    # encoded: the audit sink's write (stage handler), a report's send (stage emit).
    # Those stages read as an outage, whose letters the runbook says to replay: the
    # replay failed again, every time. ``extra`` sends the payload down the slow path.
    template = EventCodec(EvidenceEvent).encode(EVIDENCE).decode()
    payload = template.replace('{"', "{" + nudge + ' "', 1).replace('"SURR"', f'"{escape}"')
    with pytest.raises(DecodeError, match="lone surrogate") as exc:
        EventCodec(EvidenceEvent).decode(payload.encode())
    assert exc.value.stage == "decode"


def test_a_surrogate_pair_escape_is_one_character_and_decodes() -> None:
    template = EventCodec(EvidenceEvent).encode(EVIDENCE).decode()
    payload = template.replace('"SURR"', r'"\ud83d\ude00"')
    assert EventCodec(EvidenceEvent).decode(payload.encode()).data.summary == "\U0001f600"
