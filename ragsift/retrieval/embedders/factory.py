"""The embedder that ``RAGSIFT_EMBEDDER_*`` settings name: the one place that picks a backend."""

from __future__ import annotations

from ragsift.errors import ConfigurationError
from ragsift.retrieval.embedders.base import Embedder
from ragsift.retrieval.embedders.hashing import HashingEmbedder
from ragsift.retrieval.embedders.onnx import ONNX_MINILM_DIM, OnnxMiniLMEmbedder
from ragsift.retrieval.embedders.openai import OpenAIEmbedder
from ragsift.retrieval.embedders.sentence_transformer import SentenceTransformerEmbedder
from ragsift.settings import EmbedderSettings

__all__ = ["build_embedder"]


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """The configured embedder."""
    if settings.kind == "hashing":
        return HashingEmbedder(dim=settings.dim)
    if settings.kind == "sentence-transformers":
        return SentenceTransformerEmbedder(settings.model)
    if settings.kind == "onnx":
        if settings.dim != ONNX_MINILM_DIM:
            raise ConfigurationError(
                f"RAGSIFT_EMBEDDER_KIND=onnx makes {ONNX_MINILM_DIM}-d vectors,"
                f" but RAGSIFT_EMBEDDER_DIM is {settings.dim}"
            )
        return OnnxMiniLMEmbedder(
            settings.model, compute=settings.compute, threads=settings.threads
        )
    if not settings.base_url or not settings.model:
        raise ConfigurationError(
            "RAGSIFT_EMBEDDER_KIND=openai needs RAGSIFT_EMBEDDER_BASE_URL and"
            " RAGSIFT_EMBEDDER_MODEL"
        )
    key = settings.api_key.get_secret_value() if settings.api_key else None
    return OpenAIEmbedder(settings.base_url, settings.model, key, dim=settings.dim)
