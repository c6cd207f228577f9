"""How often the first hit is the relevant one, in the orders a result can take.

The confidence figures say whether the kept context holds the answer; a reader of
the result starts at its first hit. Among the same ``k`` hits of each in-scope
question, three orders:

* ``retriever``: as the search returned them (RRF in hybrid mode);
* ``dense``: by cosine, as a hybrid result ranks its kept hits (a hit the dense
  channel did not return goes last; docs/confidence.md, section 1);
* ``reranked``: by a cross-encoder's logit over the first ``candidates`` hits, as
  the pipeline reranks (``RAGSIFT_RERANKER_KIND``; docs/reranking.md), when one is
  configured.

A question without hits counts as a miss in every order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.evaluation.runner import RetrievalRun
from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.rerank import Reranker

__all__ = ["RERANK_CHUNK", "RerankFailedError", "first_hits"]

RERANK_CHUNK = 32  # questions per reranker call: progress moves, memory stays bounded


class RerankFailedError(RuntimeError):
    """The reranker failed on a question: its figure would be a guess."""


def _dense_first(hits: Sequence[SearchHit]) -> SearchHit:
    return max(hits, key=lambda h: -np.inf if h.dense_score is None else h.dense_score)


async def first_hits(
    run: RetrievalRun,
    evaluated: npt.NDArray[np.bool_],
    reranker: Reranker | None = None,
    *,
    candidates: int = 20,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Share of the evaluated in-scope questions whose first hit is relevant, per order.

    Raises:
        RerankFailedError: the reranker failed on a question (the message says which).
    """
    rows = [
        (q, hits)
        for q, hits, e in zip(run.queries, run.hits, evaluated, strict=True)
        if e and q.kind == "in_scope"
    ]
    out: dict[str, Any] = {"in_scope": len(rows), "retriever": None, "dense": None}
    if not rows:
        return out
    out["retriever"] = _share(rows, lambda hits: hits[0])
    if run.mode == "hybrid":  # dense and keyword runs rank by their one channel already
        out["dense"] = _share(rows, _dense_first)
    if reranker is None:
        return out
    window = max(1, min(candidates, run.k))
    firsts: list[SearchHit | None] = []
    for start in range(0, len(rows), RERANK_CHUNK):
        part = rows[start : start + RERANK_CHUNK]
        asked = [(q.text, [h.text for h in hits[:window]]) for q, hits in part]
        for (q, hits), scores in zip(part, await reranker.rerank_many(asked), strict=True):
            if isinstance(scores, Exception):
                raise RerankFailedError(f"question {q.query_id}: {scores}") from scores
            firsts.append(hits[int(np.argmax(scores))] if hits else None)
        if progress is not None:
            progress("rerank", len(firsts), len(rows))
    relevant = [
        f is not None and f.doc_id in q.relevant for f, (q, _) in zip(firsts, rows, strict=True)
    ]
    out.update(
        reranked=round(float(np.mean(relevant)), 4),
        reranker_id=reranker.reranker_id,
        reranked_window=window,
    )
    return out


def _share(
    rows: Sequence[tuple[Any, Sequence[SearchHit]]], first: Callable[[Sequence[SearchHit]], Any]
) -> float:
    found = [bool(hits) and first(hits).doc_id in q.relevant for q, hits in rows]
    return round(float(np.mean(found)), 4)
