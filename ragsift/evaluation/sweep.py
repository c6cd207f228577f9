"""Re-probe every stored scope that is due, without waiting for an ingest.

A scope's probe calibration re-certifies the shipped calibration on the scope's
own scores (ADR 014). When an upgrade refits the shipped one, each such
calibration was made on the old one, and queries skip it for the next broader
calibration (a warning, ``ragsift_calibration_fallbacks_total{reason="base"}``)
until the scope is probed again. An ingest into the scope does that; a scope
nobody writes to would wait for ever. :func:`reprobe_stored` goes through the
store instead: every scope :func:`~ragsift.evaluation.reprobe.reprobe_after_ingest`
finds due (made on another shipped calibration, or its chunk count moved past the
fraction) is probed again, one at a time, and every other keeps what it has,
with the reason. ``ragsift calibrations reprobe`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.registry import CalibrationScope, CalibrationStore
from ragsift.evaluation.reprobe import DEFAULT_FRACTION, Reprobe, reprobe_after_ingest
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.index import VectorIndex

__all__ = ["reprobe_stored"]


async def reprobe_stored(
    index: VectorIndex,
    embedder: Embedder,
    base: CalibrationArtifact,
    store: CalibrationStore,
    *,
    fraction: float = DEFAULT_FRACTION,
    only: Callable[[CalibrationScope], bool] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    done: Callable[[Reprobe], None] | None = None,
) -> list[Reprobe]:
    """Re-probe each stored scope (those ``only`` accepts) that is due; one outcome each.

    ``done`` is called with each outcome as it is known, so a long sweep shows its
    progress. A scope whose collection is gone is reported ``no_collection`` and left
    in the store (``ragsift calibrations remove`` takes it away).
    """
    outcomes: list[Reprobe] = []
    for scope in store.scopes():
        if only is not None and not only(scope):
            continue
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
            outcome = Reprobe(
                scope,
                "no_collection",
                f"the index has no collection {scope.collection!r}; its calibration is"
                " kept (remove it with `ragsift calibrations remove`)",
                0,
            )
        outcomes.append(outcome)
        if done is not None:
            done(outcome)
    return outcomes
