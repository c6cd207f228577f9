"""When a retriever refuses, and the settings a source refuses up front."""

from __future__ import annotations

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.integrations import (
    EmbeddedSource,
    HttpSource,
    IntegrationError,
    chunk_metadata,
    outcome_of,
)
from ragsift.schemas import Citation, Contradiction, ErrorInfo, RetrievedChunk
from tests.unit.api.conftest import build_result


def test_an_error_result_is_refused_with_its_stage() -> None:
    error = ErrorInfo(stage="search", error_type="OSError", message="down")
    outcome = outcome_of(build_result("q", "acme", outcome="error", error=error))
    assert outcome.refused
    assert outcome.reason == "retrieval failed at stage search"
    assert outcome.chunks == ()


def test_a_greeting_is_not_a_refusal() -> None:
    outcome = outcome_of(build_result("q", "acme", outcome="greeting", answer_hint="Hello!"))
    assert not outcome.refused
    assert outcome.chunks == ()
    assert outcome.result.answer_hint == "Hello!"


def test_no_hits_is_a_refusal_even_when_marked_answerable() -> None:
    outcome = outcome_of(build_result("q", "acme"))
    assert outcome.refused
    assert outcome.reason == "no context retrieved (status high_confidence)"


@pytest.mark.parametrize("bad", [{"tenant_id": "../other"}, {"k": 0}, {"collection": "a b"}])
async def test_bad_embedded_settings_fail_at_construction(
    runtime: EmbeddedRuntime, bad: dict[str, object]
) -> None:
    kwargs: dict[str, object] = {"tenant_id": "acme", **bad}
    tenant = str(kwargs.pop("tenant_id"))
    with pytest.raises(IntegrationError, match="invalid retriever settings"):
        EmbeddedSource(runtime, tenant, **kwargs)  # type: ignore[arg-type]  # hostile on purpose


def test_http_source_needs_a_key_and_never_shows_it() -> None:
    with pytest.raises(IntegrationError, match="api_key is required"):
        HttpSource("http://127.0.0.1:1", "")
    assert "secret" not in repr(HttpSource("http://127.0.0.1:1", "rsk_secret"))


def test_every_chunk_carries_the_results_contradiction() -> None:
    chunks = [
        RetrievedChunk(
            chunk_id=f"c{n}",
            doc_id=f"d{n}",
            text=f"Return within {days} days.",
            rank=n,
            score=0.9,
            citation=Citation(chunk_id=f"c{n}", doc_id=f"d{n}", source=f"d{n}.md"),
        )
        for n, days in ((1, 30), (2, 14))
    ]
    contradiction = Contradiction(
        kind="value",
        chunk_ids=["c1", "c2"],
        doc_ids=["d1", "d2"],
        statements=[c.text for c in chunks],
        values=["30 days", "14 days"],
    )
    result = build_result("q", "acme", hits=chunks, contradiction=contradiction)
    outcome = outcome_of(result)
    assert not outcome.refused
    metadata = [chunk_metadata(result, c) for c in outcome.chunks]
    assert [m["contradiction"]["values"] for m in metadata] == [["30 days", "14 days"]] * 2
    assert (
        chunk_metadata(build_result("q", "acme", hits=chunks), chunks[0])["contradiction"] is None
    )
