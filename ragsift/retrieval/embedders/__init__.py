"""Dense embedders behind the ``Embedder`` protocol, one module per backend family.

- :mod:`.base`: the :class:`Embedder` protocol and :func:`l2_normalize`.
- :mod:`.hashing`: :class:`HashingEmbedder`, the zero-dependency fallback; deterministic, no model.
- :mod:`.onnx`: :class:`OnnxMiniLMEmbedder`, all-MiniLM-L6-v2 on onnxruntime (the default).
- :mod:`.sentence_transformer`: :class:`SentenceTransformerEmbedder`, a local
  sentence-transformers model (optional package).
- :mod:`.openai`: :class:`OpenAIEmbedder`, any OpenAI-compatible ``/v1/embeddings``
  endpoint (OpenAI, Ollama, vLLM, TEI) over httpx.
- :mod:`.precomputed`: :class:`PrecomputedEmbedder`, the check of a vector that
  arrived inside a query event.
- :mod:`.models`: finding the models that PyPI packages install.
- :mod:`.factory`: :func:`build_embedder`, the backend the settings name.

Every embedder returns float32 rows of unit L2 norm and names itself with an
``embedder_id``; a collection stores the id that built it and refuses others.
"""

from ragsift.retrieval.embedders.base import Embedder, FloatMatrix, l2_normalize
from ragsift.retrieval.embedders.factory import build_embedder
from ragsift.retrieval.embedders.hashing import HASHING_DEFAULT_DIM, HashingEmbedder, stem
from ragsift.retrieval.embedders.models import find_packaged_minilm, find_packaged_onnx_minilm
from ragsift.retrieval.embedders.onnx import (
    MAX_TOKENS_PER_BATCH,
    ONNX_MINILM_DIM,
    ModelIntegrityError,
    OnnxMiniLMEmbedder,
)
from ragsift.retrieval.embedders.openai import OpenAIEmbedder
from ragsift.retrieval.embedders.precomputed import PrecomputedEmbedder
from ragsift.retrieval.embedders.sentence_transformer import SentenceTransformerEmbedder

__all__ = [
    "HASHING_DEFAULT_DIM",
    "MAX_TOKENS_PER_BATCH",
    "ONNX_MINILM_DIM",
    "Embedder",
    "FloatMatrix",
    "HashingEmbedder",
    "ModelIntegrityError",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "PrecomputedEmbedder",
    "SentenceTransformerEmbedder",
    "build_embedder",
    "find_packaged_minilm",
    "find_packaged_onnx_minilm",
    "l2_normalize",
    "stem",
]
