"""Re-probe a scope's calibration after an ingest changed its collection (ADR 014).

The answer threshold certified on SQuAD holds on a collection only as far as
questions it cannot answer score there as on SQuAD; short chunks let them score
higher (docs/evaluation.md, "Transfer to other chunkings"). ``ragsift calibrate
--collection`` measures that with the bundled probes; this module runs the same
job when an ingest leaves a scope's chunk count more than a set fraction away
from the count its probe calibration was made at (or the scope has none yet),
so a collection is probed without anyone remembering to.

It only writes where the last word was the bundled probes': a scope calibrated
from labels (feedback), with pseudo-queries or with a user's own probe bank
keeps that calibration, since a fresh bundled probe cannot stand in for it.
Where the probes certify no bar, the calibration in force is stored again with
``provenance.uncertified`` set, so the scope's results say so (ADR 015).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from ragsift.confidence import CalibrationArtifact, ConfidenceError
from ragsift.confidence.artifact import UNCERTIFIED_ADVICE_CODE, Provenance
from ragsift.confidence.registry import CalibrationScope, CalibrationStore
from ragsift.confidence.selfcal import left_out_of, mark_uncertified, unprobed_because
from ragsift.evaluation.holes import MissingAnswers, missing_answer_rate, with_missing_answers
from ragsift.evaluation.probes import (
    BUNDLED,
    MIN_PROBED_CHUNKS,
    bundled_probes,
    method_of,
    probe_calibrate,
)
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.index import VectorIndex

__all__ = [
    "DEFAULT_FRACTION",
    "Reprobe",
    "in_force",
    "mark_scope_uncertified",
    "reprobe_after_ingest",
    "reprobe_due",
]

log = logging.getLogger(__name__)

#: A scope is re-probed when its chunk count moved by more than this share.
DEFAULT_FRACTION: Final = 0.2

Outcome = Literal[
    "stored", "not_due", "kept", "too_small", "unsupported", "infeasible", "no_collection"
]


@dataclass(frozen=True)
class Reprobe:
    """What re-probing one scope did, and why.

    ``outcome``: ``stored`` (a new calibration is in the store), ``not_due``
    (the scope changed by no more than the fraction since its last probes),
    ``kept`` (the scope's calibration was not made by the bundled probes),
    ``too_small`` (no chunk: MIN_PROBED_CHUNKS), ``unsupported`` (the shipped
    calibration reads reader signals or keeps no in-scope sample) or
    ``infeasible`` (no threshold certified on this collection: the calibration in
    force is stored again with the mark, so its results say so); ``no_collection``
    (:mod:`ragsift.evaluation.sweep` only: a stored scope whose collection is gone).
    """

    scope: CalibrationScope
    outcome: Outcome
    message: str
    chunks: int
    threshold_before: float | None = None
    threshold: float | None = None
    version: str | None = None
    remap: str = ""
    """What the stored calibration's score alignment and probability re-map do, in
    words (stored only)."""
    artifact: CalibrationArtifact | None = None
    """The calibration put in the store (stored and infeasible only), so nothing that
    acts on it reads the store again."""
    holes: MissingAnswers | None = None
    """What the stored calibration answers of questions the scope cannot answer though
    its subject is there (stored only; None when estimating failed). Recorded in its
    provenance when anything could be asked."""


def reprobe_due(
    current: CalibrationArtifact | None,
    chunks: int,
    fraction: float,
    *,
    base_version: str | None = None,
) -> tuple[Literal["due", "not_due", "kept"], str]:
    """Whether a scope with ``chunks`` chunks and calibration ``current`` is due, and why.

    ``base_version``: the shipped calibration's version now. A probe calibration made
    on another (an upgrade refit the shipped one) is due whatever its chunk count.
    """
    if current is None:
        return "due", "no calibration of its own yet"
    provenance = current.provenance
    if provenance is None or current.data.source.startswith("feedback:"):
        return "kept", "its calibration was fit on labels; kept"
    if not provenance.method.startswith(method_of(BUNDLED)):
        return "kept", f"its calibration was made by {provenance.method.split(':')[0]}; kept"
    if base_version is not None and provenance.base_version != base_version:
        return "due", (
            f"its probes re-certified calibration {provenance.base_version};"
            f" the shipped one is now {base_version}"
        )
    before = provenance.chunks
    moved = abs(chunks - before) / max(before, 1)
    seen = f"{chunks} chunks, {moved:.0%} off the {before} its probes saw"
    if moved <= fraction:
        return "not_due", f"{seen} (re-probed past {fraction:.0%})"
    return "due", seen


async def reprobe_after_ingest(
    index: VectorIndex,
    embedder: Embedder,
    base: CalibrationArtifact,
    store: CalibrationStore,
    *,
    collection: str,
    tenant: str | None,
    fraction: float = DEFAULT_FRACTION,
    progress: Callable[[str, int, int], None] | None = None,
) -> Reprobe:
    """Re-probe ``tenant``'s part of ``collection`` (None: all of it) if due; store what
    is certified.

    ``base`` is the shipped calibration (the probes re-certify it, never a scoped
    one). Never raises for a scope it cannot probe: the outcome says why.

    Raises:
        CollectionNotFoundError: no such collection.
    """
    scope = CalibrationScope(collection, tenant)
    info = await index.collection_info(collection)
    counts = info.tenants or {}
    chunks = int(sum(counts.values()) if tenant is None else counts.get(tenant, 0))
    if chunks < MIN_PROBED_CHUNKS:
        return Reprobe(
            scope,
            "too_small",
            f"{chunks} chunks; probing needs at least {MIN_PROBED_CHUNKS}",
            chunks,
        )
    why_not = unprobed_because(base)
    if why_not is not None:
        return Reprobe(scope, "unsupported", why_not, chunks)
    current, why = _stored(store, scope)
    if why is None:
        due, why = reprobe_due(current, chunks, fraction, base_version=base.version)
        if due != "due":
            return Reprobe(scope, due, why, chunks)
    try:
        artifact = await probe_calibrate(
            index,
            embedder,
            base,
            bundled_probes(),
            collection=collection,
            tenant=tenant,
            progress=progress,
        )
    except ConfidenceError as exc:  # the collection answers so many probes that too few are left
        provenance = Provenance(
            method=f"{method_of(BUNDLED)}: {exc}",
            base_version=base.version,
            collection=collection,
            tenant=tenant,
            index_version=f"{info.points_count} points",
            chunks=chunks,
        )
        if (overtaken := _overtaken(store, scope, current, chunks)) is not None:
            return overtaken
        kept = _in_force(current, base)
        return _uncertified(store, scope, kept, provenance, str(exc), chunks)
    before = base.conformal.threshold if base.conformal.feasible else None
    if (overtaken := _overtaken(store, scope, current, chunks)) is not None:
        return overtaken
    if not artifact.conformal.feasible:
        assert artifact.provenance is not None  # probe_calibrate always records it
        kept = _in_force(current, base)
        bar = f"{kept.conformal.threshold:.2f}" if kept.conformal.feasible else "none"
        return _uncertified(
            store,
            scope,
            kept,
            artifact.provenance,
            f"questions it should not answer score so high here that no answer threshold"
            f" is certified at {chunks} chunks (the bar in force, {bar}, is not either)",
            chunks,
            threshold_before=before,
        )
    holes = await _estimate_holes(index, embedder, artifact, scope, progress)
    if holes is not None:
        artifact = with_missing_answers(artifact, holes)
    if (overtaken := _overtaken(store, scope, current, chunks)) is not None:
        return overtaken
    store.put(scope, artifact)
    dropped = left_out_of(artifact)
    if dropped:
        why = f"{why}; probes {dropped}"
    return Reprobe(
        scope,
        "stored",
        f"{why}: answer threshold {_moved(before, artifact.conformal.threshold)}",
        chunks,
        threshold_before=before,
        threshold=artifact.conformal.threshold,
        version=artifact.version,
        remap=artifact.probe_moves(),
        artifact=artifact,
        holes=holes,
    )


async def _estimate_holes(
    index: VectorIndex,
    embedder: Embedder,
    artifact: CalibrationArtifact,
    scope: CalibrationScope,
    progress: Callable[[str, int, int], None] | None,
) -> MissingAnswers | None:
    """What ``artifact`` answers of questions the scope cannot answer though its
    subject is there (docs/confidence.md, section 12). An estimate is advice: when
    it fails, it is logged and the calibration is stored without it."""
    try:
        estimate = await missing_answer_rate(
            index,
            embedder,
            artifact,
            collection=scope.collection,
            tenant=scope.tenant,
            progress=progress,
        )
    except Exception:
        log.exception("estimating what %s answers of what it lacks failed", scope)
        return None
    log.info("re-probing %s: %s", scope, estimate.describe())
    return estimate


def _overtaken(
    store: CalibrationStore,
    scope: CalibrationScope,
    read: CalibrationArtifact | None,
    chunks: int,
) -> Reprobe | None:
    """``kept`` when, since ``read`` was read, a calibration the probes must not replace
    was stored for ``scope`` (a feedback re-fit, ``ragsift calibrate``): probing takes
    a while, and writing over it lost its labels' fit for good (they read as re-fit)."""
    now, _ = _stored(store, scope)
    if now is None or (read is not None and now.version == read.version):
        return None
    due, why = reprobe_due(now, chunks, 1.0)
    if due != "kept":
        return None
    return Reprobe(scope, "kept", f"{why} (stored while the probes ran)", chunks)


def _in_force(
    current: CalibrationArtifact | None, base: CalibrationArtifact
) -> CalibrationArtifact:
    """The calibration a mark keeps: the scope's own probe calibration when it was made
    on ``base``, else ``base`` (one made on another is not served: see the registry)."""
    made_on = current.provenance.base_version if current and current.provenance else None
    return current if current is not None and made_on == base.version else base


def _stored(
    store: CalibrationStore, scope: CalibrationScope
) -> tuple[CalibrationArtifact | None, str | None]:
    """The scope's stored calibration, or None and why when it cannot be read (then
    whatever the probes make replaces it)."""
    try:
        return store.get(scope), None
    except ConfidenceError as exc:
        return None, f"its stored calibration cannot be read ({exc})"


def in_force(
    store: CalibrationStore, scope: CalibrationScope, base: CalibrationArtifact
) -> CalibrationArtifact:
    """The calibration a mark of ``scope`` keeps (see :func:`_in_force`), read from the
    store; a corrupt one counts as none, so the shipped one's mark replaces it."""
    current, _ = _stored(store, scope)
    return _in_force(current, base)


def mark_scope_uncertified(
    store: CalibrationStore,
    scope: CalibrationScope,
    kept: CalibrationArtifact,
    provenance: Provenance,
    why: str,
) -> CalibrationArtifact:
    """Store ``kept`` (the calibration in force: :func:`in_force`) again for ``scope``,
    marked as not certified there: answers keep its bar, and every result of the scope
    carries the ``uncertified_threshold`` advice naming ``why``. Returns what was stored.
    """
    marked = mark_uncertified(kept, provenance, why)
    store.put(scope, marked)
    return marked


def _uncertified(
    store: CalibrationStore,
    scope: CalibrationScope,
    kept: CalibrationArtifact,
    provenance: Provenance,
    why: str,
    chunks: int,
    *,
    threshold_before: float | None = None,
) -> Reprobe:
    """Nothing certified: the calibration in force stays, marked so its results say why."""
    marked = mark_scope_uncertified(store, scope, kept, provenance, why)
    return Reprobe(
        scope,
        "infeasible",
        f"{why}; answers keep the bar in force, and each result carries the"
        f" `{UNCERTIFIED_ADVICE_CODE}` advice (calibration {marked.version})",
        chunks,
        threshold_before=threshold_before,
        version=marked.version,
        artifact=marked,
    )


def _moved(before: float | None, after: float) -> str:
    if before is not None and round(before, 2) == round(after, 2):
        return f"stays {after:.2f}"
    return f"{'none' if before is None else f'{before:.2f}'} -> {after:.2f}"
