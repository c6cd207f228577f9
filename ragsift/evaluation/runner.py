"""Run a labelled set through real retrieval once; score it many ways afterwards.

Retrieval (embedding + Qdrant Edge hybrid search) is the expensive part, so it
runs once; every scorer — the calibrated one and the seed rules — is then
applied to the same hit lists.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ragsift.evaluation.dataset import EvalQuery, LabelledSet
from ragsift.evaluation.probe_vectors import with_bank_vectors
from ragsift.ingest.indexer import Indexer
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.hit_scores import prefetch_limit
from ragsift.retrieval.index import DOC_FIELD, SearchHit, SearchRequest
from ragsift.retrieval.reader import Reader, ReaderItem, ReaderScores

if TYPE_CHECKING:  # the corrective step imports the pipeline's engines; typing only here
    from ragsift.evaluation.corrective import EvalCorrection

__all__ = ["EVAL_TENANT", "RetrievalRun", "run_retrieval", "run_retrievals"]

EVAL_TENANT = "eval"
EVAL_COLLECTION = "eval"
QUERY_BATCH = 256  # queries embedded and searched per call


@dataclass(frozen=True, slots=True)
class RetrievalRun:
    """Hits of every query of a labelled set, and whether they hold the answer."""

    dataset: LabelledSet
    embedder_id: str
    k: int
    mode: str
    hits: list[list[SearchHit]]
    #: Reader scores per query (aligned with :attr:`hits`), when a reader read the hits.
    reader: list[ReaderScores] | None = None

    @property
    def queries(self) -> list[EvalQuery]:
        """The labelled queries, aligned with :attr:`hits`."""
        return self.dataset.queries

    def relevant_rank(self) -> np.ndarray:
        """Rank (1-based) of the best relevant document among the hits; 0 when absent."""
        ranks = np.zeros(len(self.queries), dtype=np.int64)
        for i, (q, hits) in enumerate(zip(self.queries, self.hits, strict=True)):
            ranks[i] = next((h.rank for h in hits if h.doc_id in q.relevant), 0)
        return ranks


async def run_retrieval(
    dataset: LabelledSet,
    embedder: Embedder,
    *,
    k: int = 8,
    mode: str = "hybrid",
    workdir: Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    reader: Reader | None = None,
    corrective: EvalCorrection | None = None,
) -> RetrievalRun:
    """Index the corpus in a fresh Qdrant Edge shard and retrieve for every query.

    A query with candidates is searched only within them (a filter on doc id).
    With a ``reader``, every query's hits are read as the pipeline reads them.
    With ``corrective``, each batch's weak or split queries are retried once (B10)
    and the winning hits are the query's.
    ``progress(stage, done, total)`` reports the ``index`` and ``query`` stages.
    """
    runs = await run_retrievals(
        dataset,
        embedder,
        k=k,
        modes=(mode,),
        workdir=workdir,
        progress=progress,
        reader=reader,
        corrective=corrective,
    )
    return runs[mode]


async def run_retrievals(
    dataset: LabelledSet,
    embedder: Embedder,
    *,
    k: int = 8,
    modes: Sequence[str] = ("hybrid",),
    workdir: Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    reader: Reader | None = None,
    corrective: EvalCorrection | None = None,
) -> dict[str, RetrievalRun]:
    """:func:`run_retrieval` in each of ``modes``, on one index and one embedding of
    the corpus and the queries (``calibrate`` fits the dense-only imputation on the
    dense run, ADR 028)."""
    if not modes or len(set(modes)) != len(modes):
        raise ValueError(f"modes must name at least one mode, each once, got {list(modes)}")
    asker = with_bank_vectors(embedder)  # probes among the queries: embedded once, kept
    await asker.keep([q.text for q in dataset.queries])
    hits: dict[str, list[list[SearchHit]]] = {m: [] for m in modes}
    read: dict[str, list[ReaderScores]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        index = EdgeIndex(Path(tmp))
        try:
            indexer = Indexer(index, embedder)
            await indexer.ingest(
                EVAL_TENANT,
                EVAL_COLLECTION,
                dataset.documents,
                progress=(lambda done, total: progress("index", done, total)) if progress else None,
            )
            # No optimize(): without an HNSW graph the shard searches exactly, so a
            # labelled run (and the calibration fit on it) is reproducible bit for bit.
            queries = dataset.queries
            for start in range(0, len(queries), QUERY_BATCH):
                part = queries[start : start + QUERY_BATCH]
                vectors = await asker.embed([q.text for q in part])
                for mode in modes:
                    requests = [
                        SearchRequest(
                            tenant_id=EVAL_TENANT,
                            query=q.text,
                            dense_vector=v.tolist(),
                            mode=mode,  # type: ignore[arg-type]  # validated by SearchRequest
                            limit=k,
                            prefetch_limit=prefetch_limit(k),  # as the pipeline searches
                            embedder_id=embedder.embedder_id,
                            filter=None
                            if q.candidates is None
                            else {DOC_FIELD: list(q.candidates)},
                        )
                        for q, v in zip(part, vectors, strict=True)
                    ]
                    found = list(await index.search_batch(EVAL_COLLECTION, requests))
                    if corrective is not None:
                        found = await corrective.apply(index, EVAL_COLLECTION, requests, found)
                    hits[mode].extend(found)
                    if reader is not None:
                        read[mode].extend(await reader.score(reader_items(part, vectors, found)))
                if progress:
                    progress("query", min(start + QUERY_BATCH, len(queries)), len(queries))
                await asyncio.sleep(0)  # Ctrl-C lands here, not after the last batch
        finally:
            await index.close()
    return {
        m: RetrievalRun(
            dataset, embedder.embedder_id, k, m, hits[m], read[m] if reader is not None else None
        )
        for m in modes
    }


def reader_items(
    queries: Sequence[EvalQuery], vectors: npt.ArrayLike, hits: Sequence[Sequence[SearchHit]]
) -> list[ReaderItem]:
    """What the reader reads for a batch of queries: text, vector and hit texts."""
    return [
        ReaderItem(q.text, v, [h.text for h in found])
        for q, v, found in zip(queries, np.asarray(vectors), hits, strict=True)
    ]
