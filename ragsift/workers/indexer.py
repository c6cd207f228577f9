"""The indexer handler: document events in, the index updated and the tenant's version bumped
(each write marked pending in the cache first: ``ragsift.ingest.versions``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ragsift.ingest.indexer import Indexer
from ragsift.ingest.language_watch import LanguageWatch
from ragsift.schemas import DocumentEvent
from ragsift.workers.audit import Backoff
from ragsift.workers.base import MAX_DEADLINE_S, Outcome
from ragsift.workers.held import STORE_BACKOFF, Hold, Holds, until_available

if TYPE_CHECKING:
    from ragsift.evaluation.sweep import Reprober

__all__ = ["IndexerHandler"]

log = logging.getLogger(__name__)

#: The slowest rate, in characters a second, at which a document is assumed to be
#: chunked, embedded and written: the onnx model read ~17,000 a second on two quiet
#: cores, and a busy machine a quarter of that. The deadline allows this rate, so it
#: cuts off an indexer that is stuck, not one with a long document.
SLOWEST_CHARS_PER_S = 2_000
# A call's deadline never goes past MAX_DEADLINE_S (600 s): 1,000,000 characters (the
# most a document event holds) get 500 s more than the flat deadline.


class IndexerHandler(Holds):
    """Applies upserts and deletes in order (the documents topic is keyed by doc id).

    With a ``reprober``, every (tenant, collection) a batch changed is handed to
    it, which re-probes the scope's answer threshold once it settles (ADR 014).
    Once most of a scope's text looks non-English, it logs a warning, once per scope
    (:class:`~ragsift.ingest.language_watch.LanguageWatch`), unless ``languages`` is
    False (``RAGSIFT_CONFIDENCE_LANGUAGE_CHECKS=off``).
    """

    name = "indexer"
    source = "documents"

    def __init__(
        self,
        indexer: Indexer,
        reprober: Reprober | None = None,
        *,
        backoff: Backoff = STORE_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        languages: bool = True,
    ):
        self.indexer = indexer
        self.reprober = reprober
        self.backoff = backoff
        self._sleep = sleep
        self.hold = Hold()
        self.languages = LanguageWatch() if languages else None

    @property
    def model(self) -> type[BaseModel]:
        """Document events in."""
        return DocumentEvent

    def deadline_for(self, events: Sequence[DocumentEvent], default: float) -> float:
        """The deadline of one call on ``events``: ``default`` (the runtime's, 30 s) and
        the time their text takes at :data:`SLOWEST_CHARS_PER_S`, at most
        :data:`MAX_DEADLINE_S` (or ``default`` where that is longer)."""
        text = sum(len(event.text or "") for event in events)
        return min(default + text / SLOWEST_CHARS_PER_S, max(default, MAX_DEADLINE_S))

    async def handle_batch(self, events: Sequence[DocumentEvent]) -> list[Outcome]:
        """Apply each event; a failure is that event's outcome (dead-lettered), not the batch's."""
        outcomes: list[Outcome] = []
        for event in events:
            try:
                report = await self.indexer.apply(event)
            except Exception as exc:  # each failure is routed to the dead-letter topic
                outcomes.append(exc)
            else:
                outcomes.append([])
                for doc_id, before, now in report.other_sources:
                    log.warning(
                        "document %r of tenant %r in %r, from %r, replaced one of its id"
                        " indexed from %r",
                        doc_id,
                        event.tenant_id,
                        event.collection,
                        now,
                        before,
                    )
                # Only a change is probed again (a version bumped for another indexer's
                # write counts: its re-probe went with it); a no-op changed nothing.
                moved = report.documents or report.deleted_documents
                if self.reprober is not None and (moved or report.index_version is not None):
                    self.reprober.touched(event.tenant_id, event.collection)
                if self.languages is not None and event.op == "upsert" and event.text:
                    said = self.languages.observe(event.tenant_id, event.collection, [event.text])
                    if said is not None:
                        log.warning("%s", said)
        return outcomes

    async def prepare(self, events: Sequence[DocumentEvent]) -> None:
        """Hold the batch until the cache takes a pending mark on each scope it names,
        before any of it is written (``IndexVersions.prepare``): called by the runtime
        with no deadline, so a Redis outage holds the documents topic, nothing written,
        instead of dead-lettering its events or writing what a crash would leave unseen."""
        scopes = {(event.tenant_id, event.collection) for event in events}
        await until_available(
            lambda: self.indexer.versions.prepare(scopes),
            what=f"{self.name}: marking scopes pending",
            backoff=self.backoff,
            sleep=self._sleep,
            hold=self.hold,
        )

    async def settle(self) -> None:
        """Hold the batch until the cache takes every new index version it owes
        (``Indexer.owed``) and clears the batch's pending marks: called by the runtime
        after the batch, with no deadline, so a Redis outage holds the documents topic
        instead of dead-lettering events whose change was made, and leaving results of
        the old text cached for a day."""
        if self.indexer.versions.unsettled:
            await until_available(
                self.indexer.settle,
                what=f"{self.name}: bumping index versions, clearing pending marks",
                backoff=self.backoff,
                sleep=self._sleep,
                hold=self.hold,
            )

    async def close(self) -> None:
        """The indexer's resources are owned by whoever built it; a pending re-probe stops."""
        if self.reprober is not None:
            await self.reprober.close()
