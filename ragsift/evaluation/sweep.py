"""Re-probing outside an ingest command: the streaming indexer's background queue, and
a sweep of every stored scope.

A scope's probe calibration re-certifies the shipped calibration on the scope's
own scores (ADR 014). :class:`Reprober` re-probes, in the background, each scope
a streaming indexer wrote to, once it settles.

When an upgrade refits the shipped calibration, each probe calibration was made
on the old one, and queries skip it for the next broader calibration (a warning,
``ragsift_calibration_fallbacks_total{reason="base"}``) until the scope is probed
again. An ingest into the scope does that; a scope nobody writes to would wait
for ever. So the streaming indexer sweeps the store when it starts
(:meth:`Reprober.sweep`: every scope made on another shipped calibration joins
its queue), and :func:`reprobe_stored` (``ragsift calibrations reprobe``) goes
through the store at once: every scope
:func:`~ragsift.evaluation.reprobe.reprobe_after_ingest` finds due (made on
another shipped calibration, or its chunk count moved past the fraction) is
probed again, one at a time, and every other keeps what it has, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.registry import CalibrationScope, CalibrationStore
from ragsift.evaluation.holes import MissingAnswers
from ragsift.evaluation.reprobe import (
    DEFAULT_FRACTION,
    Reprobe,
    reprobe_after_ingest,
    reprobe_due,
)
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.index import VectorIndex

__all__ = ["Reprober", "reprobe_stored", "stale_scopes"]

log = logging.getLogger(__name__)


async def reprobe_stored(
    index: VectorIndex,
    embedder: Embedder,
    base: CalibrationArtifact,
    store: CalibrationStore,
    *,
    fraction: float = DEFAULT_FRACTION,
    only: Callable[[CalibrationScope], bool] | None = None,
    named: CalibrationScope | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    done: Callable[[Reprobe], None] | None = None,
) -> list[Reprobe]:
    """Re-probe each stored scope (those ``only`` accepts) that is due; one outcome each.
    When none is stored, ``named`` is probed: a scope never probed (one under 10 chunks
    before ADR 047, or ingested with ``--no-probe``) has nothing in the store.

    ``done`` is called with each outcome as it is known, so a long sweep shows its
    progress. A scope whose collection is gone is reported ``no_collection`` and left
    in the store (``ragsift calibrations remove`` takes it away).
    """
    scopes = [s for s in store.scopes() if only is None or only(s)]
    if not scopes and named is not None:
        scopes = [named]
    outcomes: list[Reprobe] = []
    for scope in scopes:
        try:
            outcome = await reprobe_after_ingest(
                index,
                embedder,
                base,
                store,
                collection=scope.collection,
                tenant=scope.tenant,
                fraction=fraction,
                progress=progress,
            )
        except CollectionNotFoundError:
            kept = (
                "nothing to probe"
                if scope is named
                else "its calibration is kept (remove it with `ragsift calibrations remove`)"
            )
            gone = f"the index has no collection {scope.collection!r}; {kept}"
            outcome = Reprobe(scope, "no_collection", gone, 0)
        outcomes.append(outcome)
        if done is not None:
            done(outcome)
    return outcomes


def stale_scopes(store: CalibrationStore, base: CalibrationArtifact) -> list[CalibrationScope]:
    """The stored scopes whose bundled-probe calibration was made on another shipped
    calibration than ``base`` (a corrupt one counts too: probing replaces it).

    Raises:
        OSError: the store cannot be read.
    """
    stale = []
    for scope in store.scopes():
        try:
            current = store.get(scope)
        except ConfidenceError:  # a corrupt artifact: what the probes make replaces it
            stale.append(scope)
            continue
        if current is None or current.provenance is None:
            continue
        # Its own chunk count: only the change of base can make it due here.
        due, _ = reprobe_due(current, current.provenance.chunks, 0.0, base_version=base.version)
        if due == "due":
            stale.append(scope)
    return stale


class Reprober:
    """Re-probes, in the background, the scopes a streaming indexer wrote to.

    A scope is probed once no document has reached it for ``quiet_s`` seconds,
    so a bulk load is probed once, when it settles; scopes are probed one at a
    time. At start the runtime calls :meth:`sweep`, which queues the scopes an
    upgrade left stale. Each outcome is logged and counted
    (``ragsift_calibration_reprobes_total{outcome}``); an error is counted as
    ``error`` and the indexer keeps going (the next change of the scope tries again).
    """

    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        base: CalibrationArtifact,
        store: CalibrationStore,
        *,
        fraction: float = DEFAULT_FRACTION,
        quiet_s: float = 30.0,
        count: Callable[[str], None] | None = None,
        holes: Callable[[CalibrationScope, MissingAnswers], None] | None = None,
    ):
        self._job = (index, embedder, base, store)
        self.fraction = fraction
        self.quiet_s = quiet_s
        self._count = count
        self._holes = holes
        self._touched: dict[CalibrationScope, float] = {}
        self._task: asyncio.Task[None] | None = None
        self.done: list[Reprobe] = []  # the latest outcomes, newest last (bounded)

    def touched(self, tenant: str | None, collection: str, *, settled: bool = False) -> None:
        """Note that ``tenant``'s part of ``collection`` (None: all of it) changed just
        now, or, ``settled``, long enough ago to be probed at once."""
        at = time.monotonic() - (self.quiet_s if settled else 0.0)
        self._touched[CalibrationScope(collection, tenant)] = at
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def sweep(self) -> list[CalibrationScope]:
        """At start: queue every stored scope made on another shipped calibration (an
        upgrade refit it), so it is probed again without waiting for an ingest. A store
        that cannot be read is logged and counted as ``error``; indexing goes on."""
        _, _, base, store = self._job
        try:
            stale = await asyncio.to_thread(stale_scopes, store, base)
        except Exception:
            log.exception("sweeping the calibration store for stale scopes failed")
            self._note("error")
            return []
        if stale:
            log.info(
                "re-probing %d scopes made on another shipped calibration than %s",
                len(stale),
                base.version,
            )
        for scope in stale:
            self.touched(scope.tenant, scope.collection, settled=True)
        return stale

    async def _drain(self) -> None:
        while self._touched:
            settled = min(self._touched.values()) + self.quiet_s
            await asyncio.sleep(max(0.0, settled - time.monotonic()))
            now = time.monotonic()
            for scope, at in list(self._touched.items()):
                if at + self.quiet_s <= now and self._touched.get(scope) == at:
                    del self._touched[scope]
                    await self._probe(scope)

    async def _probe(self, scope: CalibrationScope) -> None:
        try:
            done = await reprobe_after_ingest(
                *self._job, collection=scope.collection, tenant=scope.tenant, fraction=self.fraction
            )
        except CollectionNotFoundError:  # swept from the store, its collection gone
            log.warning("re-probing %s: its collection is gone; calibration kept", scope)
            self._note("no_collection")
            return
        except Exception:  # the indexer must keep indexing; the next change retries
            log.exception("re-probing %s failed", scope)
            self._note("error")
            return
        level = logging.WARNING if done.outcome == "infeasible" else logging.INFO
        log.log(level, "re-probing %s: %s (%s)", scope, done.outcome, done.message)
        self._note(done.outcome)
        self.done = [*self.done[-99:], done]
        if self._holes is not None and done.holes is not None and done.holes.asked:
            self._holes(scope, done.holes)

    def _note(self, outcome: str) -> None:
        if self._count is not None:
            self._count(outcome)

    async def close(self) -> None:
        """Stop waiting; a probe under way is cancelled (nothing half-stored: a put is atomic)."""
        self._touched.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
