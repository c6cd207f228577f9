"""HttpReranker against a real local HTTP server speaking TEI, Cohere and Jina rerank."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.retrieval.rerank import (
    HttpReranker,
    RerankerResponseError,
    RerankerUnavailableError,
    RerankProtocol,
    logit,
)

QUERY = "how are refunds paid"
TEXTS = ["shipping takes three days", "refunds are paid by bank transfer", "refunds policy"]


def overlap(query: str, text: str) -> int:
    return len(set(query.split()) & set(text.split()))


@dataclass
class RerankServer:
    """Speaks TEI (/rerank) and Cohere/Jina (/v1/rerank): scores by word overlap,
    answers best first as real servers do; ``script`` overrides answers in order."""

    script: list[Callable[[], web.StreamResponse]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    delay: float = 0.0
    url: str = ""

    async def tei(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if self.script:
            return self.script.pop(0)()
        scores = [overlap(body["query"], t) - 1.5 for t in body["texts"]]  # raw logits
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return web.json_response([{"index": i, "score": scores[i]} for i in order])

    async def cohere(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if self.script:
            return self.script.pop(0)()
        docs = body["documents"]
        probs = [overlap(body["query"], d) / 4 for d in docs]
        order = sorted(range(len(docs)), key=lambda i: -probs[i])[: body.get("top_n")]
        return web.json_response(
            {"id": "r-1", "results": [{"index": i, "relevance_score": probs[i]} for i in order]}
        )

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        self.requests.append((request.path, body))
        self.headers.append(dict(request.headers))
        if self.delay:
            await asyncio.sleep(self.delay)
        return body


@pytest.fixture
async def server() -> AsyncIterator[RerankServer]:
    stub = RerankServer()
    app = web.Application()
    app.router.add_post("/rerank", stub.tei)
    app.router.add_post("/v1/rerank", stub.cohere)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    stub.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield stub
    await runner.cleanup()


def status(code: int, body: str = "boom", **headers: str) -> Callable[[], web.StreamResponse]:
    return lambda: web.Response(status=code, text=body, headers=headers)


def answer(payload: Any) -> Callable[[], web.StreamResponse]:
    return lambda: web.Response(
        status=200, text=json.dumps(payload), content_type="application/json"
    )


def client(server: RerankServer, protocol: RerankProtocol = "tei", **kw: Any) -> HttpReranker:
    model = None if protocol == "tei" else "rerank-test"
    kw.setdefault("backoff", 0.01)
    return HttpReranker(protocol, server.url, model, **kw)


async def test_tei_request_and_scores_in_request_order(server: RerankServer) -> None:
    reranker = client(server, "tei", api_key="sk-tei")
    try:
        scores = await reranker.rerank(QUERY, TEXTS)
    finally:
        await reranker.close()
    assert scores == [-1.5, 1.5, -0.5]  # raw logits, back in the order sent
    path, body = server.requests[0]
    assert path == "/rerank"
    assert body == {"query": QUERY, "texts": TEXTS, "raw_scores": True, "truncate": True}
    assert server.headers[0]["Authorization"] == "Bearer sk-tei"
    assert reranker.reranker_id == "tei:default"
    assert "sk-tei" not in repr(reranker)


@pytest.mark.parametrize("protocol", ["cohere", "jina"])
async def test_cohere_and_jina_probabilities_become_logits(
    server: RerankServer, protocol: RerankProtocol
) -> None:
    reranker = client(server, protocol)
    try:
        scores = await reranker.rerank(QUERY, TEXTS)
    finally:
        await reranker.close()
    assert scores == pytest.approx([logit(0.0), logit(0.75), logit(0.25)])
    assert all(math.isfinite(s) for s in scores)  # a probability of 0 still gives a number
    path, body = server.requests[0]
    assert path == "/v1/rerank"
    assert body == {
        "model": "rerank-test",
        "query": QUERY,
        "documents": TEXTS,
        "top_n": 3,
        "return_documents": False,
    }
    assert reranker.reranker_id == f"{protocol}:rerank-test"


async def test_versioned_base_url_is_not_doubled(server: RerankServer) -> None:
    reranker = HttpReranker("jina", server.url + "/v1/", "m")
    try:
        await reranker.rerank(QUERY, TEXTS)
    finally:
        await reranker.close()
    assert server.requests[0][0] == "/v1/rerank"


async def test_no_texts_no_request(server: RerankServer) -> None:
    reranker = client(server)
    assert await reranker.rerank(QUERY, []) == []
    await reranker.close()
    assert server.requests == []


async def test_5xx_and_429_are_retried_honouring_retry_after(server: RerankServer) -> None:
    server.script = [status(503), status(429, **{"Retry-After": "0"})]
    reranker = client(server, max_retries=2)
    try:
        scores = await reranker.rerank(QUERY, TEXTS)
    finally:
        await reranker.close()
    assert scores == [-1.5, 1.5, -0.5]
    assert len(server.requests) == 3


async def test_retry_after_is_waited_for(server: RerankServer) -> None:
    server.script = [status(429, **{"Retry-After": "0.3"})]
    reranker = client(server, max_retries=1, deadline=0.2)
    # The server asks for 0.3 s; the deadline (0.2 s) passes during the pause.
    with pytest.raises(RerankerUnavailableError, match=r"within 0\.2 s"):
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()
    assert len(server.requests) == 1


async def test_persistent_5xx_is_unavailable_after_bounded_retries(server: RerankServer) -> None:
    server.script = [status(500, "overloaded") for _ in range(3)]
    reranker = client(server, max_retries=2)
    with pytest.raises(RerankerUnavailableError, match="answered 500: overloaded") as info:
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()
    assert isinstance(info.value, ServiceUnavailableError)
    assert info.value.service == "reranker"
    assert info.value.attempts == 3
    assert len(server.requests) == 3


async def test_4xx_is_a_clear_error_not_retried(server: RerankServer) -> None:
    server.script = [status(413, '{"error": "batch size 300 > maximum allowed batch size 32"}')]
    reranker = client(server, max_retries=2)
    with pytest.raises(RerankerResponseError, match=r"answered 413.*maximum allowed") as info:
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()
    assert info.value.status_code == 413
    assert info.value.stage == "rerank"
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("protocol", "payload", "message"),
    [
        ("tei", {"error": "x"}, "expected a list"),
        ("tei", [{"index": 0, "score": 1.0}], "no score for 2 of 3"),
        ("tei", [{"index": i, "score": 1.0} for i in (0, 1, 1)], "appears twice"),
        ("tei", [{"index": i, "score": 1.0} for i in (0, 1, 7)], r"integer in \[0, 3\)"),
        ("tei", [{"index": i, "score": 1.0} for i in (0, 1, -1)], r"integer in \[0, 3\)"),
        ("tei", [{"index": True, "score": 1.0}], "integer"),
        ("tei", [{"index": 0, "score": "high"}], "must be a number"),
        ("tei", [{"index": 0}], "KeyError"),
        ("tei", [{"index": i, "score": [[[[1]]]]} for i in range(3)], "must be a number"),
        ("tei", [{"index": i, "score": 1e308 * 10} for i in range(3)], "non-finite"),
        ("cohere", {"results": "all good"}, "expected a list"),
        ("cohere", {"data": []}, "KeyError"),
        (
            "cohere",
            {"results": [{"index": i, "relevance_score": 3.5} for i in range(3)]},
            r"probability in \[0, 1\]",
        ),
        ("jina", {"results": [{"index": 0, "relevance_score": 0.4}]}, "no score for 2 of 3"),
    ],
)
async def test_malformed_answers_are_clear_errors_not_retried(
    server: RerankServer, protocol: RerankProtocol, payload: Any, message: str
) -> None:
    server.script = [answer(payload)]
    reranker = client(server, protocol, max_retries=2)
    with pytest.raises(RerankerResponseError, match=message) as info:
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()
    assert isinstance(info.value, RagsiftError)
    assert not isinstance(info.value, ServiceUnavailableError)
    assert len(server.requests) == 1


async def test_non_json_body_is_a_clear_error(server: RerankServer) -> None:
    server.script = [lambda: web.Response(status=200, text="<html>proxy</html>")]
    reranker = client(server)
    with pytest.raises(RerankerResponseError, match="malformed rerank answer"):
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()


async def test_an_answer_nested_past_the_parser_is_a_clear_error(server: RerankServer) -> None:
    # RecursionError escaped the client's error handling and failed the whole batch.
    deep = "[" * 100_000 + "]" * 100_000
    server.script = [lambda: web.Response(status=200, text=deep, content_type="application/json")]
    reranker = client(server)
    with pytest.raises(RerankerResponseError, match="malformed rerank answer"):
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()


async def test_total_deadline_bounds_a_slow_server(server: RerankServer) -> None:
    server.delay = 1.0
    reranker = client(server, timeout=5.0, deadline=0.2, max_retries=5)
    with pytest.raises(RerankerUnavailableError, match=r"within 0\.2 s"):
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()


async def test_unreachable_is_unavailable() -> None:
    reranker = HttpReranker("tei", "http://127.0.0.1:9", max_retries=1, backoff=0.0)
    with pytest.raises(RerankerUnavailableError, match="unreachable"):
        await reranker.rerank(QUERY, TEXTS)
    await reranker.close()


async def test_rerank_many_isolates_each_querys_failure(server: RerankServer) -> None:
    reranker = client(server, "cohere", max_retries=0, concurrency=1)
    server.script = [answer({"results": []})]  # the first request gets a broken answer
    try:
        first, second = await reranker.rerank_many([(QUERY, TEXTS), (QUERY, TEXTS[:2])])
    finally:
        await reranker.close()
    assert isinstance(first, RerankerResponseError)
    assert second == pytest.approx([logit(0.0), logit(0.75)])


async def test_hostile_texts_reach_the_server_intact(server: RerankServer) -> None:
    hostile = ["\u0000\u202e control", "退款 حساب", "x" * 100_000, json.dumps({"a": [[[[[]]]]]})]
    reranker = client(server)
    try:
        scores = await reranker.rerank("refunds \u0007", hostile)
    finally:
        await reranker.close()
    assert len(scores) == 4
    assert server.requests[0][1]["texts"] == hostile


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"protocol": "openai"}, "protocol must be one of"),
        ({"base_url": "127.0.0.1:8080"}, "http"),
        ({"protocol": "cohere", "model": ""}, "model must be non-empty"),
        ({"deadline": 0}, "deadline must be > 0"),
        ({"concurrency": 0}, "concurrency must be > 0"),
        ({"max_retries": -1}, "max_retries must be >= 0"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"protocol": "tei", "base_url": "http://127.0.0.1:1", **kwargs}
    with pytest.raises(ValueError, match=message):
        HttpReranker(**args)


def test_credentials_in_the_url_are_masked() -> None:
    reranker = HttpReranker("tei", "https://user:hunter2@rerank.example")
    assert "hunter2" not in repr(reranker)
    assert "hunter2" not in reranker.shown_url
