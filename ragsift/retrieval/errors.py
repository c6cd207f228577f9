"""Errors raised by the retrieval edges: vector indexes and embedders.

Each one subclasses the matching class of :mod:`ragsift.errors`, so a handler
that only knows the root hierarchy still routes it (refuse the event, retry
later, stop at start-up), and carries the fields a handler needs.
"""

from __future__ import annotations

from ragsift.errors import (
    ConfigurationError,
    InvalidEventError,
    RagsiftError,
    ServiceUnavailableError,
)

__all__ = [
    "MAX_COLLECTIONS_SETTING",
    "CollectionLimitError",
    "CollectionNotFoundError",
    "DimensionMismatchError",
    "EmbedderMismatchError",
    "EmbedderResponseError",
    "EmbedderUnavailableError",
    "MissingTenantError",
    "OptionalDependencyError",
    "TenantIsolationError",
    "missing_collection",
    "no_documents",
]


def missing_collection(collection: str) -> str:
    """How a collection that does not exist is worded, wherever it is said: the error a
    query there gets (the API's and the console's 404), ``ragsift ask`` and
    ``ragsift documents`` refusing one, and the reply to "what can you answer?"."""
    return f"collection {collection!r} does not exist"


def no_documents(tenant: str, collection: str) -> str:
    """How a tenant with no documents in a collection is worded, wherever it is said:
    ``ragsift ask`` and ``ragsift documents`` refusing it, and the reply the pipeline
    (the console, the API) gives it to "what can you answer?"."""
    return f"tenant {tenant!r} has no documents in collection {collection!r}"


class EmbedderMismatchError(InvalidEventError):
    """A collection was built with one embedder and is queried (or fed) with another.

    Vectors from two embedders live in unrelated spaces: searching one with the
    other returns confident-looking nonsense, so the index refuses instead.

    Args:
        expected: the embedder id stored with the collection.
        actual: the embedder id of the vector that was offered.
        collection: the collection concerned, when known.
        stored: ``expected`` is what the collection was built with (not a query's
            vector), so the message says how to rebuild or keep using it.
    """

    stage = "embed"

    def __init__(
        self,
        *,
        expected: str,
        actual: str,
        collection: str | None = None,
        query_id: str | None = None,
        stored: bool = False,
    ) -> None:
        where = f" of collection {collection!r}" if collection else ""
        message = f"embedder mismatch{where}: expected {expected!r}, got {actual!r}"
        if stored:
            message += _rebuild_hint(expected)
        super().__init__(message, query_id=query_id)
        self.expected = expected
        self.actual = actual
        self.collection = collection


#: Embedder id prefixes (see each embedder's ``embedder_id``), most specific first,
#: and the RAGSIFT_EMBEDDER_* settings that produce them, to name the fix for an old shard.
_SETTINGS_BY_ID_PREFIX = {
    "ragsift-hashing-": "RAGSIFT_EMBEDDER_KIND=hashing",
    "onnx-all-MiniLM-L6-v2-int8dyn-": "RAGSIFT_EMBEDDER_KIND=onnx, RAGSIFT_EMBEDDER_COMPUTE=int8",
    "onnx-all-MiniLM-L6-v2-int8-": "RAGSIFT_EMBEDDER_KIND=onnx, RAGSIFT_EMBEDDER_COMPUTE=fp32",
    "onnx-": "RAGSIFT_EMBEDDER_KIND=onnx",
    "st-": "RAGSIFT_EMBEDDER_KIND=sentence-transformers",
    "openai-": "RAGSIFT_EMBEDDER_KIND=openai",
}


def _rebuild_hint(stored_id: str) -> str:
    """How to reconcile a collection built with ``stored_id`` with the configured embedder.

    The default embedder changed from ``hashing`` to ``onnx`` (ADR 007), so a
    shard built before that is the usual way to get here; the onnx model's two
    computes (ADR 019) are two vector spaces too.
    """
    settings = next((v for p, v in _SETTINGS_BY_ID_PREFIX.items() if stored_id.startswith(p)), None)
    going_back = (
        f"set {settings}"
        if settings
        else "configure the embedder that built it (RAGSIFT_EMBEDDER_KIND, _MODEL)"
    )
    return (
        f" (the collection was built with {stored_id!r}): re-ingest its documents into a"
        f" fresh data directory with the configured embedder, or {going_back} to keep using it"
    )


class DimensionMismatchError(InvalidEventError):
    """A vector's length differs from the dimension its embedder or collection declares.

    Args:
        expected: the declared dimension.
        actual: the length that was offered.
        context: what carried the vector (``"query vector"``, ``"chunk 'c1'"``...).
    """

    stage = "embed"

    def __init__(
        self,
        *,
        expected: int,
        actual: int,
        context: str = "vector",
        query_id: str | None = None,
    ) -> None:
        super().__init__(
            f"{context} has dimension {actual}, expected {expected}", query_id=query_id
        )
        self.expected = expected
        self.actual = actual
        self.context = context


class MissingTenantError(InvalidEventError):
    """A search or write without a tenant: refused, so isolation cannot be bypassed.

    Args:
        value: the tenant value that was offered (empty string, ``None``...).
    """

    def __init__(self, value: object, *, query_id: str | None = None) -> None:
        super().__init__(f"tenant_id must be a non-empty string, got {value!r}", query_id=query_id)
        self.value = value


class CollectionNotFoundError(RagsiftError):
    """A collection that does not exist (create it with ``ensure_collection`` first).

    Args:
        collection: the missing collection's name.
    """

    stage = "search"

    def __init__(self, collection: str, *, query_id: str | None = None) -> None:
        super().__init__(
            f"{missing_collection(collection)}: nothing has been indexed into it (check"
            " the query's collection name, or ingest documents into it first)",
            query_id=query_id,
        )
        self.collection = collection


#: The setting that caps the collections of an index (``QdrantSettings.max_collections``).
MAX_COLLECTIONS_SETTING = "RAGSIFT_QDRANT_MAX_COLLECTIONS"


class CollectionLimitError(InvalidEventError):
    """A new collection refused: the index holds as many as its cap allows.

    Each new name on the documents topic (or given to ``ragsift ingest``) made a
    collection, and each costs disk and an open handle for the life of the process:
    a producer with a typo, or a hostile one, could fill the disk. Collections that
    exist are not affected. Dead-lettered with its own stage, so a replay after the
    cap is raised takes these letters only.

    Args:
        collection: the collection that was not created.
        limit: the cap (:data:`MAX_COLLECTIONS_SETTING`).
        count: the collections the index held when it refused.
    """

    stage = "collection_limit"

    def __init__(self, *, collection: str, limit: int, count: int) -> None:
        super().__init__(
            f"collection {collection!r} not created: the index holds {count} collections"
            f" and {MAX_COLLECTIONS_SETTING}={limit} caps them there; write to an existing"
            " collection, or raise the cap where the disk has room for more"
            " (docs/security.md, 'Collections')"
        )
        self.collection = collection
        self.limit = limit
        self.count = count


class EmbedderUnavailableError(ServiceUnavailableError):
    """An embedding service did not answer, timed out, or said to come back later.

    Args:
        status_code: the HTTP status when there was one (429, 5xx), else ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        query_id: str | None = None,
    ) -> None:
        super().__init__(
            message, service="embedder", stage="embed", query_id=query_id, retry_after=retry_after
        )
        self.status_code = status_code


class EmbedderResponseError(RagsiftError):
    """An embedding service answered with an error or a malformed body (retrying won't help).

    Args:
        status_code: the HTTP status of the answer.
        body: the start of the answer's body, for the log.
    """

    stage = "embed"

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: str = "",
        query_id: str | None = None,
    ) -> None:
        super().__init__(message, query_id=query_id)
        self.status_code = status_code
        self.body = body


class OptionalDependencyError(ConfigurationError):
    """A backend was selected whose optional package is not installed.

    Args:
        package: the distribution to install (``sentence-transformers``...).
        feature: what needs it.
    """

    def __init__(self, *, package: str, feature: str) -> None:
        super().__init__(f"{feature} needs the optional package {package!r}: pip install {package}")
        self.package = package
        self.feature = feature


class TenantIsolationError(RagsiftError):
    """The engine returned a chunk of another tenant: a bug, refused rather than served.

    Args:
        expected: the tenant the search was scoped to.
        actual: the tenant of the offending chunk.
    """

    stage = "search"

    def __init__(self, *, expected: str, actual: str, query_id: str | None = None) -> None:
        super().__init__(
            f"tenant isolation violated: search for {expected!r} returned a chunk of {actual!r}",
            query_id=query_id,
        )
        self.expected = expected
        self.actual = actual
