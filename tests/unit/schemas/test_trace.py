"""W3C traceparent: kept when valid, ignored (never refused) when not."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragsift.schemas.query import QueryEvent
from ragsift.schemas.trace import trace_context

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_version_00_header_is_kept_as_it_is() -> None:
    assert trace_context(VALID) == VALID


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        VALID.upper(),  # the recommendation allows lowercase hex only
        VALID + "-extra",  # version 00 has exactly four fields
        VALID[:-1],
        "ff" + VALID[2:],  # version ff is forbidden
        "00-" + "0" * 32 + VALID[35:],  # all-zero trace id
        VALID[:36] + "0" * 16 + VALID[52:],  # all-zero parent id
        "x" * 300,
        "01" + VALID[2:] + "x",  # a later version's extra fields start with "-"
    ],
)
def test_an_unparsable_header_is_ignored(value: str) -> None:
    assert trace_context(value) is None


def test_a_later_version_is_read_as_its_first_four_fields() -> None:
    later = "cc" + VALID[2:] + "-" + "f" * 200
    assert trace_context(later) == VALID
    assert trace_context("cc" + VALID[2:]) == VALID


def test_the_event_ignores_an_unparsable_traceparent_instead_of_refusing_the_query() -> None:
    event = QueryEvent(query_id="q", tenant_id="t", query="refunds?", traceparent="x" * 300)
    assert event.traceparent is None
    assert QueryEvent(query_id="q", tenant_id="t", query="q", traceparent=VALID).traceparent == (
        VALID
    )


def test_a_traceparent_that_is_not_a_string_still_breaks_the_contract() -> None:
    with pytest.raises(ValidationError, match="traceparent"):
        QueryEvent.model_validate(
            {"query_id": "q", "tenant_id": "t", "query": "q", "traceparent": 5}
        )
