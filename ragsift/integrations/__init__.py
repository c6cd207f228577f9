"""ragsift inside the frameworks RAG builders already use (issue 16 item 7).

``ragsift.integrations.langchain`` and ``ragsift.integrations.llamaindex`` are
retrievers over a :class:`RetrievalSource`: the embedded runtime in-process
(:class:`EmbeddedSource`) or a ragsift API over HTTP (:class:`HttpSource`).
Each needs its framework's extra: ``pip install 'ragsift[langchain]'`` or
``'ragsift[llamaindex]'``; this package itself imports neither.
"""

from ragsift.integrations.outcome import (
    REFUSAL_EVENT,
    RetrievalOutcome,
    chunk_metadata,
    outcome_of,
)
from ragsift.integrations.source import (
    EmbeddedSource,
    HttpSource,
    IntegrationError,
    RetrievalSource,
)

__all__ = [
    "REFUSAL_EVENT",
    "EmbeddedSource",
    "HttpSource",
    "IntegrationError",
    "RetrievalOutcome",
    "RetrievalSource",
    "chunk_metadata",
    "outcome_of",
]
