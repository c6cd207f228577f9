"""ragsift as a LlamaIndex retriever (``pip install 'ragsift[llamaindex]'``).

``RagsiftRetriever(source)`` returns one ``NodeWithScore`` per kept hit (score:
ragsift's normalized score), with ragsift's confidence, level and citation in
the node's metadata. When ragsift refuses it returns ``[]`` and dispatches a
:class:`RagsiftRefusalEvent` on LlamaIndex's instrumentation dispatcher, which
an event handler added to ``llama_index.core.instrumentation.get_dispatcher()``
receives, so an application can answer with a refusal instead of generating.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ragsift.integrations.outcome import RetrievalOutcome, chunk_metadata, outcome_of
from ragsift.integrations.source import RetrievalSource, run_sync

__all__ = ["RagsiftRefusalEvent", "RagsiftRetriever", "to_nodes"]

dispatcher = get_dispatcher(__name__)
# Metadata the LLM should see next to a chunk's text; the rest (scores, ids) is for code.
_LLM_METADATA = frozenset({"source"})


class RagsiftRefusalEvent(BaseEvent):
    """ragsift refused a query: the retriever returned no nodes, and this says why."""

    query_id: str
    reason: str | None
    status: str
    level: str
    confidence: float
    outcome: str

    @classmethod
    def class_name(cls) -> str:
        """The event's name in LlamaIndex's instrumentation."""
        return "RagsiftRefusalEvent"


def to_nodes(outcome: RetrievalOutcome) -> list[NodeWithScore]:
    """The outcome's chunks as scored LlamaIndex nodes (none when ragsift refused)."""
    nodes = []
    for chunk in outcome.chunks:
        metadata = chunk_metadata(outcome.result, chunk)
        hidden = [k for k in metadata if k not in _LLM_METADATA]
        node = TextNode(
            id_=chunk.chunk_id,
            text=chunk.text,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=list(metadata),
        )
        nodes.append(NodeWithScore(node=node, score=chunk.score))
    return nodes


class RagsiftRetriever(BaseRetriever):
    """A LlamaIndex retriever over ragsift (module docstring).

    Args:
        source: where results come from: ``EmbeddedSource`` or ``HttpSource``.
        **kwargs: passed to LlamaIndex's ``BaseRetriever`` (``callback_manager``...).
    """

    def __init__(self, source: RetrievalSource, **kwargs: Any):
        super().__init__(**kwargs)
        self.source = source

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(outcome_of(run_sync(self.source.aretrieve(query_bundle.query_str))))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(outcome_of(await self.source.aretrieve(query_bundle.query_str)))

    @staticmethod
    def _nodes(outcome: RetrievalOutcome) -> list[NodeWithScore]:
        if outcome.refused:
            dispatcher.event(RagsiftRefusalEvent(**outcome.event_data()))
        return to_nodes(outcome)
