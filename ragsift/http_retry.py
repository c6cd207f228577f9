"""What every outbound HTTP client of ragsift shares: bearer auth and bounded retries.

The report's chat client and the reranker's HTTP backends both retry
retryable failures (5xx, 429, timeouts, no connection) with a doubling pause
that honours Retry-After, under a total deadline each caller sets itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx

from ragsift.errors import ServiceUnavailableError

__all__ = ["Attempts", "Secret", "bearer_client", "retry_after", "with_retries"]

T = TypeVar("T")


class Secret(Protocol):
    """A secret value (pydantic ``SecretStr`` or alike) that only yields its text on request."""

    def get_secret_value(self) -> str:
        """The secret's text."""
        ...


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a server asks to wait (``Retry-After``), None when absent or not a number."""
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


@dataclass
class Attempts:
    """How many attempts a call has made so far (read by the caller's deadline message)."""

    count: int = 0


def bearer_client(
    api_key: str | Secret | None, *, timeout: float, transport: Any = None
) -> httpx.AsyncClient:
    """An async client sending ``Authorization: Bearer <key>`` when a key is given."""
    key = (
        api_key.get_secret_value()
        if api_key is not None and not isinstance(api_key, str)
        else api_key
    )
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout), transport=transport)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    retryable: type[ServiceUnavailableError],
    *,
    max_retries: int,
    backoff: float,
    max_pause: float,
    attempts: Attempts,
) -> T:
    """``call()``, retried up to ``max_retries`` times when it raises ``retryable``.

    Pauses ``backoff * 2**n`` (at least the error's ``retry_after``, at most
    ``max_pause``). The last error is re-raised with its ``attempts`` set.
    """
    while True:
        attempts.count += 1
        try:
            return await call()
        except retryable as exc:
            if attempts.count > max_retries:
                exc.attempts = attempts.count  # type: ignore[attr-defined]  # both error types carry it
                raise
            pause = backoff * 2 ** (attempts.count - 1)
            if exc.retry_after is not None:
                pause = max(pause, exc.retry_after)
            await asyncio.sleep(min(pause, max_pause))
