"""A collection's probes for its keyword-only queries (ADR 029).

The probes that re-map and re-certify a collection's hybrid model (ADR 014, 015)
are searched keyword-only as well, and re-certify the artifact's keyword model the
same way: on its own in-scope sample, with the probes as the out-of-scope class,
after the collection's score alignment (its BM25 scale, ADR 024). Where they certify
no keyword bar, the keyword part stays as shipped (its certificate is the fit
corpus's) and the calibration's provenance says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsift.confidence import CalibrationArtifact, ConfidenceError, Provenance
from ragsift.confidence.selfcal import with_probes
from ragsift.evaluation.probes import Probe, probe_confidence
from ragsift.evaluation.runner import RetrievalRun
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.reader import ReaderScores

__all__ = ["keyword_probed", "with_keyword_probes"]


def with_keyword_probes(
    probed: CalibrationArtifact,
    hits: Sequence[Sequence[SearchHit]],
    groups: Sequence[str],
    *,
    queries: Sequence[str],
    reader: Sequence[ReaderScores] | None = None,
    alpha: float | None = None,
) -> tuple[CalibrationArtifact, str | None]:
    """``probed`` (a collection's re-certified calibration) with its keyword part
    re-mapped and re-certified on the probes searched keyword-only (``hits``), at
    ``alpha`` (the part's own when None), and why not where it was left as it was
    (None: re-certified).

    ``probed`` unchanged, with the reason, when it has no keyword part, the part keeps
    no in-scope sample (an artifact fit before it did), or the probes certify no bar.
    """
    view = probed.keyword_model()
    if view is None or probed.keyword is None:
        return probed, "no keyword model"
    if view.conformal.in_scope is None:
        return probed, "its keyword model keeps no in-scope sample (refit it)"
    confidence = probe_confidence(view, hits, mode="keyword", reader=reader, queries=queries)
    # Only the certificate and the re-map are kept: the provenance stays probed's.
    made = probed.provenance or Provenance(
        method="probes", base_version=probed.version, collection=probed.data.source
    )
    try:
        certified = with_probes(
            view.model_copy(update={"remap": None}),
            confidence,
            groups,
            provenance=made,
            alpha=alpha,
        )
    except ConfidenceError as exc:
        return probed, str(exc)
    after = certified.conformal
    if not after.feasible:
        return probed, (
            f"the probes searched keyword-only certify no keyword answer threshold here; the"
            f" keyword model's {view.conformal.threshold:.2f} (certified on the fit corpus)"
            " stays"
        )
    part = probed.keyword.model_copy(update={"conformal": after, "remap": certified.remap})
    data = {**probed.model_dump(mode="json"), "version": "", "keyword": part.model_dump()}
    return CalibrationArtifact.model_validate(data), None


def keyword_probed(
    run: RetrievalRun, artifact: CalibrationArtifact, probes: Sequence[Probe]
) -> tuple[CalibrationArtifact, dict[str, Any]]:
    """``ragsift eval --mode keyword``: ``artifact`` (re-certified on the probes) with its
    keyword model re-certified on the keyword ``run``'s probe rows (its last ones), as
    the service does, and what moved."""
    n = len(probes)
    before = artifact.keyword
    probed, why = with_keyword_probes(
        artifact,
        run.hits[-n:],
        [p.group for p in probes],
        queries=[q.text for q in run.queries[-n:]],
        reader=run.reader[-n:] if run.reader is not None else None,
    )
    after = probed.keyword
    return probed, {
        "applied": why is None,
        "why_not": why,
        "threshold_before": None if before is None else before.conformal.threshold,
        "threshold": None if after is None else after.conformal.threshold,
    }
