"""``OpenAIEmbedder``: OpenAI-compatible ``/v1/embeddings`` servers (OpenAI, Ollama, vLLM, TEI)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import numpy as np
import numpy.typing as npt

from ragsift.http_client import (
    JsonEndpoint,
    Secret,
    ServiceErrors,
    bearer_client,
    check_base_url,
    openai_endpoint,
)
from ragsift.retrieval.embedders.base import FloatMatrix, l2_normalize
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderResponseError,
    EmbedderUnavailableError,
)

__all__ = ["OpenAIEmbedder"]

OPENAI_DEFAULT_BATCH = 64  # well under OpenAI's 2,048 inputs per request
OPENAI_DEFAULT_TIMEOUT_S = 30.0
_BODY_EXCERPT = 500
# An answer's room: each float printed in JSON takes up to ~25 bytes ("-0.006929283402860165,"
# in full; OpenAI puts each on its own indented line), plus each item's envelope
# ("object", "index") and the answer's ("model", "usage"). Past it the answer is refused.
_BYTES_PER_FLOAT = 32
_BYTES_PER_ITEM = 1024
_ENVELOPE_BYTES = 64 * 1024

_ERRORS = ServiceErrors(
    "embedding request",
    "embedding service",
    EmbedderUnavailableError,
    EmbedderResponseError,
    _BODY_EXCERPT,
)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, TEI).

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:11434`` (``/v1`` is appended when missing).
        model: the model name sent in each request.
        api_key: bearer token (str or pydantic ``SecretStr``); ``None`` for local servers.
        dim: the dimension the model returns; every answer is checked against it.
        batch_size: texts per request, ``> 0``.
        timeout: seconds per request, ``> 0``.
        embedder_id: overrides ``openai-<model>-<dim>``.
        max_response_bytes: most bytes of an answer read, on the wire or decoded,
            ``> 0``; default: room for ``batch_size`` vectors of ``dim`` floats in JSON.
            A longer answer raises :class:`EmbedderResponseError`.
        transport: an httpx transport (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | Secret | None = None,
        *,
        dim: int,
        batch_size: int = OPENAI_DEFAULT_BATCH,
        timeout: float = OPENAI_DEFAULT_TIMEOUT_S,
        embedder_id: str | None = None,
        max_response_bytes: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_base_url(base_url)
        if not model:
            raise ValueError(f"model must be non-empty, got {model!r}")
        if dim <= 0:
            raise ValueError(f"dim must be > 0, got {dim}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if max_response_bytes is None:
            per_item = dim * _BYTES_PER_FLOAT + _BYTES_PER_ITEM
            max_response_bytes = _ENVELOPE_BYTES + batch_size * per_item
        if max_response_bytes <= 0:
            raise ValueError(f"max_response_bytes must be > 0, got {max_response_bytes}")
        self.max_response_bytes = max_response_bytes
        self.url = openai_endpoint(base_url, "embeddings")
        self.model = model
        self.batch_size = batch_size
        self._dim = dim
        self._id = embedder_id or f"openai-{model}-{dim}"
        # Not retried (no RetryPolicy): the pipeline turns a failed embed into an error
        # result for the query at once, which says the embedder was unavailable.
        client = bearer_client(api_key, timeout=timeout, transport=transport)
        self._endpoint = JsonEndpoint(self.url, _ERRORS, client, max_body_bytes=max_response_bytes)

    @property
    def embedder_id(self) -> str:
        """``openai-<model>-<dim>`` unless overridden."""
        return self._id

    @property
    def dim(self) -> int:
        """The declared vector length."""
        return self._dim

    async def _request(self, texts: list[str]) -> FloatMatrix:
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        response = await self._endpoint.post(body)
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [item["embedding"] for item in data]
        # RecursionError: nested past the parser's stack, as malformed as any other answer
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise EmbedderResponseError(
                f"malformed embeddings answer from {self.url}: {exc}",
                status_code=response.status_code,
                body=self._endpoint.excerpt(response),
            ) from exc
        if len(vectors) != len(texts):
            raise EmbedderResponseError(
                f"{self.url} returned {len(vectors)} embeddings for {len(texts)} inputs",
                status_code=response.status_code,
            )
        for vector in vectors:
            if not isinstance(vector, list) or len(vector) != self._dim:
                actual = len(vector) if isinstance(vector, list) else -1
                raise DimensionMismatchError(
                    expected=self._dim,
                    actual=actual,
                    context=f"embedding from model {self.model!r}",
                )
        return l2_normalize(np.asarray(vectors, dtype=np.float32))

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts in batches of ``batch_size`` requests, in order."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        parts = [
            await self._request(list(texts[start : start + self.batch_size]))
            for start in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(parts)

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text."""
        return (await self.embed([text]))[0]

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._endpoint.close()
