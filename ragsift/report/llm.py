"""The report worker's LLM edge: an OpenAI-compatible ``/v1/chat/completions`` client.

Any server speaking that protocol works (OpenAI, vLLM, Ollama, llama.cpp,
TGI). Requests are non-streaming; 5xx, 429, timeouts and connection failures
are retried a bounded number of times with exponential backoff (honouring
``Retry-After``) and then raise :class:`LlmUnavailableError`; a 4xx or a body
that is not a chat completion (or is longer than ``max_response_bytes``) raises
:class:`LlmResponseError` at once.

httpx's timeout bounds each read, so a server that trickles a byte at a time
never trips it; each call therefore also has a total deadline, retries and
pauses included, past which it raises :class:`LlmDeadlineError` (an
:class:`LlmUnavailableError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.http_client import (
    JsonEndpoint,
    RetryPolicy,
    Secret,
    ServiceErrors,
    bearer_client,
    check_base_url,
    openai_endpoint,
)
from ragsift.report.prompts import ChatMessage

__all__ = [
    "ChatClient",
    "ChatReply",
    "LlmDeadlineError",
    "LlmResponseError",
    "LlmUnavailableError",
    "OpenAIChatClient",
]

DEFAULT_TIMEOUT_S = 30.0  # a non-streamed answer of a few hundred tokens takes seconds
# Whole call, retries included: one slow answer plus a retry, then the extractive report.
DEFAULT_DEADLINE_S = 20.0
DEFAULT_MAX_RETRIES = 2  # three attempts in all: rides out a restart, not an outage
DEFAULT_BACKOFF_S = 0.5  # first pause; doubles per attempt
MAX_BACKOFF_S = 10.0  # cap on any pause, Retry-After included: the batch is waiting
DEFAULT_MAX_TOKENS = 512  # reports are a few sentences; bounds cost and latency
# Most bytes of a chat completion read: 512 tokens are a few KB of JSON (tens of KB with
# every character \u-escaped, or a reasoning trace); more is a broken or hostile server,
# whose body would otherwise be held in memory whole, however large.
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
_BODY_EXCERPT = 500


class LlmUnavailableError(ServiceUnavailableError):
    """The chat endpoint did not answer usefully (5xx, 429, timeout, unreachable) after retries."""

    stage = "generate"

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        attempts: int = 1,
        query_id: str | None = None,
    ) -> None:
        super().__init__(message, service="llm", retry_after=retry_after, query_id=query_id)
        self.status_code = status_code
        self.attempts = attempts


class LlmDeadlineError(LlmUnavailableError):
    """The chat call, retries and pauses included, did not finish within its total deadline."""

    def __init__(
        self,
        message: str,
        *,
        deadline_s: float,
        attempts: int = 1,
        query_id: str | None = None,
    ) -> None:
        super().__init__(message, attempts=attempts, query_id=query_id)
        self.deadline_s = deadline_s


class LlmResponseError(RagsiftError):
    """The chat endpoint refused the request (4xx) or answered with something not a completion."""

    stage = "generate"

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        body: str | None = None,
        query_id: str | None = None,
    ) -> None:
        super().__init__(message, query_id=query_id)
        self.status_code = status_code
        self.body = body


_ERRORS = ServiceErrors(
    "chat request", "chat service", LlmUnavailableError, LlmResponseError, _BODY_EXCERPT
)


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What the model said: the text, the model that said it, why it stopped."""

    text: str
    model: str
    finish_reason: str | None = None


class ChatClient(Protocol):
    """An LLM that completes a chat (the report builder's only I/O)."""

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """The assistant's reply to ``messages``."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


_MASK = "**********"


def _without_password(url: str) -> str:
    """``url`` fit for messages and logs: a password (or lone user token) in it masked."""
    userinfo = httpx.URL(url).userinfo.decode()
    if not userinfo:
        return url
    user, has_password, _ = userinfo.partition(":")
    # A lone userinfo is often the token itself (https://token@host): mask it whole.
    shown = f"{user}:{_MASK}" if has_password else _MASK
    return url.replace(f"{userinfo}@", f"{shown}@", 1)


class OpenAIChatClient:
    """A client of an OpenAI-compatible chat completions endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:11434`` (``/v1`` is appended when missing).
        model: the model name sent in each request.
        api_key: bearer token (str or pydantic ``SecretStr``); ``None`` for local servers.
        timeout: seconds per read (httpx: connect, read, write, pool), ``> 0``.
        deadline: seconds for the whole call, retries and pauses included, ``> 0``.
        max_retries: extra attempts on retryable failures, ``>= 0``.
        backoff: first pause between attempts in seconds (doubles each time), ``>= 0``.
        temperature: sampling temperature; 0 keeps answers close to the sources.
        max_tokens: longest reply, ``> 0``.
        max_response_bytes: most bytes of a response body read, ``> 0``; a longer
            completion raises :class:`LlmResponseError`.
        transport: an httpx transport (tests, proxies).

    Credentials in ``base_url`` (``https://user:password@host``) are sent as HTTP
    basic auth and masked in ``shown_url``, which errors and ``repr`` use.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | Secret | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        deadline: float = DEFAULT_DEADLINE_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_base_url(base_url)
        if not model:
            raise ValueError(f"model must be non-empty, got {model!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.retry = RetryPolicy(deadline, max_retries, backoff, MAX_BACKOFF_S)
        if not 0.0 <= temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {temperature}")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {max_tokens}")
        if max_response_bytes <= 0:
            raise ValueError(f"max_response_bytes must be > 0, got {max_response_bytes}")
        self.url = openai_endpoint(base_url, "chat/completions")
        self.shown_url = _without_password(self.url)
        self.model = model
        self.deadline = deadline
        self.max_retries = max_retries
        self.backoff = backoff
        self.temperature = temperature
        self.max_tokens = max_tokens
        client = bearer_client(api_key, timeout=timeout, transport=transport)
        self._endpoint = JsonEndpoint(
            self.url,
            _ERRORS,
            client,
            shown_url=self.shown_url,
            max_body_bytes=max_response_bytes,
        )

    def __repr__(self) -> str:
        # Never the key: reprs end up in logs.
        return f"OpenAIChatClient(url={self.shown_url!r}, model={self.model!r})"

    async def complete(self, messages: Sequence[ChatMessage]) -> ChatReply:
        """The model's reply, after up to ``max_retries`` retries of retryable failures.

        Raises:
            LlmDeadlineError: no reply within ``deadline`` seconds, retries included.
            LlmUnavailableError: every attempt failed with 5xx, 429, a timeout or no connection.
            LlmResponseError: a 4xx answer, a malformed body or one longer than
                ``max_response_bytes`` (not retried).
        """
        if not messages:
            raise ValueError("messages must not be empty")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": False,
        }

        async def attempt() -> ChatReply:
            return self._parse(await self._endpoint.post(body))

        def past_deadline(attempts: int) -> LlmDeadlineError:
            return LlmDeadlineError(
                f"chat call to {self.shown_url} got no complete answer within {self.deadline:g} s"
                f" ({attempts} attempt(s))",
                deadline_s=self.deadline,
                attempts=attempts,
            )

        return await self.retry.run(attempt, LlmUnavailableError, past_deadline)

    def _parse(self, response: httpx.Response) -> ChatReply:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            content = choice["message"]["content"]
            if not isinstance(content, str):
                raise TypeError(f"message content is {type(content).__name__}, not a string")
        # RecursionError: JSON nested past the parser's stack ("[" * 100_000) is as
        # malformed as any other; it escaped the handler and failed the whole batch.
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
            raise LlmResponseError(
                f"malformed chat completion from {self.shown_url}: {type(exc).__name__}: {exc}",
                status_code=response.status_code,
                body=self._endpoint.excerpt(response),
            ) from exc
        model = payload.get("model") if isinstance(payload.get("model"), str) else self.model
        reason = choice.get("finish_reason")
        return ChatReply(content, model, reason if isinstance(reason, str) else None)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._endpoint.close()
