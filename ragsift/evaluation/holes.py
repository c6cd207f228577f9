"""How often the collection answers a question on its subject whose answer it lacks.

Probes (ADR 014) are questions about other subjects: they certify the bar against
questions a collection is far from. A user's collection often covers its
subjects in part, and the questions asked about the rest find a passage on the
right subject that does not answer them. Retrieval scores read such a passage
much as one that answers (docs/confidence.md, "Reader signals"), so these are
answered more often than the certificate's risk suggests, and nothing the
service sees without labels says how often.

This estimates it. Pseudo-queries are cut from a sample of the collection's own
passages (:func:`~ragsift.evaluation.selfcal.pseudo_query`); each is searched as
the pipeline searches, with the document it came from left out of its hits, so
what it finds is that document's neighbours, as for a question whose answer the
collection does not hold. Each is scored with the calibration in force, and
the estimate is the share at or above its answer threshold.

On SQuAD corpora holding half of each article's paragraphs
(docs/evaluation.md, "A corpus that covers its subjects in part") it read
0.40-0.42 and 0.21-0.28 (two seeds each) where the real questions of the
left-out paragraphs cleared the bar 0.47 and 0.40 of the time: it runs low,
and it is an estimate of exposure, not a certificate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.artifact import MissingAnswerEstimate
from ragsift.evaluation.probes import MIN_PROBED_CHUNKS, probe_confidence
from ragsift.evaluation.reads import read_embedded
from ragsift.evaluation.report import proportion_interval
from ragsift.evaluation.selfcal import (
    chunks_per_tenant,
    pseudo_query,
    sample_chunks,
    search_as_pipeline,
)
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.index import VectorIndex

__all__ = [
    "DEFAULT_HOLE_SAMPLE",
    "STAGE",
    "MissingAnswers",
    "missing_answer_rate",
    "with_missing_answers",
]

#: The stage ``progress(stage, done, total)`` reports.
STAGE: Final = "left-out passages"

#: Pseudo-queries asked: one passage each (the interval at 0.3 is about ±0.065).
DEFAULT_HOLE_SAMPLE: Final = 200
#: Hits fetched per query, in ``k``s: the left-out document's own chunks are dropped
#: from them and the first ``k`` of the rest kept.
_OVERFETCH: Final = 3


@dataclass(frozen=True, slots=True)
class MissingAnswers:
    """Of ``asked`` questions whose answer was left out, ``answered`` cleared the bar."""

    asked: int
    answered: int
    threshold: float

    @property
    def rate(self) -> float:
        """The share answered (0 when nothing was asked)."""
        return self.answered / self.asked if self.asked else 0.0

    @property
    def interval(self) -> tuple[float, float] | None:
        """Its two-sided 95% Clopper-Pearson interval (None when nothing was asked)."""
        return proportion_interval(self.answered, self.asked)

    def describe(self) -> str:
        """One line for the command that measured it."""
        if not self.asked:
            return (
                "of the questions on this collection's subjects whose answer it does not"
                " hold, how many would be answered could not be estimated: none of the"
                " passages drawn has a sentence long enough to ask about"
            )
        low, high = self.interval or (0.0, 1.0)
        return (
            f"of the questions on this collection's subjects whose answer it does not hold,"
            f" about {self.rate:.0%} would be answered at the bar {self.threshold:.2f}"
            f" ({low:.0%}-{high:.0%} over {self.asked} of its passages, each searched with its"
            " own document left out; this estimate has run low: docs/confidence.md, section 12)"
        )


def with_missing_answers(
    artifact: CalibrationArtifact, estimate: MissingAnswers
) -> CalibrationArtifact:
    """``artifact`` recording ``estimate`` in its provenance (its version unchanged).

    An estimate that asked nothing records nothing; an artifact without provenance
    (the shipped one) is returned as it is.
    """
    if artifact.provenance is None or not estimate.asked:
        return artifact
    record = MissingAnswerEstimate(asked=estimate.asked, answered=estimate.answered)
    provenance = artifact.provenance.model_copy(update={"missing_answers": record})
    return artifact.model_copy(update={"provenance": provenance})


async def missing_answer_rate(
    index: VectorIndex,
    embedder: Embedder,
    artifact: CalibrationArtifact,
    *,
    collection: str,
    tenant: str | None = None,
    sample: int = DEFAULT_HOLE_SAMPLE,
    k: int = 8,
    seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None,
) -> MissingAnswers:
    """The share of ``collection``'s (or one tenant's) left-out questions ``artifact`` answers.

    Passages are drawn across tenants in proportion to their chunks, one
    pseudo-query each (fewer when a tenant holds fewer passages than drawn, or a
    passage has no sentence long enough).

    Raises:
        InvalidEventError: the collection (or tenant) has no chunk (MIN_PROBED_CHUNKS).
        CollectionNotFoundError: no such collection.
    """
    if sample <= 0:
        raise ValueError(f"sample must be > 0, got {sample}")
    _, counts = await chunks_per_tenant(index, collection, tenant, minimum=MIN_PROBED_CHUNKS)
    total = sum(counts.values())
    rng = np.random.default_rng(seed)
    owners = sorted(counts)
    # Passages per tenant in proportion to its chunks: a seeded multinomial draw, so a
    # collection of many small tenants is sampled, not searched tenant by tenant.
    wants = rng.multinomial(sample, [counts[o] / total for o in owners])
    asked: list[tuple[str, str, str]] = []  # tenant, query, left-out document
    for owner, want in zip(owners, wants, strict=True):
        if not want:
            continue
        for hit in await sample_chunks(index, collection, owner, embedder.dim, int(want), rng):
            text = pseudo_query(hit.text, rng)
            if text is not None:
                asked.append((owner, text, hit.doc_id))
    found = await search_as_pipeline(
        index,
        embedder,
        collection,
        [(owner, text, None) for owner, text, _ in asked],
        k * _OVERFETCH,
        progress=None if progress is None else lambda _, n, total: progress(STAGE, n, total),
    )
    hits = [
        [h for h in row if h.doc_id != left_out][:k]
        for row, (_, _, left_out) in zip(found, asked, strict=True)
    ]
    threshold = artifact.conformal.threshold
    texts = [text for _, text, _ in asked]
    reader = await read_embedded(artifact, embedder, texts, hits)
    confidence = probe_confidence(artifact, hits, reader=reader, queries=texts)
    return MissingAnswers(len(asked), int((confidence >= threshold).sum()), threshold)
