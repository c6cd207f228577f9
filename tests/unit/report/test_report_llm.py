"""OpenAIChatClient against a real local HTTP server speaking the chat completions protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from ragsift.confidence import REFUSAL_SENTENCE
from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.observability.metrics import Metrics
from ragsift.report import (
    LlmDeadlineError,
    LlmResponseError,
    LlmUnavailableError,
    OpenAIChatClient,
    ReportBuilder,
    ReportSettings,
)
from ragsift.schemas import Report, RetrievalResult
from ragsift.workers.report import ReportHandler

MESSAGES: list[Any] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
]


def completion(text: str) -> dict[str, Any]:
    """A chat completion body as OpenAI-compatible servers send it."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "stub-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }


@dataclass
class StubServer:
    """Serves a script of responses at /v1/chat/completions and records requests."""

    script: list[Callable[[], web.StreamResponse]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    delay: float = 0.0
    trickle_s: float = 0.0  # > 0: send a completion one byte at a time, this far apart
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.trickle_s:
            return await self._trickle(request)
        make = self.script[0] if len(self.script) == 1 else self.script.pop(0)
        return make()

    async def _trickle(self, request: web.Request) -> web.StreamResponse:
        # Every byte arrives well within httpx's per-read timeout: only a total deadline ends it.
        body = json.dumps(
            completion("Orbit thermostats can be returned within 30 days [1].")
        ).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(body)
        await response.prepare(request)
        try:
            for i in range(len(body)):
                await response.write(body[i : i + 1])
                await asyncio.sleep(self.trickle_s)
        except ConnectionError:
            pass  # the client gave up: what the deadline is for
        return response


@pytest.fixture
async def server() -> AsyncIterator[StubServer]:
    stub = StubServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", stub.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stub.url = f"http://127.0.0.1:{port}"
    yield stub
    await runner.cleanup()


def ok(text: str) -> Callable[[], web.StreamResponse]:
    return lambda: web.json_response(completion(text))


def status(code: int, body: str = "boom", **headers: str) -> Callable[[], web.StreamResponse]:
    return lambda: web.Response(status=code, text=body, headers=headers)


async def test_completion_request_and_reply(server: StubServer) -> None:
    server.script = [ok("Hello there.")]
    client = OpenAIChatClient(server.url, "stub-model", "sk-test", max_tokens=64)
    try:
        reply = await client.complete(MESSAGES)
    finally:
        await client.close()
    assert reply.text == "Hello there."
    assert reply.model == "stub-model"
    assert reply.finish_reason == "stop"
    sent = server.requests[0]
    assert sent["model"] == "stub-model"
    assert sent["messages"] == MESSAGES
    assert sent["stream"] is False
    assert sent["max_tokens"] == 64
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    assert "sk-test" not in repr(client)


async def test_500_then_success_is_retried(server: StubServer) -> None:
    server.script = [status(500), status(429, **{"Retry-After": "0"}), ok("Recovered.")]
    client = OpenAIChatClient(server.url + "/v1", "m", max_retries=2, backoff=0.01)
    try:
        reply = await client.complete(MESSAGES)
    finally:
        await client.close()
    assert reply.text == "Recovered."
    assert len(server.requests) == 3


async def test_persistent_5xx_raises_unavailable_after_bounded_retries(
    server: StubServer,
) -> None:
    server.script = [status(503, "overloaded")]
    client = OpenAIChatClient(server.url, "m", max_retries=2, backoff=0.01)
    with pytest.raises(LlmUnavailableError, match="answered 503: overloaded") as info:
        await client.complete(MESSAGES)
    await client.close()
    assert isinstance(info.value, ServiceUnavailableError)
    assert info.value.service == "llm"
    assert info.value.status_code == 503
    assert info.value.attempts == 3
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("respond", "message"),
    [
        (lambda: web.Response(status=200, text="not json"), "malformed chat completion"),
        (lambda: web.json_response({"choices": []}), "malformed chat completion.*IndexError"),
        (lambda: web.json_response({"object": "error"}), "malformed chat completion.*KeyError"),
        # Nested past the JSON parser's stack: it was a RecursionError out of the handler.
        (
            lambda: web.Response(text="[" * 100_000 + "]" * 100_000),
            "malformed chat completion.*RecursionError",
        ),
        (
            lambda: web.Response(
                text='{"choices": [{"message": {"content": '
                + "[" * 100_000
                + "]" * 100_000
                + "}}]}"
            ),
            "malformed chat completion.*RecursionError",
        ),
        (
            lambda: web.json_response({"choices": [{"message": {"content": None}}]}),
            "content is NoneType",
        ),
    ],
)
async def test_malformed_body_is_a_clear_error(
    server: StubServer, respond: Callable[[], web.StreamResponse], message: str
) -> None:
    server.script = [respond]
    client = OpenAIChatClient(server.url, "m", max_retries=2, backoff=0.01)
    with pytest.raises(LlmResponseError, match=message) as info:
        await client.complete(MESSAGES)
    await client.close()
    assert info.value.stage == "generate"
    assert isinstance(info.value, RagsiftError)
    assert not isinstance(info.value, ServiceUnavailableError)
    assert len(server.requests) == 1  # not retried


async def test_a_completion_past_max_response_bytes_is_a_clear_error(server: StubServer) -> None:
    # Before, any body was read whole into memory: a broken or hostile server's too.
    server.script = [ok("refund " * 1_000_000)]  # 7 MB of answer, past the default 4 MiB
    client = OpenAIChatClient(server.url, "m", max_retries=2, backoff=0.01)
    with pytest.raises(LlmResponseError, match="answered more than 4194304 bytes") as info:
        await client.complete(MESSAGES)
    await client.close()
    assert (info.value.stage, info.value.status_code) == ("generate", 200)
    assert len(server.requests) == 1  # not retried
    server.script = [ok("Orbit thermostats can be returned within 30 days [1].")]
    small = OpenAIChatClient(server.url, "m", max_response_bytes=100)
    with pytest.raises(LlmResponseError, match="answered more than 100 bytes"):
        await small.complete(MESSAGES)
    await small.close()
    roomy = OpenAIChatClient(server.url, "m", max_response_bytes=1_000)
    assert (await roomy.complete(MESSAGES)).text.startswith("Orbit")
    await roomy.close()


async def test_4xx_is_not_retried(server: StubServer) -> None:
    server.script = [status(401, json.dumps({"error": "bad key"}))]
    client = OpenAIChatClient(server.url, "m", max_retries=2, backoff=0.01)
    with pytest.raises(LlmResponseError, match="answered 401") as info:
        await client.complete(MESSAGES)
    await client.close()
    assert info.value.status_code == 401
    assert len(server.requests) == 1


async def test_timeout_is_unavailable(server: StubServer) -> None:
    server.script = [ok("late")]
    server.delay = 0.25
    client = OpenAIChatClient(server.url, "m", timeout=0.05, max_retries=0)
    with pytest.raises(LlmUnavailableError, match="timed out"):
        await client.complete(MESSAGES)
    await client.close()


async def test_unreachable_is_unavailable() -> None:
    client = OpenAIChatClient("http://127.0.0.1:9", "m", max_retries=0)
    with pytest.raises(LlmUnavailableError, match="unreachable"):
        await client.complete(MESSAGES)
    await client.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "ftp://x"}, "base_url must be an http"),
        ({"model": ""}, "model must be non-empty"),
        ({"timeout": 0}, "timeout must be > 0, got 0"),
        ({"max_retries": -1}, "max_retries must be >= 0, got -1"),
        ({"max_response_bytes": 0}, "max_response_bytes must be > 0, got 0"),
    ],
)
def test_arguments_are_checked(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=message):
        OpenAIChatClient(**args)


async def test_builder_over_the_wire(
    server: StubServer, make_result: Callable[..., RetrievalResult]
) -> None:
    server.script = [
        status(500),
        ok("Orbit thermostats can be returned within 30 days for a full refund [1]."),
        ok("Orbit thermostats can be returned within 90 days [1]."),
    ]
    settings = ReportSettings(llm_base_url=server.url, llm_model="stub-model")
    client = settings.make_llm_client()
    assert client is not None
    client.backoff = 0.01
    builder = ReportBuilder(settings, client)
    try:
        good, _ = await builder.build(make_result())
        bad, evidence = await builder.build(make_result(query_id="q2"))
    finally:
        await client.close()
    assert good.generated_by == "llm"
    assert "30 days" in good.answer
    assert bad.answer == REFUSAL_SENTENCE
    assert "RAG_RESPONSE_INVALIDATED" in {e.type.value for e in evidence}
    user = server.requests[0]["messages"][1]["content"]
    assert "BEGIN SOURCE [1]" in user


# A 1-byte-per-50-ms server would take ~10 s for the whole body; the deadline is far below.
TRICKLE_S = 0.05
DEADLINE_S = 0.5


async def test_trickling_server_hits_the_total_deadline(server: StubServer) -> None:
    server.trickle_s = TRICKLE_S
    client = OpenAIChatClient(server.url, "m", timeout=5.0, deadline=DEADLINE_S, max_retries=0)
    with pytest.raises(LlmDeadlineError, match=r"no complete answer within 0\.5 s") as info:
        await client.complete(MESSAGES)
    await client.close()
    assert isinstance(info.value, LlmUnavailableError)  # callers treat it as an outage
    assert info.value.attempts == 1


async def test_deadline_covers_retries_and_their_pauses(server: StubServer) -> None:
    # Retry-After 5 s twice would hold the call ~10 s without a total deadline.
    server.script = [status(503, "busy", **{"Retry-After": "5"})]
    client = OpenAIChatClient(server.url, "m", deadline=DEADLINE_S, max_retries=2, backoff=0.01)
    with pytest.raises(LlmDeadlineError) as info:
        await client.complete(MESSAGES)
    await client.close()
    assert info.value.attempts == 1
    assert len(server.requests) == 1


def test_deadline_must_be_positive() -> None:
    with pytest.raises(ValueError, match="deadline must be > 0, got 0"):
        OpenAIChatClient("http://127.0.0.1:1", "m", deadline=0)


async def test_builder_answers_extractively_on_deadline_counts_it_and_goes_on(
    server: StubServer, make_result: Callable[..., RetrievalResult]
) -> None:
    settings = ReportSettings(
        llm_base_url=server.url, llm_model="m", llm_timeout_s=5.0, llm_deadline_s=DEADLINE_S
    )
    client = settings.make_llm_client()
    assert client is not None
    metrics = Metrics()
    handler = ReportHandler(ReportBuilder(settings, client), metrics)
    server.trickle_s = TRICKLE_S
    try:
        (stalled,) = await handler.handle_batch([make_result()])
        server.trickle_s = 0.0
        server.script = [ok("Orbit thermostats can be returned within 30 days for a refund [1].")]
        next_one = await handler.builder.build_report(make_result(query_id="q2"))
    finally:
        await client.close()
    assert isinstance(stalled, list)
    assert len(stalled) == 1  # the report, no evidence
    report = stalled[0].event
    assert isinstance(report, Report)
    assert report.generated_by == "extractive"
    assert not report.is_refusal
    assert "30 days" in report.answer
    assert next_one.report.generated_by == "llm"
    assert next_one.llm_fallback is None
    fallbacks = metrics.registry.get_sample_value(
        "ragsift_report_llm_fallbacks_total", {"reason": "deadline"}
    )
    assert fallbacks == 1.0


async def test_url_credentials_stay_out_of_errors_and_repr(server: StubServer) -> None:
    unreachable = OpenAIChatClient("http://svc:s3cret@127.0.0.1:9/v1", "m", max_retries=0)
    with pytest.raises(LlmUnavailableError) as info:
        await unreachable.complete(MESSAGES)
    await unreachable.close()
    assert "s3cret" not in info.value.message
    assert "s3cret" not in repr(unreachable)
    assert "svc:**********@127.0.0.1:9" in info.value.message
    server.script = [status(503, "busy")]
    host = server.url.removeprefix("http://")
    refused = OpenAIChatClient(f"http://svc:s3cret@{host}", "m", max_retries=0)
    with pytest.raises(LlmUnavailableError) as info:
        await refused.complete(MESSAGES)
    await refused.close()
    assert "s3cret" not in info.value.message
    assert server.headers[0]["Authorization"].startswith("Basic ")  # still sent, as auth
