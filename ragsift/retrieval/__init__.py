"""I/O edges behind protocols (vector indexes, embedders, caches) and the pipeline."""

from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.cache import InMemoryCache, ResultCache, cache_key, ttl_for_status
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    PrecomputedEmbedder,
    SentenceTransformerEmbedder,
)
from ragsift.retrieval.errors import EmbedderMismatchError, MissingTenantError
from ragsift.retrieval.index import (
    ChunkRecord,
    CollectionInfo,
    SearchHit,
    SearchMode,
    SearchRequest,
    VectorIndex,
)
from ragsift.retrieval.server import QdrantServerIndex

__all__ = [
    "Bm25Encoder",
    "ChunkRecord",
    "CollectionInfo",
    "EdgeIndex",
    "Embedder",
    "EmbedderMismatchError",
    "HashingEmbedder",
    "InMemoryCache",
    "MissingTenantError",
    "OpenAIEmbedder",
    "PrecomputedEmbedder",
    "QdrantServerIndex",
    "ResultCache",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SentenceTransformerEmbedder",
    "VectorIndex",
    "cache_key",
    "ttl_for_status",
]
