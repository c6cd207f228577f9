"""The one outbound HTTP client: error mapping, retries and deadline shared by chat,
embeddings and rerankers (issue 18, item 4)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.http_client import (
    JsonEndpoint,
    RetryPolicy,
    ServiceErrors,
    bearer_client,
    openai_endpoint,
)
from ragsift.report.llm import LlmResponseError, LlmUnavailableError, OpenAIChatClient
from ragsift.retrieval.embedders import OpenAIEmbedder
from ragsift.retrieval.errors import EmbedderResponseError, EmbedderUnavailableError
from ragsift.retrieval.rerank import HttpReranker
from ragsift.retrieval.rerank.base import RerankerResponseError, RerankerUnavailableError

pytestmark = pytest.mark.unit

#: No pause between attempts, so a test never waits on a backoff.
NO_PAUSE = RetryPolicy(deadline=30.0, max_retries=2, backoff=0.0, max_pause=0.0)


def _answering(status: int, body: str, headers: dict[str, str] | None = None) -> Any:
    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text=body, headers=headers or {})

    return httpx.MockTransport(reply)


def _calls(transport: Any) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The three clients of an OpenAI-compatible or rerank server, each making one call."""
    chat = OpenAIChatClient("http://llm.test", "m", transport=transport, max_retries=0)
    embedder = OpenAIEmbedder("http://emb.test", "m", dim=4, transport=transport)
    reranker = HttpReranker("tei", "http://rr.test", transport=transport, max_retries=0)
    return {
        "chat": lambda: chat.complete([{"role": "user", "content": "q"}]),
        "embeddings": lambda: embedder.embed(["x"]),
        "rerank": lambda: reranker.rerank("q", ["x"]),
    }


UNAVAILABLE = {
    "chat": LlmUnavailableError,
    "embeddings": EmbedderUnavailableError,
    "rerank": RerankerUnavailableError,
}
REFUSED = {
    "chat": LlmResponseError,
    "embeddings": EmbedderResponseError,
    "rerank": RerankerResponseError,
}


@pytest.mark.parametrize("kind", sorted(UNAVAILABLE))
async def test_429_maps_to_the_same_unavailable_error_with_its_retry_after(kind: str) -> None:
    call = _calls(_answering(429, "slow down", {"Retry-After": "7"}))[kind]
    with pytest.raises(UNAVAILABLE[kind], match="answered 429: slow down") as caught:
        await call()
    assert caught.value.retry_after == 7.0  # type: ignore[attr-defined]  # the unavailable errors
    assert caught.value.status_code == 429  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(REFUSED))
async def test_4xx_maps_to_the_same_response_error_with_the_body(kind: str) -> None:
    call = _calls(_answering(422, "bad input \u202e\x00"))[kind]
    with pytest.raises(REFUSED[kind], match="answered 422") as caught:
        await call()
    assert caught.value.body == "bad input \u202e\x00"  # type: ignore[attr-defined]


# A charset Python's codecs cannot decode text with: a UTF-16 body without its BOM,
# codecs of bytes to bytes (base64, zlib), of str to str (rot13), none at all.
_ODD_CHARSETS = ["utf-16", "utf-32", "rot13", "base64", "zlib_codec", "idna", "no-such-charset"]


@pytest.mark.parametrize("charset", _ODD_CHARSETS)
@pytest.mark.parametrize(("status", "errors"), [(503, UNAVAILABLE), (422, REFUSED), (200, REFUSED)])
async def test_an_answer_in_any_charset_is_the_services_own_error(
    status: int, errors: dict[str, type[Exception]], charset: str
) -> None:
    """The excerpt of an answer decoded it by its Content-Type's charset: a server (or a
    proxy before it) naming one that does not decode raised TypeError, UnicodeError or
    AssertionError out of the client, past the report worker's handling of the LLM's
    errors (it failed the whole batch, again and again) instead of its fallback."""

    def reply(request: httpx.Request) -> httpx.Response:
        body = b"oops: not what you asked for \xff\xc3"
        return httpx.Response(
            status, content=body, headers={"Content-Type": f"text/plain; charset={charset}"}
        )

    for kind, call in _calls(httpx.MockTransport(reply)).items():
        with pytest.raises(errors[kind]) as caught:
            await call()
        if charset.startswith("utf-"):
            continue  # a text encoding: the bytes read as it says, however they read
        # Else as UTF-8: the excerpt is in the message of an error answer, in ``body``
        # of a malformed 200.
        shown = f"{caught.value} {getattr(caught.value, 'body', '')}"
        assert "oops: not what you asked for" in shown, kind


async def test_the_error_body_is_cut_to_the_excerpt() -> None:
    errors = ServiceErrors(
        "things request", "things service", EmbedderUnavailableError, EmbedderResponseError, 12
    )
    client = bearer_client(None, timeout=1.0, transport=_answering(400, "y" * 10_000))
    endpoint = JsonEndpoint("http://x.test/v1/things", errors, client)
    with pytest.raises(EmbedderResponseError) as caught:
        await endpoint.post({})
    assert caught.value.body == "y" * 12
    assert (
        caught.value.message == f"things service http://x.test/v1/things answered 400: {'y' * 12}"
    )
    await endpoint.close()


THINGS = ServiceErrors(
    "things request", "things service", EmbedderUnavailableError, EmbedderResponseError, 12
)


class Endless(httpx.AsyncByteStream):
    """A body that never ends: 64 KiB chunks, counted as they are read."""

    def __init__(self) -> None:
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.sent += 1
            yield b'{"data": "' + b"x" * 65_536


async def test_a_body_past_max_body_bytes_is_the_response_error_and_not_read_on() -> None:
    body = Endless()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=body))
    client = bearer_client(None, timeout=1.0, transport=transport)
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=200_000)
    with pytest.raises(EmbedderResponseError, match="answered more than 200000 bytes") as caught:
        await endpoint.post({})
    assert caught.value.status_code == 200
    assert caught.value.body == '{"data": "xx'
    assert body.sent == 4  # 256 KiB read of an endless body
    await endpoint.close()


async def test_a_body_within_max_body_bytes_reads_as_sent_even_compressed() -> None:
    payload = json.dumps({"data": ["été"] * 1_000}).encode()
    headers = {"content-encoding": "gzip", "content-type": "application/json; charset=utf-8"}
    reply = httpx.Response(200, content=gzip.compress(payload), headers=headers)
    client = bearer_client(None, timeout=1.0, transport=httpx.MockTransport(lambda _: reply))
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=len(payload))
    response = await endpoint.post({})
    assert response.json() == json.loads(payload)
    await endpoint.close()


async def test_an_error_body_past_max_body_bytes_keeps_its_status_and_start() -> None:
    client = bearer_client(None, timeout=1.0, transport=_answering(503, "busy" * 10_000))
    endpoint = JsonEndpoint("http://x.test/v1/things", THINGS, client, max_body_bytes=100)
    with pytest.raises(EmbedderUnavailableError, match="answered 503: busybusybusy"):
        await endpoint.post({})
    await endpoint.close()
    with pytest.raises(ValueError, match="max_body_bytes must be > 0, got 0"):
        JsonEndpoint("http://x.test", THINGS, client, max_body_bytes=0)


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://h:1", "http://h:1/v1/embeddings"),
        ("http://h:1/", "http://h:1/v1/embeddings"),
        ("http://h:1/v1", "http://h:1/v1/embeddings"),
        ("http://h:1/v1/", "http://h:1/v1/embeddings"),
    ],
)
def test_openai_endpoint_adds_v1_once(base_url: str, expected: str) -> None:
    assert openai_endpoint(base_url, "embeddings") == expected


def test_pause_doubles_honours_retry_after_and_is_capped() -> None:
    policy = RetryPolicy(deadline=1.0, max_retries=5, backoff=0.5, max_pause=3.0)
    assert [policy.pause(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.pause(1, 2.5) == 2.5  # the server asked for longer
    assert policy.pause(1, 60.0) == 3.0  # but never past the cap: the batch is waiting
    assert policy.pause(3, 0.1) == 2.0  # a shorter Retry-After does not shorten the backoff


async def test_retryable_errors_are_retried_then_raised_with_the_attempt_count() -> None:
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise LlmUnavailableError(f"down #{calls}")

    with pytest.raises(LlmUnavailableError, match="down #3") as caught:
        await NO_PAUSE.run(failing, LlmUnavailableError, lambda n: AssertionError(n))
    assert calls == 3
    assert caught.value.attempts == 3


async def test_success_after_a_retryable_failure_is_returned() -> None:
    answers: list[Exception | str] = [RerankerUnavailableError("503"), "ok"]

    async def flaky() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await NO_PAUSE.run(flaky, RerankerUnavailableError, lambda n: AssertionError(n)) == "ok"
    assert answers == []


async def test_a_final_error_is_not_retried() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise LlmResponseError("answered 401")

    with pytest.raises(LlmResponseError):
        await NO_PAUSE.run(refused, LlmUnavailableError, lambda n: AssertionError(n))
    assert calls == 1


async def test_the_deadline_ends_a_hung_call_and_names_the_attempts() -> None:
    policy = RetryPolicy(deadline=0.05, max_retries=2, backoff=0.0, max_pause=0.0)

    async def hangs() -> None:
        await asyncio.Event().wait()

    def past_deadline(attempts: int) -> RagsiftError:
        return ServiceUnavailableError(f"gave up after {attempts}", service="x")

    with pytest.raises(ServiceUnavailableError, match="gave up after 1"):
        await policy.run(hangs, LlmUnavailableError, past_deadline)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("deadline", 0.0, "deadline must be > 0, got 0.0"),
        ("max_retries", -1, "max_retries must be >= 0, got -1"),
        ("backoff", -0.5, "backoff must be >= 0, got -0.5"),
    ],
)
def test_bad_policies_are_named(field: str, value: float, message: str) -> None:
    settings: dict[str, Any] = {"deadline": 1.0, "max_retries": 1, "backoff": 0.1, "max_pause": 1.0}
    settings[field] = value
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**settings)
