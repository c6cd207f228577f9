"""Reader signals read outside the pipeline as the pipeline reads them.

Probing a collection, estimating its missing answers and self-calibrating it all
score searches with a calibration. Term coverage is read from the hits' text
(:func:`ragsift.evaluation.probes.read_probes`); sentence and token match embed at
query time, so they need the embedder and are read here (ADR 041).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.errors import ConfidenceError
from ragsift.confidence.features import READER_FEATURES, SWITCHED_FEATURES
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.reader import Reader, ReaderItem, ReaderScores

__all__ = ["read_embedded"]


async def read_embedded(
    base: CalibrationArtifact,
    embedder: Embedder,
    queries: Sequence[str],
    hits: Sequence[Sequence[SearchHit]],
) -> list[ReaderScores] | None:
    """The reader scores ``base`` needs that embed at query time (sentence and token
    match), read as the pipeline reads them, term coverage with them where ``base``
    uses it; None when it uses neither (:func:`~ragsift.evaluation.probes.read_probes`
    reads term coverage alone).

    Raises:
        ConfidenceError: ``base`` uses token match and ``embedder`` gives no token states.
    """
    from ragsift.settings import ConfidenceSettings

    needs = READER_FEATURES.intersection(base.features)
    if not SWITCHED_FEATURES.intersection(needs):
        return None
    try:
        reader = Reader.of_features(embedder, needs, top_n=ConfidenceSettings().reader_top_n)
    except ValueError as exc:  # token match without token states: a calibration to change
        raise ConfidenceError(f"calibration {base.version}: {exc}") from exc
    vectors = await embedder.embed(list(queries))
    return await reader.score(
        [
            ReaderItem(text, vector, [h.text for h in found], [h.indexed_terms() for h in found])
            for text, vector, found in zip(queries, vectors, hits, strict=True)
        ]
    )
