"""``HttpSource`` reads no more of the API's answer than ``max_response_bytes``.

Before, it read each answer whole (``client.post``) and httpx decoded it whole: a
server that streamed without end, or 50 KB of gzip that inflates to 50 MiB, was held
in memory before the body was even parsed.
"""

from __future__ import annotations

import gzip
import re
import tracemalloc
from typing import Any

import httpx
import pytest

from ragsift.integrations import HttpSource, IntegrationError
from ragsift.integrations.source import DEFAULT_MAX_RESPONSE_BYTES
from ragsift.retrieval.results import error_result
from ragsift.schemas import QueryEvent
from ragsift.streams.codec import MAX_PAYLOAD_BYTES
from tests.unit.test_http_body import MiB, Served, bomb, double_bomb

pytestmark = pytest.mark.unit

URL = "http://ragsift.test"


def _answer_body() -> bytes:
    """A real ``POST /v1/query`` answer: the query id and a result."""
    result = error_result(
        QueryEvent(query_id="q-1", tenant_id="acme", query="q?", collection="default"),
        stage="search",
        error=TimeoutError("unused"),
        attempts=1,
        embedder_id="ragsift-hashing-v1-384",
        disclaimer="unused",
    )
    return b'{"query_id":"q-1","result":' + result.model_dump_json().encode() + b"}"


def serving(body: bytes, *, encoding: str = "", status: int = 200, piece: int = 4096) -> Any:
    """A transport answering every request with ``body``, streamed in ``piece`` bytes."""
    streams: list[Served] = []

    def reply(request: httpx.Request) -> httpx.Response:
        stream = Served(body, piece)
        streams.append(stream)
        headers = {"content-type": "application/json"}
        if encoding:
            headers["content-encoding"] = encoding
        return httpx.Response(status, stream=stream, headers=headers)

    transport = httpx.MockTransport(reply)
    transport.streams = streams  # type: ignore[attr-defined]  # for the test's eyes
    return transport


def _source(transport: Any, **kwargs: Any) -> HttpSource:
    return HttpSource(URL, "key", transport=transport, **kwargs)


async def test_an_answer_within_the_cap_reads_as_sent_plain_or_gzipped() -> None:
    body = _answer_body()
    for encoding, sent in (("", body), ("gzip", gzip.compress(body))):
        source = _source(serving(sent, encoding=encoding), max_response_bytes=len(body))
        result = await source.aretrieve("q?")
        assert result.query_id == "q-1"


async def test_an_oversized_answer_is_a_clear_error_and_not_read_on() -> None:
    body = _answer_body() + b" " * 100_000  # valid JSON, only long
    transport = serving(body, piece=1024)
    source = _source(transport, max_response_bytes=10_000)
    with pytest.raises(IntegrationError, match="answered more than 10000 bytes"):
        await source.aretrieve("q?")
    [stream] = transport.streams
    assert stream.sent < len(stream.pieces) // 5  # cut off near the cap, not read whole
    with pytest.raises(IntegrationError, match="max_response_bytes"):
        await source.afeedback("q-1", True)


@pytest.mark.parametrize(("body", "encoding"), [(bomb(), "gzip"), (double_bomb(), "gzip, gzip")])
async def test_a_gzip_bomb_costs_the_cap_not_its_expansion(body: bytes, encoding: str) -> None:
    source = _source(serving(body, encoding=encoding), max_response_bytes=MiB)
    tracemalloc.start()
    try:
        with pytest.raises(IntegrationError, match=f"answered more than {MiB} bytes"):
            await source.aretrieve("q?")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB  # of the bomb's 50 MiB (64 MiB for the double one)


async def test_the_default_cap_holds_the_largest_result_and_stops_a_bomb() -> None:
    assert DEFAULT_MAX_RESPONSE_BYTES > MAX_PAYLOAD_BYTES  # the largest event the codec reads
    source = _source(serving(bomb(), encoding="gzip"))
    tracemalloc.start()
    try:
        with pytest.raises(IntegrationError, match="answered more than"):
            await source.aretrieve("q?")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * DEFAULT_MAX_RESPONSE_BYTES < 50 * MiB


async def test_an_oversized_error_answer_keeps_its_status_and_start() -> None:
    body = b'{"error":"unavailable","detail":"' + b"x" * 50_000 + b'"}'
    source = _source(serving(body, status=503), max_response_bytes=1000)
    with pytest.raises(
        IntegrationError, match=re.escape('answered 503: {"error":"unavailable"')
    ) as got:
        await source.aretrieve("q?")
    assert len(str(got.value)) < 400


@pytest.mark.parametrize("encoding", ["br", "zstd"])
async def test_a_coding_not_asked_for_is_a_clear_error(encoding: str) -> None:
    source = _source(serving(b"\x00" * 100, encoding=encoding))
    with pytest.raises(IntegrationError, match=f"cannot read.*{encoding!r}"):
        await source.aretrieve("q?")


async def test_a_body_its_coding_cannot_read_is_a_clear_error() -> None:
    source = _source(serving(b"not gzip at all", encoding="gzip"))
    with pytest.raises(IntegrationError, match="answered 200 with a body it cannot read"):
        await source.aretrieve("q?")


async def test_a_deeply_nested_answer_is_an_unreadable_body_not_a_crash() -> None:
    source = _source(serving(b'{"result":' + b"[" * 200_000))
    with pytest.raises(IntegrationError, match="unreadable body"):
        await source.aretrieve("q?")
    labelled = _source(serving(b'{"event_id":' + b"[" * 200_000, status=202))
    with pytest.raises(IntegrationError, match="unreadable body"):
        await labelled.afeedback("q-1", True)
    refused = _source(serving(b"[" * 200_000, status=422))
    with pytest.raises(IntegrationError, match=r"answered 422: \[\[\["):
        await refused.aretrieve("q?")


@pytest.mark.parametrize("cap", [0, -1])
def test_a_cap_must_be_positive(cap: int) -> None:
    with pytest.raises(IntegrationError, match=f"max_response_bytes must be > 0, got {cap}"):
        _source(None, max_response_bytes=cap)
