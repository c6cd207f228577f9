"""The retrieval tests' shared corpus (two tenants) and builders of records and clients."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from qdrant_client import AsyncQdrantClient

from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import ChunkRecord, VectorIndex

COLLECTION = "docs"
DIM = 384

CORPUS: dict[str, list[str]] = {
    "acme": [
        "To reset your password, open the account settings page and choose reset password.",
        "Password resets expire after 24 hours; request a new reset link if it has expired.",
        "Invoices are issued on the first business day of each month.",
        "Our refund policy allows returns within 30 days of purchase.",
        "Two-factor authentication protects your account with a one-time code.",
        "The mobile app supports offline mode for reading saved documents.",
        "Quarterly revenue grew 12 percent driven by subscription renewals.",
        "Contact support by email for billing questions and invoice corrections.",
        "Kafka consumer groups share partitions between worker replicas.",
        "Qdrant stores dense and sparse vectors with payload indexes.",
    ],
    "globex": [
        "Reset the router by holding the power button for ten seconds.",
        "Password policy: at least twelve characters including a digit.",
        "The cafeteria serves lunch from noon until two o'clock.",
        "Annual leave requests must be approved by your manager.",
        "Our refund desk handles returns of defective hardware.",
        "Security badges must be worn visibly inside the building.",
    ],
}

QUERIES = [
    "how do I reset my password",
    "refund and returns policy",
    "invoice billing question",
    "vector database payload index",
    "the",  # stopwords only: no keyword channel
]


def make_record(
    tenant: str, i: int, text: str, *, collection: str = COLLECTION, **overrides: Any
) -> ChunkRecord:
    """A chunk of ``tenant`` with a hashing-embedder vector; keyword overrides win."""
    fields: dict[str, Any] = {
        "chunk_id": f"{tenant}-{i}",
        "tenant_id": tenant,
        "collection": collection,
        "doc_id": f"{tenant}-doc-{i // 2}",
        "text": text,
        "source": f"https://example.test/{tenant}/{i}",
        "source_type": "government" if i % 3 == 0 else "third_party",
        "vector": HashingEmbedder(DIM).embed_sync(text),
        "metadata": {"lang": "en", "position": i},
    }
    fields.update(overrides)
    return ChunkRecord(**fields)


def corpus_records() -> list[ChunkRecord]:
    """Every chunk of :data:`CORPUS`."""
    return [make_record(t, i, text) for t, texts in CORPUS.items() for i, text in enumerate(texts)]


def local_client() -> AsyncQdrantClient:
    """qdrant-client local mode, quiet about the payload indexes it ignores."""
    warnings.filterwarnings(
        "ignore", message="Payload indexes have no effect", category=UserWarning
    )
    return AsyncQdrantClient(":memory:")


IndexFactory = Callable[..., VectorIndex]
