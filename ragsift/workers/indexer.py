"""The indexer handler: document events in, the index updated and the tenant's version bumped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ragsift.ingest.indexer import Indexer
from ragsift.schemas import DocumentEvent
from ragsift.workers.base import Outcome

if TYPE_CHECKING:
    from ragsift.evaluation.sweep import Reprober

__all__ = ["IndexerHandler"]


class IndexerHandler:
    """Applies upserts and deletes in order (the documents topic is keyed by doc id).

    With a ``reprober``, every (tenant, collection) a batch changed is handed to
    it, which re-probes the scope's answer threshold once it settles (ADR 014).
    """

    name = "indexer"
    source = "documents"

    def __init__(self, indexer: Indexer, reprober: Reprober | None = None):
        self.indexer = indexer
        self.reprober = reprober

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
                if self.reprober is not None:
                    self.reprober.touched(event.tenant_id, event.collection)
        return outcomes

    async def close(self) -> None:
        """The indexer's resources are owned by whoever built it; a pending re-probe stops."""
        if self.reprober is not None:
            await self.reprober.close()
