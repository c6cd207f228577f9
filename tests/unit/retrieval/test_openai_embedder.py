"""OpenAIEmbedder against a local HTTP server speaking ``/v1/embeddings``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from ragsift.retrieval.embedders import OpenAIEmbedder
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderResponseError,
    EmbedderUnavailableError,
)

pytestmark = pytest.mark.unit

DIM = 8


@dataclass
class Stub:
    """What the stub server answers and what it saw."""

    dim: int = DIM
    status: int = 200
    #: answered as it is, in place of the embeddings, when set
    body: bytes | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)


def _vector(text: str, dim: int) -> list[float]:
    rng = np.random.default_rng(sum(map(ord, text)))
    return (rng.random(dim) * 3).tolist()  # not normalized: the client must normalize


@pytest.fixture
def server() -> Iterator[tuple[str, Stub]]:
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            stub.requests.append(body)
            stub.auth.append(self.headers.get("Authorization"))
            if self.path != "/v1/embeddings":
                payload, status = {"error": "not found"}, 404
            elif stub.status != 200:
                payload, status = {"error": {"message": "boom"}}, stub.status
            else:
                data = [
                    {"object": "embedding", "index": i, "embedding": _vector(t, stub.dim)}
                    for i, t in enumerate(body["input"])
                ]
                payload, status = (
                    {"object": "list", "data": data[::-1], "model": body["model"]},
                    200,
                )
            raw = stub.body if stub.body is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if status == 429:
                self.send_header("Retry-After", "2")
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", stub
    httpd.shutdown()
    httpd.server_close()


async def test_embeds_in_batches_in_order_and_normalized(server: tuple[str, Stub]) -> None:
    url, stub = server
    embedder = OpenAIEmbedder(url, "nomic-embed-text", "sk-test", dim=DIM, batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = await embedder.embed(texts)
    await embedder.aclose()
    assert vectors.shape == (5, DIM)
    assert vectors.dtype == np.float32
    assert [len(r["input"]) for r in stub.requests] == [2, 2, 1]
    assert stub.requests[0]["model"] == "nomic-embed-text"
    assert stub.auth == ["Bearer sk-test"] * 3
    for text, row in zip(texts, vectors, strict=True):  # order restored from "index"
        expected = np.asarray(_vector(text, DIM))
        assert row == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    assert embedder.embedder_id == "openai-nomic-embed-text-8"


async def test_dimension_mismatch_is_an_error(server: tuple[str, Stub]) -> None:
    url, stub = server
    stub.dim = DIM + 1
    embedder = OpenAIEmbedder(url, "m", dim=DIM)
    with pytest.raises(DimensionMismatchError) as caught:
        await embedder.embed_one("x")
    assert (caught.value.expected, caught.value.actual) == (DIM, DIM + 1)
    assert stub.auth == [None]
    await embedder.aclose()


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (500, EmbedderUnavailableError),
        (429, EmbedderUnavailableError),
        (400, EmbedderResponseError),
    ],
)
async def test_non_200_answers_are_clear_errors(
    server: tuple[str, Stub], status: int, error: type[Exception]
) -> None:
    url, stub = server
    stub.status = status
    embedder = OpenAIEmbedder(url, "m", dim=DIM)
    with pytest.raises(error, match=str(status)) as caught:
        await embedder.embed(["x"])
    assert getattr(caught.value, "status_code", None) == status
    if status == 429:
        assert caught.value.retry_after == 2.0  # type: ignore[attr-defined]
    await embedder.aclose()


async def test_an_answer_nested_past_the_parser_is_a_malformed_answer(
    server: tuple[str, Stub],
) -> None:
    # RecursionError escaped the client's error handling and failed the whole batch.
    url, stub = server
    stub.body = b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    # 200 KB: past the default cap of a batch of DIM-wide vectors, so room is made.
    embedder = OpenAIEmbedder(url, "m", dim=DIM, max_response_bytes=1_000_000)
    with pytest.raises(EmbedderResponseError, match="malformed embeddings answer"):
        await embedder.embed(["x"])
    await embedder.aclose()


async def test_unreachable_server_is_unavailable() -> None:
    embedder = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", dim=DIM, timeout=2.0)
    with pytest.raises(EmbedderUnavailableError):
        await embedder.embed(["x"])
    await embedder.aclose()
