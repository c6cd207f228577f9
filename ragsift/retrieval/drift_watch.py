"""The query path's drift check: feed each result's top-hit score to the monitor, flag shifts.

A result of a shifted scope gets ``calibration_shift = True``; the result that
trips the alarm also brings a ``RAG_CALIBRATION_SHIFT`` evidence event (once per
trip). The scope's PSI is exported as ``ragsift_calibration_drift_psi`` (a scope past
the label bound shares ``(other)``, which reads the highest PSI of the scopes in it).
Keyword-only results (ADR 029) carry their scope's flag but are not counted in
it: their top score is BM25's.
"""

from __future__ import annotations

from ragsift.confidence.drift import DriftMonitor
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.results import evidence_about, searched_keyword
from ragsift.schemas import EvidenceEvent, EvidenceType, RetrievalResult

__all__ = ["watch_drift"]


def watch_drift(
    monitor: DriftMonitor, result: RetrievalResult, metrics: Metrics, *, source: str
) -> tuple[RetrievalResult, EvidenceEvent | None]:
    """The result (flagged if its scope has shifted) and the trip's evidence, if it tripped."""
    version = result.breakdown.calibration_version or "none"
    top = result.breakdown.signals.get("top_score", 0.0)
    if searched_keyword(result):
        # A keyword search's top score is BM25's, on another scale than the cosines the
        # scope's sketch holds: counted, a change in the share of keyword queries would
        # read as drift (ADR 029). It carries the scope's flag all the same.
        reading = monitor.state(result.tenant_id, result.collection, version)
    else:
        reading = monitor.observe(result.tenant_id, result.collection, version, top)
    tenant, collection = metrics.tenant(result.tenant_id), metrics.collection(result.collection)
    if reading.scope_psi is not None:  # the highest over the scope's versions
        # Past the label bound, scopes share "(other)": it reads the highest of theirs.
        scope = (result.tenant_id, result.collection)
        metrics.drift_psi.set_labelled((tenant, collection), scope, reading.scope_psi)
    # Set either way: a cached result carries the flag of the time it was stored.
    flagged = result
    if result.calibration_shift != reading.shifted:
        flagged = result.model_copy(update={"calibration_shift": reading.shifted})
    if not reading.tripped:
        return flagged, None
    metrics.calibration_shifts.labels(tenant, collection).inc()
    evidence = evidence_about(
        flagged,
        EvidenceType.CALIBRATION_SHIFT,
        f"top-hit scores of {result.tenant_id}/{result.collection} drifted from the"
        f" calibration's reference (PSI {reading.psi:.3f} > {monitor.threshold:g})",
        threshold=monitor.threshold,
        source=source,
        psi=reading.psi,
        calibration_version=version,
    )
    return flagged, evidence
