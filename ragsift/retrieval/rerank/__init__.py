"""Cross-encoder reranking: the :class:`Reranker` protocol, its backends and the pipeline step."""

from ragsift.retrieval.rerank.base import (
    Reranker,
    RerankerResponseError,
    RerankerUnavailableError,
    logit,
)
from ragsift.retrieval.rerank.http import HttpReranker, RerankProtocol
from ragsift.retrieval.rerank.onnx import OnnxCrossEncoder
from ragsift.retrieval.rerank.stage import RerankOutcome, RerankStage

__all__ = [
    "HttpReranker",
    "OnnxCrossEncoder",
    "RerankOutcome",
    "RerankProtocol",
    "RerankStage",
    "Reranker",
    "RerankerResponseError",
    "RerankerUnavailableError",
    "logit",
]
