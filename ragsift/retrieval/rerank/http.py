"""HTTP rerankers: the ``/rerank`` APIs of Hugging Face TEI and Cohere- or Jina-compatible servers.

* ``tei``: ``POST {url}/rerank`` with ``{"query", "texts", "raw_scores": true,
  "truncate": true}``; answers ``[{"index", "score"}, ...]`` (raw logits).
* ``cohere`` / ``jina``: ``POST {url}/v1/rerank`` (``{url}/rerank`` when the URL
  already ends in a version) with ``{"model", "query", "documents", "top_n",
  "return_documents": false}``; answers ``{"results": [{"index",
  "relevance_score"}, ...]}``, probabilities in [0, 1], turned into logits.

Like the report worker's LLM client: 5xx, 429, timeouts and connection failures
are retried with exponential backoff (honouring ``Retry-After``), all within a
total deadline; a 4xx or a body that is not scores fails at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from ragsift.http_client import (
    JsonEndpoint,
    RetryPolicy,
    Secret,
    ServiceErrors,
    bearer_client,
    check_base_url,
)
from ragsift.retrieval.rerank.base import (
    RerankerResponseError,
    RerankerUnavailableError,
    check_scores,
    logit,
)

__all__ = ["HttpReranker", "RerankProtocol"]

RerankProtocol = Literal["tei", "cohere", "jina"]
"""The wire protocols :class:`HttpReranker` speaks."""

PROTOCOLS: tuple[RerankProtocol, ...] = ("tei", "cohere", "jina")
DEFAULT_TIMEOUT_S = 5.0  # one cross-encoder pass over 20 passages takes tens of ms on a GPU
# Whole call, retries included: the query waits for it, so it stays well under the
# worker's handler deadline (30 s); past it the query is scored without the reranker.
DEFAULT_DEADLINE_S = 2.0
DEFAULT_MAX_RETRIES = 2  # three attempts: rides out a restart, not an outage
DEFAULT_BACKOFF_S = 0.05  # first pause; doubles per attempt
MAX_BACKOFF_S = 1.0  # cap on any pause, Retry-After included: the batch is waiting
DEFAULT_CONCURRENCY = 8  # requests in flight per batch (these APIs take one query each)
_BODY_EXCERPT = 300
# Scores are ~40 bytes a passage ({"index": 12, "score": -1.2345678}); as the chat
# client's cap, room for a server that sends the passages back all the same.
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024

_ERRORS = ServiceErrors(
    "rerank request", "reranker", RerankerUnavailableError, RerankerResponseError, _BODY_EXCERPT
)


class HttpReranker:
    """A client of a TEI, Cohere-compatible or Jina-compatible rerank endpoint.

    Args:
        protocol: ``tei``, ``cohere`` or ``jina``.
        base_url: the server root, e.g. ``http://127.0.0.1:8080`` or ``https://api.jina.ai``.
        model: model name sent in each request (required by ``cohere`` and ``jina``).
        api_key: bearer token (str or ``SecretStr``); ``None`` for local servers.
        timeout: seconds per read, ``> 0``.
        deadline: seconds for the whole call, retries and pauses included, ``> 0``.
        max_retries: extra attempts on retryable failures, ``>= 0``.
        backoff: first pause between attempts in seconds (doubles each time), ``>= 0``.
        concurrency: requests in flight in :meth:`rerank_many`, ``> 0``.
        max_response_bytes: most bytes of an answer read, on the wire or decoded,
            ``> 0``; a longer answer raises :class:`RerankerResponseError`.
        transport: an httpx transport (tests, proxies).
    """

    def __init__(
        self,
        protocol: RerankProtocol,
        base_url: str,
        model: str | None = None,
        api_key: str | Secret | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        deadline: float = DEFAULT_DEADLINE_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        concurrency: int = DEFAULT_CONCURRENCY,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        check_base_url(base_url)
        if protocol != "tei" and not model:
            raise ValueError(f"model must be non-empty for the {protocol} protocol, got {model!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self.retry = RetryPolicy(deadline, max_retries, backoff, MAX_BACKOFF_S)
        if concurrency <= 0:
            raise ValueError(f"concurrency must be > 0, got {concurrency}")
        if max_response_bytes <= 0:
            raise ValueError(f"max_response_bytes must be > 0, got {max_response_bytes}")
        root = base_url.rstrip("/")
        if protocol == "tei":
            self.url = f"{root}/rerank"
        else:
            versioned = root.rsplit("/", 1)[-1] in ("v1", "v2")
            self.url = f"{root}/rerank" if versioned else f"{root}/v1/rerank"
        self.shown_url = str(httpx.URL(self.url).copy_with(username=None, password=None))
        self.protocol = protocol
        self.model = model
        self.reranker_id = f"{protocol}:{model or 'default'}"
        self.deadline = deadline
        self.max_retries = max_retries
        self.backoff = backoff
        self._slots = asyncio.Semaphore(concurrency)
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
        return f"HttpReranker(protocol={self.protocol!r}, url={self.shown_url!r})"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One logit per text, after up to ``max_retries`` retries of retryable failures.

        Raises:
            RerankerUnavailableError: 5xx, 429, timeouts or no connection on every
                attempt, or the total deadline passed.
            RerankerResponseError: a 4xx answer or a body that is not one score per text.
        """
        if not texts:
            return []
        body = self._body(query, texts)

        async def attempt() -> list[float]:
            return self._parse(await self._endpoint.post(body), len(texts))

        def past_deadline(attempts: int) -> RerankerUnavailableError:
            return RerankerUnavailableError(
                f"reranker {self.shown_url} gave no complete answer within {self.deadline:g} s"
                f" ({attempts} attempt(s))",
                attempts=attempts,
            )

        return await self.retry.run(attempt, RerankerUnavailableError, past_deadline)

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        """One request per query (these APIs take one query each), ``concurrency`` at a time."""

        async def one(query: str, texts: Sequence[str]) -> list[float]:
            async with self._slots:
                return await self.rerank(query, texts)

        done = await asyncio.gather(*(one(q, t) for q, t in queries), return_exceptions=True)
        out: list[list[float] | Exception] = []
        for item in done:
            if isinstance(item, BaseException) and not isinstance(item, Exception):
                raise item  # cancellation and the like are not one query's failure
            out.append(item)
        return out

    def _body(self, query: str, texts: Sequence[str]) -> dict[str, Any]:
        if self.protocol == "tei":
            # raw_scores: logits, not TEI's sigmoid; truncate: a long chunk is cut, not a 413.
            return {"query": query, "texts": list(texts), "raw_scores": True, "truncate": True}
        return {
            "model": self.model,
            "query": query,
            "documents": list(texts),
            "top_n": len(texts),  # every score back, not only the best few
            "return_documents": False,
        }

    def _parse(self, response: httpx.Response, n: int) -> list[float]:
        try:
            payload = response.json()
            if self.protocol == "tei":
                items, key = payload, "score"
            else:
                items, key = payload["results"], "relevance_score"
            if not isinstance(items, list):
                raise TypeError(f"expected a list of results, got {type(items).__name__}")
            scores = _by_index(items, key, n)
            if self.protocol != "tei":
                outside = next((s for s in scores if not 0.0 <= s <= 1.0), None)
                if outside is not None:
                    raise ValueError(
                        f"relevance_score must be a probability in [0, 1], got {outside}"
                        " (a server answering raw scores on this protocol is not supported)"
                    )
                scores = [logit(s) for s in scores]
        # RecursionError: nested past the parser's stack, as malformed as any other answer
        except (ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
            raise RerankerResponseError(
                f"malformed rerank answer from {self.shown_url}: {type(exc).__name__}: {exc}",
                status_code=response.status_code,
                body=self._endpoint.excerpt(response),
            ) from exc
        return check_scores(scores, n, f"reranker {self.shown_url}")

    async def close(self) -> None:
        """Close the connection pool."""
        await self._endpoint.close()


def _by_index(items: list[Any], key: str, n: int) -> list[float]:
    """Scores in request order from ``[{"index": i, key: s}, ...]`` (any order, each i once)."""
    scores: list[float | None] = [None] * n
    for item in items:
        index, score = item["index"], item[key]
        if type(index) is not int or not 0 <= index < n:
            raise ValueError(f"index must be an integer in [0, {n}), got {index!r}")
        if type(score) not in (int, float):
            raise TypeError(f"{key} must be a number, got {type(score).__name__}")
        if scores[index] is not None:
            raise ValueError(f"index {index} appears twice")
        scores[index] = float(score)
    missing = [i for i, s in enumerate(scores) if s is None]
    if missing:
        raise ValueError(f"no score for {len(missing)} of {n} texts (first: index {missing[0]})")
    return [s for s in scores if s is not None]
