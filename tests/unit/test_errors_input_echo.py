"""A validation message shows what the input named as data: one line, bounded, escaped."""

from __future__ import annotations

import json

import pytest

from ragsift.errors import DecodeError
from ragsift.schemas import QueryEvent
from ragsift.streams.codec import EventCodec


def refusal(field: str) -> str:
    body = {"query_id": "q1", "tenant_id": "acme", "query": "refunds?", field: 1}
    with pytest.raises(DecodeError) as exc:
        EventCodec(QueryEvent).decode(json.dumps(body).encode())
    return str(exc.value)


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        # Before: an unknown field's name was printed as is, so a newline in it forged
        # a second line in the worker's log ("dead-lettered ... at decode: ...").
        ("\n[2026-01-01] INFO admin: granted", "'\\n[2026-01-01] INFO admin: granted'"),
        ("\u202eevil", "'\\u202eevil'"),
        ("\x00", "'\\x00'"),
        ("fine_name", "fine_name"),
    ],
)
def test_an_unknown_field_is_named_on_one_line(field: str, shown: str) -> None:
    message = refusal(field)
    assert f"{shown}: Extra inputs are not permitted" in message
    assert message.isprintable()


def test_an_unknown_field_of_a_megabyte_is_named_by_its_start() -> None:
    # Before: the whole name, a megabyte, went into the message and the log line.
    message = refusal("k" * 1_000_000)
    assert len(message) < 300
    assert "'kkkk" in message
