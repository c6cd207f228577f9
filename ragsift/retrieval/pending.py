"""The state of one admitted query while the pipeline's batch runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragsift.confidence import CalibrationArtifact
from ragsift.retrieval.reader import ReaderScores
from ragsift.retrieval.records import SearchHit
from ragsift.schemas import QueryEvent, Selection

__all__ = ["Pending"]


@dataclass(slots=True)
class Pending:
    """One admitted query while its batch runs: where its outcome goes and what it needs."""

    position: int
    query: QueryEvent
    selection: Selection
    limit: int
    key: str | None = None
    vector: list[float] | None = None
    rerank_failed: bool = False
    #: A calibrated model scores this query as without a reranker; the reranker then
    #: only orders its kept hits (ADR 048). False: reranked before scoring, or no reranker.
    orders_kept: bool = False
    reader: ReaderScores | None = None
    #: The calibration this query is scored with (its tenant's or collection's, else
    #: the default); resolved once at admission so its cache key and score agree.
    calibration: CalibrationArtifact | None = None
    #: The search's hits before rerank and selection (B10 reads both channels' ranks).
    candidates: list[SearchHit] = field(default_factory=list)
    #: B10: the BM25 text of an ``expand`` retry; None searches the query's own text.
    search_text: str | None = None
    #: B10: this is a retry of a query already scored (and counted in its scope's mix).
    retry: bool = False
