"""Where a framework retriever gets its results: the embedded runtime or the HTTP API."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar, runtime_checkable

import httpx
from pydantic import ValidationError

from ragsift.embedded import EmbeddedRuntime
from ragsift.errors import RagsiftError
from ragsift.http_body import BodyDecodingError, read_capped
from ragsift.http_client import bearer_client
from ragsift.schemas import (
    FeedbackEvent,
    QueryEvent,
    RetrievalResult,
    SearchMode,
)
from ragsift.streams.codec import MAX_PAYLOAD_BYTES

__all__ = ["EmbeddedSource", "HttpSource", "IntegrationError", "RetrievalSource", "run_sync"]

T = TypeVar("T")
QUERY_ID_PREFIX = "integ-"  # marks queries that came through a framework retriever
# The server waits up to the request's timeout for the pipeline; the client waits a
# little longer so the server's own 504 (with its query id) arrives, not a bare timeout.
CLIENT_TIMEOUT_MARGIN_S = 5.0
DEFAULT_TIMEOUT_S = 30.0
#: Most bytes of an API answer read, on the wire or decoded: a result is an event the
#: codec reads (at most MAX_PAYLOAD_BYTES, 4 MiB) and the API's envelope adds its
#: query id; twice that leaves room, and a server that streams (or inflates) without
#: end costs this, not its length.
DEFAULT_MAX_RESPONSE_BYTES = 2 * MAX_PAYLOAD_BYTES
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class IntegrationError(RagsiftError):
    """ragsift could not produce a result for a retriever's query (rejected, unreachable)."""

    stage = "integration"


@runtime_checkable  # pydantic checks a LangChain retriever's source with isinstance
class RetrievalSource(Protocol):
    """Turns a question into ragsift's result for it."""

    async def aretrieve(self, query: str) -> RetrievalResult:
        """The result of ``query``; raises :class:`IntegrationError` when there is none."""
        ...


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` for a synchronous caller; inside an event loop, use the async API."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise IntegrationError(
        "called synchronously inside a running event loop; use the async method"
        " (ainvoke / aretrieve) instead"
    )


class EmbeddedSource:
    """Queries an :class:`EmbeddedRuntime` in-process.

    Args:
        runtime: the runtime (its documents already ingested).
        tenant_id: whose documents are searched.
        collection: which collection.
        k: hits asked for; None uses the runtime's default.
        mode: hybrid, dense or keyword search.
    """

    def __init__(
        self,
        runtime: EmbeddedRuntime,
        tenant_id: str,
        *,
        collection: str = "default",
        k: int | None = None,
        mode: SearchMode = "hybrid",
    ):
        self.runtime = runtime
        self.tenant_id = tenant_id
        self.collection = collection
        self.k = k
        self.mode = mode
        self._event(probe=True)  # a bad tenant, collection or k fails here, not per query

    def _event(self, query: str = "?", *, probe: bool = False) -> QueryEvent:
        try:
            return QueryEvent(
                query_id=f"{QUERY_ID_PREFIX}{uuid.uuid4().hex}",
                tenant_id=self.tenant_id,
                query=query,
                collection=self.collection,
                k=self.k,
                mode=self.mode,
            )
        except ValidationError as exc:
            what = "retriever settings" if probe else "query"
            raise IntegrationError(f"invalid {what}: {exc}") from exc

    async def afeedback(
        self, query_id: str, relevant: bool, *, sampled: bool = True, comment: str | None = None
    ) -> str:
        """Label a result this source returned (its metadata's ``query_id``): did its
        kept context hold the answer? Applied by the runtime's feedback loop, as
        ``ragsift feedback`` applies it; returns the label's event id.

        ``sampled``: the result was picked for labelling without looking at how it
        turned out; False for a label a user chose to give, kept and never re-fit on
        (docs/feedback.md).
        """
        loop = self.runtime.feedback
        if loop is None:
            raise IntegrationError("feedback re-fits need RAGSIFT_CONFIDENCE_SCORER=calibrated")
        try:
            event = FeedbackEvent.label(
                self.tenant_id, query_id, relevant=relevant, sampled=sampled, comment=comment
            )
            loop.apply(event)
        except (ValueError, RagsiftError) as exc:  # a bad id, an unknown query
            raise IntegrationError(f"label refused: {exc}", query_id=query_id) from exc
        return event.event_id

    def feedback(
        self, query_id: str, relevant: bool, *, sampled: bool = True, comment: str | None = None
    ) -> str:
        """:meth:`afeedback` for a synchronous caller."""
        return run_sync(self.afeedback(query_id, relevant, sampled=sampled, comment=comment))

    async def aretrieve(self, query: str) -> RetrievalResult:
        """Run ``query`` through the runtime's pipeline."""
        [found] = await self.runtime.ask([self._event(query)])
        if not isinstance(found, RetrievalResult):
            raise IntegrationError(
                f"ragsift rejected the query at {found.stage}: {found.error}",
                query_id=found.query_id,
            )
        return found


class HttpSource:
    """Queries a ragsift API (``POST /v1/query``) with an API key or bearer token.

    Args:
        base_url: the API's address, e.g. ``http://127.0.0.1:8080``.
        api_key: the credential (``ragsift keys create``); sent as a bearer token.
        tenant_id: needed only when the key covers several tenants.
        collection, k, mode: as for :class:`EmbeddedSource`.
        timeout_s: how long the API waits for the pipeline's result.
        transport: an httpx transport (tests, proxies); None is httpx's default. Each
            query opens its own client, so the sync API works across event loops.
        max_response_bytes: most bytes of an answer read, on the wire or decoded
            (gzip and deflate are undone in bounded steps: a compression bomb costs
            this, not its expansion); a longer one raises :class:`IntegrationError`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        tenant_id: str | None = None,
        collection: str = "default",
        k: int | None = None,
        mode: SearchMode = "hybrid",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ):
        if not api_key:
            raise IntegrationError("api_key is required for the HTTP API, got an empty one")
        if timeout_s <= 0:
            raise IntegrationError(f"timeout_s must be > 0, got {timeout_s}")
        if max_response_bytes <= 0:
            raise IntegrationError(f"max_response_bytes must be > 0, got {max_response_bytes}")
        self.url = base_url.rstrip("/") + "/v1/query"
        self.feedback_url = base_url.rstrip("/") + "/v1/feedback"
        self._api_key = api_key
        self.tenant_id = tenant_id
        self.collection = collection
        self.k = k
        self.mode = mode
        self.timeout_s = timeout_s
        self.transport = transport
        self.max_response_bytes = max_response_bytes

    def __repr__(self) -> str:  # never the key
        return f"HttpSource({self.url!r}, collection={self.collection!r})"

    def _body(self, query: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": query,
            "collection": self.collection,
            "mode": self.mode,
            "timeout_s": self.timeout_s,
        }
        if self.tenant_id is not None:
            body["tenant_id"] = self.tenant_id
        if self.k is not None:
            body["k"] = self.k
        return body

    async def afeedback(
        self, query_id: str, relevant: bool, *, sampled: bool = True, comment: str | None = None
    ) -> str:
        """Label a result (``POST /v1/feedback``): did its kept context hold the answer?
        Returns the label's event id once the API's broker has it; ``sampled`` as for
        :meth:`EmbeddedSource.afeedback`."""
        body: dict[str, Any] = {"query_id": query_id, "relevant": relevant, "sampled": sampled}
        if comment is not None:
            body["comment"] = comment
        if self.tenant_id is not None:
            body["tenant_id"] = self.tenant_id
        response = await self._post(self.feedback_url, body, DEFAULT_TIMEOUT_S)
        if response.status_code != httpx.codes.ACCEPTED:
            raise IntegrationError(
                f"ragsift API answered {response.status_code}: {_error_text(response)}",
                query_id=query_id,
            )
        try:
            return str(response.json()["event_id"])
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # nested past the parser
            raise IntegrationError(f"ragsift API answered an unreadable body: {exc}") from exc

    def feedback(
        self, query_id: str, relevant: bool, *, sampled: bool = True, comment: str | None = None
    ) -> str:
        """:meth:`afeedback` for a synchronous caller."""
        return run_sync(self.afeedback(query_id, relevant, sampled=sampled, comment=comment))

    async def aretrieve(self, query: str) -> RetrievalResult:
        """POST ``query`` and return the result the API answers with."""
        timeout = self.timeout_s + CLIENT_TIMEOUT_MARGIN_S
        response = await self._post(self.url, self._body(query), timeout)
        if response.status_code != httpx.codes.OK:
            raise IntegrationError(
                f"ragsift API answered {response.status_code}: {_error_text(response)}"
            )
        try:
            return RetrievalResult.model_validate(response.json()["result"])
        # ValidationError is a ValueError; RecursionError: nested past the JSON parser
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise IntegrationError(f"ragsift API answered an unreadable body: {exc}") from exc

    async def _post(self, url: str, body: dict[str, Any], read_timeout: float) -> httpx.Response:
        """The API's answer to ``body`` (httpx's timeout ``read_timeout``), at most
        ``max_response_bytes`` of it read: a 200 past that raises; an error answer past
        it keeps its status and start."""
        try:
            async with bearer_client(
                self._api_key, timeout=read_timeout, transport=self.transport
            ) as client:
                request = client.build_request("POST", url, json=body)
                streamed = await client.send(request, stream=True)
                try:
                    content, whole = await read_capped(streamed, self.max_response_bytes)
                finally:
                    await streamed.aclose()
        except httpx.HTTPError as exc:
            raise IntegrationError(f"ragsift API at {url} unreachable: {exc!r}") from exc
        except BodyDecodingError as exc:
            raise IntegrationError(
                f"ragsift API at {url} answered {streamed.status_code}"
                f" with a body it cannot read: {exc}"
            ) from exc
        if not whole and streamed.is_success:
            raise IntegrationError(
                f"ragsift API at {url} answered more than {self.max_response_bytes} bytes"
                " (max_response_bytes, the most read): not a ragsift API, or raise it"
            )
        # The decoded body's headers: those of the bytes on the wire no longer hold.
        headers = [(k, v) for k, v in streamed.headers.items() if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(
            streamed.status_code, headers=headers, content=content, request=request
        )


def _error_text(response: httpx.Response) -> str:
    """The API's error code and detail, or the start of a body that is not its error JSON."""
    try:
        body = response.json()
        return f"{body['error']}: {body['detail']}"
    except (ValueError, KeyError, TypeError, RecursionError):
        return response.text[:200]
