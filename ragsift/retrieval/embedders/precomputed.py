"""``PrecomputedEmbedder``: checks a vector that arrived inside a query event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.errors import InvalidEventError
from ragsift.retrieval.embedders.base import l2_normalize
from ragsift.retrieval.errors import DimensionMismatchError, EmbedderMismatchError

__all__ = ["PrecomputedEmbedder"]


class PrecomputedEmbedder:
    """Accepts vectors computed by the producer of a query event, after checking them.

    It cannot embed text: it validates that an incoming vector belongs to the
    space ``embedder_id`` (when the event names its embedder) and has ``dim``
    finite values, and normalizes it.

    Args:
        embedder_id: the embedder the collection was built with.
        dim: its dimension, ``> 0``.
    """

    def __init__(self, embedder_id: str, dim: int) -> None:
        if not embedder_id:
            raise ValueError(f"embedder_id must be non-empty, got {embedder_id!r}")
        if dim <= 0:
            raise ValueError(f"dim must be > 0, got {dim}")
        self._id = embedder_id
        self._dim = dim

    @property
    def embedder_id(self) -> str:
        """The accepted embedder id."""
        return self._id

    @property
    def dim(self) -> int:
        """The accepted dimension."""
        return self._dim

    def validate(
        self,
        vector: Sequence[float] | npt.NDArray[np.floating[Any]],
        embedder_id: str | None = None,
        *,
        query_id: str | None = None,
    ) -> npt.NDArray[np.float32]:
        """The vector as unit-norm float32, or an error naming what is wrong.

        Raises:
            EmbedderMismatchError: ``embedder_id`` is given and differs.
            DimensionMismatchError: wrong length.
            InvalidEventError: not a flat vector of finite numbers, or all zeros.
        """
        if embedder_id is not None and embedder_id != self._id:
            raise EmbedderMismatchError(expected=self._id, actual=embedder_id, query_id=query_id)
        try:
            array = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidEventError(
                f"query vector is not numeric: {exc}", query_id=query_id
            ) from exc
        if array.ndim != 1:
            raise InvalidEventError(
                f"query vector must be flat, got shape {array.shape}", query_id=query_id
            )
        if array.shape[0] != self._dim:
            raise DimensionMismatchError(
                expected=self._dim,
                actual=int(array.shape[0]),
                context="query vector",
                query_id=query_id,
            )
        if not np.all(np.isfinite(array)) or not np.any(array):
            raise InvalidEventError(
                "query vector must be finite and not all zeros", query_id=query_id
            )
        return l2_normalize(array)
