"""Corrective retrieval (B10) inside ``ragsift eval``: the pipeline's rules on a labelled run.

Each batch's hits are scored as the pipeline scores them (the same
:class:`~ragsift.retrieval.engines.EngineSet`, the artifact under evaluation);
the :class:`~ragsift.retrieval.corrective.Corrector` plans the retries, they are
searched in one batch, scored, and the winner's hits replace the first try's.
Every scorer of the evaluation then reads the winner's hits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.features import SWITCHED_FEATURES
from ragsift.errors import ConfigurationError
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.corrective import Corrector, Retry, Scored, scored_by
from ragsift.retrieval.engines import EngineSet
from ragsift.retrieval.hit_scores import hit_scores, prefetch_limit
from ragsift.retrieval.index import SearchHit, SearchRequest, VectorIndex
from ragsift.retrieval.reader import ChunkTerms
from ragsift.schemas import CorrectiveInfo, SearchMode
from ragsift.settings import ConfidenceSettings, CorrectiveSettings

__all__ = ["EvalCorrection"]


@dataclass(frozen=True, slots=True)
class _Path:
    scored: Scored
    hits: list[SearchHit]


class EvalCorrection:
    """Applies corrective retrieval to the batches of a labelled run.

    Args:
        settings: the corrective settings under evaluation.
        artifact: the calibration the run is evaluated with (it scores both tries).
        embedder_id: the run's embedder.
        max_k: the largest k a ``wider`` retry may search.

    Raises:
        ConfigurationError: the artifact needs sentence or token match (the retry's
            hits would have to be embedded too; not supported here). Term coverage is
            read on both tries, as the pipeline reads them.
    """

    def __init__(
        self,
        settings: CorrectiveSettings,
        artifact: CalibrationArtifact,
        embedder_id: str,
        *,
        max_k: int,
    ) -> None:
        self.engines = EngineSet(ConfidenceSettings(), embedder_id, calibration=artifact)
        embedded = sorted(SWITCHED_FEATURES.intersection(self.engines.reader_features))
        if embedded:
            names = " and ".join(f.replace("_", " ") for f in embedded)
            raise ConfigurationError(
                "corrective retrieval in eval does not embed the retry's hits: use an"
                f" artifact fit without {names}"
            )
        reads = "term_coverage" in self.engines.reader_features
        #: the term reader both tries are scored with (None: the artifact reads none)
        self.terms = ChunkTerms(Bm25Encoder()) if reads else None
        self.corrector = Corrector(settings, max_k=max_k)
        #: One entry per query corrected so far: its retry, or None when none ran.
        self.records: list[CorrectiveInfo | None] = []

    def _score(
        self, queries: Sequence[str], hits: Sequence[Sequence[SearchHit]], mode: SearchMode
    ) -> list[Scored]:
        engine = self.engines.engine("threshold", mode)
        terms = self.terms
        assessed = engine.assess_many(
            [
                hit_scores(
                    found,
                    mode,
                    (),
                    None if terms is None else terms.read(q, found),
                )
                for q, found in zip(queries, hits, strict=True)
            ]
        )
        return [
            Scored(float(a.confidence), a.answerability.is_answerable, scored_by(a.scorer, mode))
            for a in assessed
        ]

    async def apply(
        self,
        index: VectorIndex,
        collection: str,
        requests: Sequence[SearchRequest],
        found: list[list[SearchHit]],
    ) -> list[list[SearchHit]]:
        """The winning hits of each query of a batch (its first try's ``found``)."""
        firsts = [
            _Path(s, hits)
            for s, hits in zip(
                self._score([r.query for r in requests], found, requests[0].mode),
                found,
                strict=True,
            )
        ]
        planned: list[tuple[int, Retry, SearchRequest]] = []
        for i, (request, first) in enumerate(zip(requests, firsts, strict=True)):
            retry = self.corrector.plan(
                request.query, request.mode, request.limit, first.hits, first.scored
            )
            if retry is not None:
                planned.append((i, retry, _retry_request(request, retry)))
        out = list(found)
        infos: list[CorrectiveInfo | None] = [None] * len(found)
        by_mode: dict[SearchMode, list[tuple[int, Retry, SearchRequest]]] = {}
        for item in planned:
            by_mode.setdefault(item[2].mode, []).append(item)
        for mode, items in by_mode.items():
            second = list(await index.search_batch(collection, [r for *_, r in items]))
            for (i, retry, _), hits, scored in zip(
                items, second, self._score([r.query for *_, r in items], second, mode), strict=True
            ):
                infos[i] = info = self.corrector.judge(firsts[i].scored, scored, retry)
                if info.won != "first":
                    out[i] = hits
        self.records.extend(infos)
        return out

    def summary(
        self,
        evaluated: npt.NDArray[np.bool_],
        labels: npt.ArrayLike,
        answered: npt.ArrayLike,
        kinds: Sequence[str],
    ) -> dict[str, object]:
        """Counts of the evaluated queries' retries, and the risk of the answers a retry won.

        ``labels``, ``answered`` and ``kinds`` are the calibrated row's, aligned with
        the evaluated queries. The risk of the won answers (near misses counted as
        wrong answers, and without them) is what the retry's second chance adds to
        the risk the conformal threshold certified.
        """
        records = [r for r, e in zip(self.records, evaluated, strict=True) if e]
        won = np.array([r is not None and r.won != "first" for r in records], dtype=bool)
        triggers = [r.trigger for r in records if r is not None]
        lab = np.asarray(labels, dtype=np.float64)
        won_answered = won & np.asarray(answered, dtype=bool)
        kind = np.asarray(kinds)
        by_kind = {str(k): int((won_answered & (kind == k)).sum()) for k in np.unique(kind)}
        return {
            "settings": self.corrector.settings.model_dump(mode="json"),
            "retried": len(triggers),
            "retried_low_confidence": triggers.count("low_confidence"),
            "retried_disagreement": triggers.count("disagreement"),
            "retry_won": int(won.sum()),
            "retry_won_answered": int(won_answered.sum()),
            "retry_won_answered_by_kind": by_kind,
            "risk_of_won_answers": _risk(lab, won_answered),
            "risk_of_won_answers_without_near_miss": _risk(
                lab, won_answered & (kind != "near_miss")
            ),
        }


def _risk(labels: npt.NDArray[np.float64], answered: npt.NDArray[np.bool_]) -> float | None:
    """Answered without the answer in context / answered; None when nothing was answered."""
    return float(1.0 - labels[answered].mean()) if answered.any() else None


def _retry_request(request: SearchRequest, retry: Retry) -> SearchRequest:
    """The first try's request as the retry searches it."""
    limit = max(request.limit, retry.limit)
    return SearchRequest(
        tenant_id=request.tenant_id,
        query=retry.text,
        dense_vector=request.dense_vector,
        mode=retry.mode,
        limit=limit,
        prefetch_limit=prefetch_limit(limit),
        filter=request.filter,
        embedder_id=request.embedder_id,
    )
