"""Compressed bodies are capped while they are decoded, not after (ragsift/http_body.py).

Before: httpx decoded each chunk off the wire whole, and the 4 MiB cap of a chat
reply was checked on the output: a 50 KB gzip body of zeros took 50 MB (and a
stack of codings gigabytes) in memory before it was refused.
"""

from __future__ import annotations

import tracemalloc
import zlib
from collections.abc import AsyncIterator, Iterator
from functools import cache
from typing import Any

import httpx
import pytest

from ragsift.http_body import (
    ACCEPT_ENCODING,
    MAX_CODINGS,
    STEP,
    BodyDecoder,
    BodyDecodingError,
    read_capped,
)
from ragsift.http_client import JsonEndpoint, ServiceErrors, bearer_client
from ragsift.report.llm import DEFAULT_MAX_RESPONSE_BYTES, LlmResponseError, OpenAIChatClient
from ragsift.retrieval.embedders import OpenAIEmbedder
from ragsift.retrieval.errors import EmbedderResponseError, EmbedderUnavailableError
from ragsift.retrieval.rerank import HttpReranker
from ragsift.retrieval.rerank.base import RerankerResponseError

pytestmark = pytest.mark.unit

MiB = 1024 * 1024
GZIP = zlib.MAX_WBITS | 16
#: A deflate block of no bytes (not final, stored, LEN 0, NLEN 0xffff), byte-aligned.
EMPTY_STORED_BLOCK = b"\x00\x00\x00\xff\xff"
THINGS = ServiceErrors(
    "things request", "things service", EmbedderUnavailableError, EmbedderResponseError, 40
)


def compress(chunks: Iterator[bytes], wbits: int = GZIP) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return b"".join(packer.compress(chunk) for chunk in chunks) + packer.flush()


def zeros(mib: int) -> Iterator[bytes]:
    return (bytes(MiB) for _ in range(mib))


@cache
def bomb() -> bytes:
    """50 MiB of zeros in about 50 KB of gzip."""
    return compress(zeros(50))


@cache
def double_bomb() -> bytes:
    """64 MiB of zeros gzipped twice: a few hundred bytes (``gzip, gzip``)."""
    return compress(iter([compress(zeros(64))]))


class Served(httpx.AsyncByteStream):
    """A body streamed as ``pieces`` (as a server sends it, not read in advance), counted."""

    def __init__(self, body: bytes, piece: int | None = None) -> None:
        step = piece or len(body) or 1
        self.pieces = [body[i : i + step] for i in range(0, len(body), step)]
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.sent += 1
            yield piece


def serving(body: bytes, encoding: str, *, status: int = 200, piece: int | None = None) -> Any:
    """A transport answering ``body`` in ``encoding``; its requests are kept."""
    requests: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        headers = {"content-encoding": encoding} if encoding else {}
        return httpx.Response(status, stream=Served(body, piece), headers=headers)

    transport = httpx.MockTransport(reply)
    transport.requests = requests  # type: ignore[attr-defined]  # for the test's eyes
    return transport


def streamed(body: bytes, encoding: str, piece: int | None = None) -> httpx.Response:
    return httpx.Response(200, stream=Served(body, piece), headers={"content-encoding": encoding})


async def test_a_gzip_bomb_is_refused_within_the_cap_of_memory() -> None:
    chat = OpenAIChatClient(
        "http://llm.test", "m", transport=serving(bomb(), "gzip"), max_retries=0
    )
    tracemalloc.start()
    try:
        with pytest.raises(
            LlmResponseError, match=f"answered more than {DEFAULT_MAX_RESPONSE_BYTES}"
        ):
            await chat.complete([{"role": "user", "content": "q"}])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await chat.close()
    # The cap's bytes, kept and copied into the answer, a step and the 50 KB on the wire;
    # decoding the bomb whole took 50 MiB at once (133 MB peak).
    assert peak < 4 * DEFAULT_MAX_RESPONSE_BYTES


async def test_the_read_stops_a_step_past_the_cap_whatever_the_ratio() -> None:
    made: list[int] = []

    class Watched(BodyDecoder):
        def decode(self, raw: bytes) -> Iterator[bytes]:
            for piece in super().decode(raw):
                made.append(len(piece))
                yield piece

    cap = 1 * MiB
    response = streamed(bomb(), "gzip")
    decoder = Watched("gzip")
    body = bytearray()
    for piece in decoder.decode(bomb()):
        body.extend(piece)
        if len(body) > cap:
            break
    assert max(made) <= STEP
    assert sum(made) <= cap + STEP  # 50 MiB in the body; a step past the cap made
    content, whole = await read_capped(response, cap)
    assert (len(content), whole) == (cap, False)
    assert content == bytes(cap)


async def test_a_stack_of_codings_is_undone_a_step_at_a_time() -> None:
    decoder = BodyDecoder("gzip, gzip")
    made = 0
    for piece in decoder.decode(double_bomb()):
        assert len(piece) <= STEP
        made += len(piece)
        if made > MiB:
            break
    assert made <= MiB + STEP  # of 64 MiB
    content, whole = await read_capped(streamed(double_bomb(), "gzip, gzip", piece=7), MiB)
    assert (len(content), whole) == (MiB, False)


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [("gzip", GZIP), ("x-gzip", GZIP), ("deflate", zlib.MAX_WBITS), ("deflate", -zlib.MAX_WBITS)],
)
async def test_bodies_within_the_cap_read_as_sent_in_any_piece_size(
    encoding: str, wbits: int
) -> None:
    text = ("Orbit thermostats can be returned within 30 days. été \u202e " * 3_000).encode()
    packed = compress(iter([text]), wbits)
    for piece in (1, 7, 4096, None):
        content, whole = await read_capped(streamed(packed, encoding.upper(), piece), len(text))
        assert (content, whole) == (text, True)
    content, whole = await read_capped(streamed(text, "identity"), None)
    assert (content, whole) == (text, True)


async def test_a_body_of_empty_blocks_is_cut_at_the_cap_on_the_wire() -> None:
    # Deflate blocks that make no output: an endless body whose decoded size never grows.
    packer = zlib.compressobj(6, zlib.DEFLATED, GZIP)
    body = packer.compress(b"{") + packer.flush(zlib.Z_FULL_FLUSH)
    body += EMPTY_STORED_BLOCK * 400_000  # 2 MB on the wire, one byte decoded
    stream = Served(body, piece=4096)
    response = httpx.Response(200, stream=stream, headers={"content-encoding": "gzip"})
    content, whole = await read_capped(response, 100_000)
    assert (content, whole) == (b"{", False)
    assert stream.sent == 25  # 100 KB and a piece read, of 489 pieces


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "snappy"])
async def test_a_coding_not_asked_for_is_a_clear_response_error(encoding: str) -> None:
    transport = serving(b"\x28\xb5\x2f\xfd whatever", encoding)
    client = bearer_client(None, timeout=1.0, transport=transport)
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=1000)
    with pytest.raises(EmbedderResponseError, match="with a body it cannot read") as caught:
        await endpoint.post({})
    await endpoint.close()
    assert f"content-encoding {encoding!r} is not taken" in caught.value.message
    assert caught.value.status_code == 200
    assert transport.requests[0].headers["accept-encoding"] == ACCEPT_ENCODING == "gzip, deflate"


@pytest.mark.parametrize("layers", [MAX_CODINGS + 1, 1_500])
async def test_a_stack_of_too_many_codings_is_a_clear_response_error(layers: int) -> None:
    # Each coding is a zlib stream and a generator wrapping the one before: 1,500 of
    # them (a 9 KB header, within what the HTTP parser takes) raised RecursionError out
    # of the client, past every caller's handling of the service's errors.
    body = b"{}"
    for _ in range(layers):
        body = compress(iter([body]))
    transport = serving(body, ", ".join(["gzip"] * layers))
    client = bearer_client(None, timeout=1.0, transport=transport)
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=100_000)
    with pytest.raises(EmbedderResponseError, match="with a body it cannot read") as caught:
        await endpoint.post({})
    await endpoint.close()
    assert f"at most {MAX_CODINGS}" in caught.value.message
    assert b"".join(BodyDecoder(", ".join(["gzip"] * MAX_CODINGS)).decode(b"")) == b""


@pytest.mark.parametrize("status", [200, 503])
async def test_a_body_its_coding_cannot_read_is_a_clear_response_error(status: int) -> None:
    broken = bytearray(compress(iter([b'{"choices": []}' * 100])))
    broken[20:40] = b"\xff" * 20
    transport = serving(bytes(broken), "gzip", status=status)
    client = bearer_client(None, timeout=1.0, transport=transport)
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=1000)
    with pytest.raises(EmbedderResponseError, match=f"answered {status} with a body it cannot"):
        await endpoint.post({})
    await endpoint.close()
    with pytest.raises(BodyDecodingError, match="body is not valid gzip"):
        list(BodyDecoder("gzip").decode(bytes(broken)))


def _clients(transport: Any) -> dict[str, tuple[Any, Any, type[Exception]]]:
    """Each client of the shared reader: (client, one call, its response error)."""
    chat = OpenAIChatClient("http://llm.test", "m", transport=transport, max_retries=0)
    embedder = OpenAIEmbedder("http://emb.test", "m", dim=1536, transport=transport)
    reranker = HttpReranker("tei", "http://rr.test", transport=transport, max_retries=0)
    return {
        "chat": (chat, lambda: chat.complete([{"role": "user", "content": "q"}]), LlmResponseError),
        "embeddings": (embedder, lambda: embedder.embed(["x"]), EmbedderResponseError),
        "rerank": (reranker, lambda: reranker.rerank("q", ["x"]), RerankerResponseError),
    }


@pytest.mark.parametrize("kind", ["chat", "embeddings", "rerank"])
async def test_every_client_of_the_reader_caps_a_bomb(kind: str) -> None:
    transport = serving(bomb(), "gzip")
    client, call, refused = _clients(transport)[kind]
    tracemalloc.start()
    try:
        with pytest.raises(refused, match="answered more than"):
            await call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await (client.aclose() if kind == "embeddings" else client.close())
    assert peak < 16 * MiB  # of the bomb's 50 MiB
    assert transport.requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_the_embedders_cap_has_room_for_its_batch_and_a_cap_must_be_positive() -> None:
    default = OpenAIEmbedder("http://emb.test", "m", dim=1536)
    wide = OpenAIEmbedder("http://emb.test", "m", dim=3072, batch_size=256)
    # 32 bytes a float printed in JSON (OpenAI indents each on its own line).
    assert default.max_response_bytes >= 64 * 1536 * 32
    assert wide.max_response_bytes >= 256 * 3072 * 32
    with pytest.raises(ValueError, match="max_response_bytes must be > 0, got 0"):
        OpenAIEmbedder("http://emb.test", "m", dim=4, max_response_bytes=0)
    with pytest.raises(ValueError, match="max_response_bytes must be > 0, got -1"):
        HttpReranker("tei", "http://rr.test", max_response_bytes=-1)
