"""ragsift as a LangChain retriever (``pip install 'ragsift[langchain]'``).

``RagsiftRetriever(source=...)`` returns one ``Document`` per kept hit, with
ragsift's confidence, level and citation in its metadata. When ragsift refuses
(nothing relevant, not answerable, retrieval failed) it returns ``[]`` and sends
the custom event ``ragsift_refusal`` (:data:`REFUSAL_EVENT`) to the run's
callbacks, so a chain can answer with a refusal instead of generating: read it
with a callback handler's ``on_custom_event`` or ``astream_events``.
"""

from __future__ import annotations

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from ragsift.integrations.outcome import REFUSAL_EVENT, RetrievalOutcome, chunk_metadata, outcome_of
from ragsift.integrations.source import RetrievalSource, run_sync

__all__ = ["REFUSAL_EVENT", "RagsiftRetriever", "to_documents"]


def to_documents(outcome: RetrievalOutcome) -> list[Document]:
    """The outcome's chunks as LangChain documents (none when ragsift refused)."""
    return [
        Document(
            page_content=chunk.text,
            id=chunk.chunk_id,
            metadata=chunk_metadata(outcome.result, chunk),
        )
        for chunk in outcome.chunks
    ]


class RagsiftRetriever(BaseRetriever):
    """A LangChain retriever over ragsift (module docstring).

    Args:
        source: where results come from: ``EmbeddedSource`` or ``HttpSource``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: RetrievalSource

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        outcome = outcome_of(run_sync(self.source.aretrieve(query)))
        if outcome.refused:
            # as dispatch_custom_event does: the run's handlers, the event tied to this run
            run_manager.get_child().on_custom_event(
                REFUSAL_EVENT, outcome.event_data(), run_id=run_manager.run_id
            )
        return to_documents(outcome)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        outcome = outcome_of(await self.source.aretrieve(query))
        if outcome.refused:
            await run_manager.get_child().on_custom_event(
                REFUSAL_EVENT, outcome.event_data(), run_id=run_manager.run_id
            )
        return to_documents(outcome)
