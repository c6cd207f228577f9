"""The indexer handler: document events in, the index updated and the tenant's version bumped."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.ingest.indexer import Indexer
from ragsift.schemas import DocumentEvent
from ragsift.workers.base import Outcome

__all__ = ["IndexerHandler"]


class IndexerHandler:
    """Applies upserts and deletes in order (the documents topic is keyed by doc id)."""

    name = "indexer"
    source = "documents"

    def __init__(self, indexer: Indexer):
        self.indexer = indexer

    @property
    def model(self) -> type[BaseModel]:
        """Document events in."""
        return DocumentEvent

    async def handle_batch(self, events: Sequence[DocumentEvent]) -> list[Outcome]:
        """Apply each event; a failure is that event's outcome (dead-lettered), not the batch's."""
        outcomes: list[Outcome] = []
        for event in events:
            try:
                await self.indexer.apply(event)
            except Exception as exc:  # each failure is routed to the dead-letter topic
                outcomes.append(exc)
            else:
                outcomes.append([])
        return outcomes

    async def close(self) -> None:
        """The indexer's resources are owned by whoever built it."""
