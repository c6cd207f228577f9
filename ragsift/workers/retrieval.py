"""The retrieval handler: query events in, results and evidence out."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from ragsift.retrieval.pipeline import RetrievalPipeline
from ragsift.schemas import QueryEvent
from ragsift.workers.base import Emit, Outcome

__all__ = ["RetrievalHandler"]


class RetrievalHandler:
    """Runs a batch of queries through the pipeline and routes what comes out."""

    name = "retrieval"
    source = "queries"

    def __init__(self, pipeline: RetrievalPipeline):
        self.pipeline = pipeline

    @property
    def model(self) -> type[BaseModel]:
        """Query events in."""
        return QueryEvent

    async def handle_batch(self, events: Sequence[QueryEvent]) -> list[Outcome]:
        """Results to ``retrievals`` keyed by query id; evidence to ``audit``."""
        outcomes: list[Outcome] = []
        for event, output in zip(events, await self.pipeline.process(events), strict=True):
            if isinstance(output, Exception):
                outcomes.append(output)
                continue
            emits = [Emit("retrievals", event.query_id, output.result)]
            emits.extend(Emit("audit", ev.subject or event.query_id, ev) for ev in output.evidence)
            outcomes.append(emits)
        return outcomes

    async def close(self) -> None:
        """The pipeline's resources are owned by whoever built it."""
