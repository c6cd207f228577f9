"""The one HTTP client of ragsift's outbound JSON services (chat, embeddings, rerankers).

- :func:`bearer_client`: an ``httpx.AsyncClient`` sending ``Authorization: Bearer``.
- :func:`openai_endpoint` / :func:`check_base_url`: the URL of an OpenAI-compatible
  API (``/v1`` appended when the root lacks it).
- :class:`JsonEndpoint`: one JSON ``POST`` endpoint whose failures are mapped the
  same way for every service: timeouts, no connection, 429 and 5xx raise the
  service's *unavailable* error (with ``Retry-After``), any other non-200 its
  *response* error with an excerpt of the body (:class:`ServiceErrors` names both).
  With ``max_body_bytes`` it reads no more of a body than that, on the wire or
  decoded (:func:`ragsift.http_body.read_capped`: gzip and deflate are undone in
  bounded steps, so a compression bomb costs the cap, not its expansion): a 200 past
  it is the *response* error, an error answer past it keeps only its start. A body
  in a coding that was not asked for (``br``, ``zstd``) or that its coding cannot
  read is the *response* error.
- :class:`RetryPolicy`: bounded retries of the *unavailable* errors with a
  doubling pause that honours ``Retry-After`` (tenacity), all under one total
  deadline: httpx's timeout bounds each read, so a server trickling a byte at a
  time never trips it, and only the deadline ends such a call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from ragsift.errors import RagsiftError, ServiceUnavailableError
from ragsift.http_body import ACCEPT_ENCODING, BodyDecodingError, read_capped

__all__ = [
    "JsonEndpoint",
    "RetryPolicy",
    "Secret",
    "ServiceErrors",
    "bearer_client",
    "check_base_url",
    "openai_endpoint",
    "retry_after",
]

T = TypeVar("T")
_HTTP_OK = 200
_HTTP_TOO_MANY_REQUESTS = 429
_HTTP_SERVER_ERROR = 500
#: UTF-32's: the bytes that hold an excerpt's characters in any text encoding.
_MOST_BYTES_PER_CHAR = 4
# Headers of the bytes on the wire, which a body read (and decoded) whole no longer has.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class Secret(Protocol):
    """A secret value (pydantic ``SecretStr`` or alike) that only yields its text on request."""

    def get_secret_value(self) -> str:
        """The secret's text."""
        ...


class UnavailableError(Protocol):
    """Builds a service's retryable error (its ``*UnavailableError`` class fits)."""

    def __call__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> ServiceUnavailableError:
        """The error for a timeout, no connection, a 429 or a 5xx."""
        ...


class ResponseError(Protocol):
    """Builds a service's final error (its ``*ResponseError`` class fits)."""

    def __call__(self, message: str, *, status_code: int, body: str) -> RagsiftError:
        """The error for any other answer than 200."""
        ...


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a server asks to wait (``Retry-After``), None when absent or not a number."""
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


def bearer_client(
    api_key: str | Secret | None, *, timeout: float, transport: Any = None
) -> httpx.AsyncClient:
    """An async client sending ``Authorization: Bearer <key>`` when a key is given, and
    asking only for the codings :func:`~ragsift.http_body.read_capped` reads in bounded steps."""
    key = (
        api_key.get_secret_value()
        if api_key is not None and not isinstance(api_key, str)
        else api_key
    )
    headers = {"Accept-Encoding": ACCEPT_ENCODING}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout), transport=transport)


def check_base_url(base_url: str) -> None:
    """Refuse anything but an ``http(s)://`` URL, naming it."""
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")


def openai_endpoint(base_url: str, path: str) -> str:
    """``<root>/v1/<path>`` of an OpenAI-compatible API (``/v1`` not doubled when given)."""
    root = base_url.rstrip("/")
    return f"{root}/{path}" if root.endswith("/v1") else f"{root}/v1/{path}"


@dataclass(frozen=True, slots=True)
class ServiceErrors:
    """How one service's failures read, and which of its errors they raise.

    Attributes:
        request: what a request is called in errors (``"chat request"``).
        service: what the server is called in errors (``"chat service"``).
        unavailable: the error for timeouts, no connection, 429 and 5xx.
        response_error: the error for any other non-200 answer.
        excerpt_chars: how much of an error body an error message carries.
    """

    request: str
    service: str
    unavailable: UnavailableError
    response_error: ResponseError
    excerpt_chars: int


class JsonEndpoint:
    """One JSON ``POST`` endpoint, and one mapping of its failures to a service's errors.

    Args:
        url: where to post.
        errors: the service's words and error classes.
        client: the HTTP client (see :func:`bearer_client`); closed by :meth:`close`.
        shown_url: ``url`` as errors show it, credentials masked (default: ``url``).
        max_body_bytes: most bytes of a body read, on the wire or decoded, ``> 0``;
            ``None``: all.
    """

    def __init__(
        self,
        url: str,
        errors: ServiceErrors,
        client: httpx.AsyncClient,
        *,
        shown_url: str | None = None,
        max_body_bytes: int | None = None,
    ) -> None:
        if max_body_bytes is not None and max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be > 0, got {max_body_bytes}")
        self.url = url
        self.shown_url = shown_url or url
        self.errors = errors
        self.max_body_bytes = max_body_bytes
        self._client = client

    def excerpt(self, response: httpx.Response) -> str:
        """The start of a body, for an error message and the log: decoded by its charset
        when that is a text encoding that decodes it, else as UTF-8, bad bytes replaced.

        ``response.text`` took any charset the server named: ``utf-16`` without a BOM,
        ``rot13``, ``base64`` raised UnicodeError, TypeError or AssertionError out of
        the error path, past every caller's handling of the service's errors.
        """
        chars = self.errors.excerpt_chars
        start = response.content[: chars * _MOST_BYTES_PER_CHAR]
        try:
            text = start.decode(response.charset_encoding or "utf-8", "replace")
        except (LookupError, UnicodeError):  # no codec, not a text codec, or no "replace"
            text = start.decode("utf-8", "replace")
        return text[:chars]

    async def post(self, body: dict[str, Any]) -> httpx.Response:
        """The 200 answer to ``body``, or the caller's error naming what went wrong."""
        errors = self.errors
        try:
            response, whole = await self._send(body)
        except httpx.TimeoutException as exc:
            raise errors.unavailable(f"{errors.request} to {self.shown_url} timed out") from exc
        except httpx.TransportError as exc:
            raise errors.unavailable(
                f"{errors.service} {self.shown_url} unreachable: {exc}"
            ) from exc
        code = response.status_code
        if code == _HTTP_OK and not whole:
            raise errors.response_error(
                f"{errors.service} {self.shown_url} answered more than"
                f" {self.max_body_bytes} bytes (the most read)",
                status_code=code,
                body=self.excerpt(response),
            )
        if code == _HTTP_OK:
            return response
        excerpt = self.excerpt(response)
        message = f"{errors.service} {self.shown_url} answered {code}: {excerpt}"
        if code == _HTTP_TOO_MANY_REQUESTS or code >= _HTTP_SERVER_ERROR:
            raise errors.unavailable(message, status_code=code, retry_after=retry_after(response))
        raise errors.response_error(message, status_code=code, body=excerpt)

    async def _send(self, body: dict[str, Any]) -> tuple[httpx.Response, bool]:
        """The answer with at most ``max_body_bytes`` of its body read, and whether that
        is the whole body: a server that streams (or inflates) without end is cut off,
        not buffered."""
        request = self._client.build_request("POST", self.url, json=body)
        streamed = await self._client.send(request, stream=True)
        code = streamed.status_code
        try:
            content, whole = await read_capped(streamed, self.max_body_bytes)
        except BodyDecodingError as exc:
            raise self.errors.response_error(
                f"{self.errors.service} {self.shown_url} answered {code}"
                f" with a body it cannot read: {exc}",
                status_code=code,
                body="",
            ) from exc
        finally:
            await streamed.aclose()
        headers = [(k, v) for k, v in streamed.headers.items() if k.lower() not in _WIRE_HEADERS]
        read = httpx.Response(code, headers=headers, content=content, request=request)
        return read, whole

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a call is retried: ``max_retries`` more attempts, all within ``deadline`` seconds.

    The pause after attempt ``n`` is ``backoff * 2**(n-1)``, at least the error's
    ``retry_after`` and at most ``max_pause``.
    """

    deadline: float
    max_retries: int
    backoff: float
    max_pause: float

    def __post_init__(self) -> None:
        if self.deadline <= 0:
            raise ValueError(f"deadline must be > 0, got {self.deadline}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff < 0:
            raise ValueError(f"backoff must be >= 0, got {self.backoff}")

    def pause(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        pause = self.backoff * 2 ** (attempt - 1)
        if retry_after is not None:
            pause = max(pause, retry_after)
        return min(pause, self.max_pause)

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = error.retry_after if isinstance(error, ServiceUnavailableError) else None
        return self.pause(state.attempt_number, hint)

    async def run(
        self,
        call: Callable[[], Awaitable[T]],
        retryable: type[ServiceUnavailableError],
        on_deadline: Callable[[int], Exception],
    ) -> T:
        """``call()``, retried while it raises ``retryable``, within the deadline.

        Raises:
            retryable: the last attempt's error, its ``attempts`` set, when every
                attempt failed with it.
            Exception: ``on_deadline(attempts made)`` when the deadline passed.
        """
        attempts = 0

        def count(state: RetryCallState) -> None:
            nonlocal attempts
            attempts = state.attempt_number

        retrying = AsyncRetrying(
            retry=retry_if_exception_type(retryable),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            before=count,
            reraise=True,
        )
        try:
            async with asyncio.timeout(self.deadline):
                return await retrying(call)
        except retryable as exc:
            exc.attempts = attempts  # type: ignore[attr-defined]  # the retryable errors carry it
            raise
        except TimeoutError as exc:
            # Only asyncio.timeout raises TimeoutError here: JsonEndpoint converts httpx's own.
            raise on_deadline(attempts) from exc
