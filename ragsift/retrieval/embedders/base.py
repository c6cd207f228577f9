"""The ``Embedder`` protocol every backend implements, and the unit-norm helper they share.

Every embedder returns float32 rows of unit L2 norm and names itself with an
``embedder_id``; a collection stores the id that built it and refuses others.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = [
    "Embedder",
    "FloatMatrix",
    "KeepsTokenStates",
    "TokenEmbedder",
    "TokenStates",
    "WrappedEmbedder",
    "file_stem",
    "l2_normalize",
    "token_source",
]

FloatMatrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into dense vectors of one fixed space."""

    @property
    def embedder_id(self) -> str:
        """Names the vector space: model and dimension (stored with each collection)."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts: float32 array of shape ``(len(texts), dim)``, rows of unit norm."""
        ...

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text: float32 vector of shape ``(dim,)``, unit norm."""
        ...


@dataclass(frozen=True, slots=True)
class TokenStates:
    """One text's contextual token vectors: a row of unit norm per model token
    (``tokens``, as the model's tokenizer wrote them, special tokens left out)."""

    vectors: FloatMatrix
    tokens: tuple[str, ...]


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can also give each token's vector in context (the token match
    reader signal, :mod:`ragsift.retrieval.reader`)."""

    async def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's :class:`TokenStates`, in input order."""
        ...


@runtime_checkable
class KeepsTokenStates(Protocol):
    """A token source that can keep the token states of the short texts it embeds, so
    that a later ``token_states`` of the same text runs no model pass (ADR 041)."""

    def keep_token_states(self, size: int) -> None:
        """Keep the states of the ``size`` short texts embedded last (0: none)."""
        ...


def token_source(embedder: Embedder) -> TokenEmbedder | None:
    """The embedder behind ``embedder``'s wrappers that gives token states, or None."""
    while isinstance(embedder, WrappedEmbedder):
        embedder = embedder.inner
    return embedder if isinstance(embedder, TokenEmbedder) else None


def l2_normalize(matrix: npt.ArrayLike) -> FloatMatrix:
    """Rows scaled to unit L2 norm as float32 (all-zero rows stay zero)."""
    array = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


def file_stem(embedder_id: str) -> str:
    """``embedder_id`` as a file name's stem: anything but letters, digits, ``.``,
    ``_`` and ``-`` becomes ``_`` (files kept per embedder are named by it)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", embedder_id)


class WrappedEmbedder:
    """An embedder in front of ``inner``: its id and dimension, and one text as a batch
    of one; a subclass answers :meth:`embed` (e.g. from kept vectors)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def embedder_id(self) -> str:
        return self.inner.embedder_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return await self.inner.embed(texts)

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        vectors: npt.NDArray[np.float32] = (await self.embed([text]))[0]
        return vectors
