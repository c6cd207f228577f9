"""Corrective retrieval (B10): retry a weak or split retrieval once, keep the better path.

The rules, shared by the pipeline (both runtimes) and ``ragsift eval``:

* **Trigger.** A scored result is retried when its confidence is low (below
  ``trigger_confidence``, or, unset, when it is refused: ``answerable`` false)
  or, for hybrid queries, when BM25 and dense *disagree*: over the hits the
  search returned, the best dense hit is not among the ``agree_k`` best BM25
  hits **and** the best BM25 hit is not among the ``agree_k`` best dense hits.
* **Strategy** (one per deployment or tenant): ``expand`` adds to the BM25 query
  the ``expand_terms`` content words of the first try's ``expand_from`` top hits
  that weigh most, a word's weight being the number of top hits holding it times
  its IDF over the first try's hits, ``log(1 + n / df)`` (the only document
  frequencies at hand without another index round trip); the dense vector is
  the query's own. ``wider`` searches ``max_k`` hits instead of k. ``keyword``
  searches BM25 only.
* **Bound.** At most one retry per query; a retry never triggers another.
* **Winner.** The retry is kept only when its *own* confidence clears its own
  answer threshold (``answerable``) and ``win_confidence`` when set, and is
  higher than the first try's, and both
  were scored by the same model. Under the calibrated scorer a keyword retry never
  wins (``not_comparable``): it is scored by the artifact's keyword model (ADR 029;
  by the weighted rule with an artifact fit before it), and keeping the higher of
  two models' probabilities is a selection neither certificate covers and
  ``ragsift eval`` does not replay (it scores the winner's hits in the run's
  mode). Otherwise the first try's result, hits and
  confidence stand unchanged, so a retry can only turn a refusal into an answer
  (or a weaker answer into a stronger one); docs/corrective.md measures what
  that does to the risk the conformal threshold certified.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ragsift.retrieval.index import SearchHit
from ragsift.retrieval.terms import content_terms
from ragsift.schemas import (
    CorrectiveInfo,
    CorrectiveStrategy,
    CorrectiveTrigger,
    RetrievalResult,
    SearchMode,
)
from ragsift.settings import CorrectiveSettings

__all__ = [
    "KEYWORD_MODEL",
    "MAX_TERM_CHARS",
    "Corrector",
    "Retry",
    "Scored",
    "channels_disagree",
    "expansion_terms",
    "scored_by",
]


#: Longest word an expansion adds: longer "words" are ids, hashes or digit runs
#: (English words past 30 letters are chemistry), and each one lengthens every retry.
MAX_TERM_CHARS = 32


#: What :func:`scored_by` calls the calibration's keyword model (ADR 029).
KEYWORD_MODEL = "calibrated:keyword"


def scored_by(scorer: str, mode: SearchMode) -> str:
    """The model that scored a path: its scorer, told apart for a keyword-only search
    scored by the calibration's keyword model (ADR 029), whose probabilities the winner
    rule does not compare with the hybrid model's (module docstring)."""
    return KEYWORD_MODEL if scorer == "calibrated" and mode == "keyword" else scorer


@dataclass(frozen=True, slots=True)
class Scored:
    """What the winner rule reads of one path: its confidence, answerability and the
    model that scored it (:func:`scored_by`)."""

    confidence: float
    answerable: bool
    scorer: str

    @classmethod
    def of(cls, result: RetrievalResult) -> Scored:
        """The path a scored result took."""
        scorer = scored_by(result.breakdown.scorer, result.mode)
        return cls(result.confidence, result.answerable, scorer)


@dataclass(frozen=True, slots=True)
class Retry:
    """The one retry of a query: how it searches.

    Attributes:
        trigger: why it runs.
        strategy: which strategy it follows.
        text: the BM25 query text (the query's own, or expanded).
        mode: the search mode (the query's own, or ``keyword``).
        limit: hits to search (the query's k, or ``max_k``).
        terms: the terms an ``expand`` retry added.
    """

    trigger: CorrectiveTrigger
    strategy: CorrectiveStrategy
    text: str
    mode: SearchMode
    limit: int
    terms: tuple[str, ...] = ()


def _best_first(hits: Sequence[SearchHit], dense: bool) -> list[str]:
    """Chunk ids of the hits one channel scored, best first (stable on ties)."""
    scored = [
        (h.dense_score if dense else h.sparse_score, i, h.chunk_id) for i, h in enumerate(hits)
    ]
    present = [(s, i, c) for s, i, c in scored if s is not None]
    return [c for _, _, c in sorted(present, key=lambda t: (-t[0], t[1]))]


def channels_disagree(hits: Sequence[SearchHit], agree_k: int) -> bool:
    """Whether BM25 and dense disagree on ``hits`` (module docstring).

    Ranks are by each channel's score over the returned hits, so a merged
    multi-collection list (D3) is judged as one. A channel that scored no hit
    has nothing to disagree with: False.
    """
    if agree_k < 1:
        raise ValueError(f"agree_k must be >= 1, got {agree_k}")
    dense, sparse = _best_first(hits, dense=True), _best_first(hits, dense=False)
    if not dense or not sparse:
        return False
    return dense[0] not in sparse[:agree_k] and sparse[0] not in dense[:agree_k]


def expansion_terms(
    query: str, hits: Sequence[SearchHit], *, n_terms: int, from_top: int
) -> list[str]:
    """Up to ``n_terms`` content words of the top ``from_top`` hits, not in ``query``,
    by (top hits holding the word) x IDF over ``hits``; ties alphabetical."""
    if n_terms < 1 or from_top < 1:
        raise ValueError(f"n_terms and from_top must be >= 1, got {n_terms} and {from_top}")
    if not hits:
        return []
    in_query = content_terms(query)
    per_hit = [{t for t in content_terms(h.text) if len(t) <= MAX_TERM_CHARS} for h in hits]
    df: dict[str, int] = {}
    for terms in per_hit:
        for term in terms:
            df[term] = df.get(term, 0) + 1
    weight: dict[str, float] = {}
    n = len(hits)
    for terms in per_hit[:from_top]:
        for term in terms - in_query:
            weight[term] = weight.get(term, 0.0) + math.log1p(n / df[term])
    ranked = sorted(weight.items(), key=lambda item: (-item[1], item[0]))
    return [term for term, _ in ranked[:n_terms]]


class Corrector:
    """Plans and resolves the one corrective retry of a query (module docstring).

    Args:
        settings: the deployment's or the tenant's corrective settings.
        max_k: the deployment's largest k (``RAGSIFT_LIMITS_MAX_K``); a ``wider``
            retry never searches more.
    """

    def __init__(self, settings: CorrectiveSettings, *, max_k: int) -> None:
        if max_k < 1:
            raise ValueError(f"max_k must be >= 1, got {max_k}")
        self.settings = settings
        self.max_k = min(settings.max_k, max_k)

    def trigger(
        self, first: Scored, hits: Sequence[SearchHit], mode: SearchMode
    ) -> CorrectiveTrigger | None:
        """Why the first try should be retried, or None."""
        bar = self.settings.trigger_confidence
        if (not first.answerable) if bar is None else first.confidence < bar:
            return "low_confidence"
        if (
            self.settings.on_disagreement
            and mode == "hybrid"
            and channels_disagree(hits, self.settings.agree_k)
        ):
            return "disagreement"
        return None

    def plan(
        self, query: str, mode: SearchMode, limit: int, hits: Sequence[SearchHit], first: Scored
    ) -> Retry | None:
        """The retry of a query whose first try scored ``first`` on ``hits``, or None
        when nothing triggers it or the strategy would search exactly as before."""
        trigger = self.trigger(first, hits, mode)
        if trigger is None:
            return None
        strategy = self.settings.strategy
        if strategy == "keyword":
            if mode == "keyword" or not query.strip():
                return None
            return Retry(trigger, strategy, query, "keyword", limit)
        if strategy == "wider":
            if limit >= self.max_k:
                return None
            return Retry(trigger, strategy, query, mode, self.max_k)
        if mode == "dense":  # the expanded text only reaches the BM25 channel
            return None
        s = self.settings
        terms = expansion_terms(query, hits, n_terms=s.expand_terms, from_top=s.expand_from)
        if not terms:
            return None
        return Retry(trigger, strategy, f"{query} {' '.join(terms)}", mode, limit, tuple(terms))

    def choose(self, first: Scored, retry: Scored | None) -> tuple[bool, str]:
        """(whether the retry wins, why), by the winner rule of the module docstring."""
        if retry is None:
            return False, "retry_failed"
        if retry.scorer != first.scorer:
            return False, "not_comparable"
        if not retry.answerable:
            return False, "retry_not_answerable"
        if retry.confidence < self.settings.win_confidence:
            return False, "retry_below_win_confidence"
        if retry.confidence <= first.confidence:
            return False, "retry_not_higher"
        return True, "retry_answerable_and_higher"

    def judge(self, first: Scored, second: Scored | None, retry: Retry) -> CorrectiveInfo:
        """The record of a retry whose paths scored ``first`` and ``second`` (None: failed)."""
        won, reason = self.choose(first, second)
        return CorrectiveInfo(
            trigger=retry.trigger,
            tried=[retry.strategy],
            won=retry.strategy if won else "first",
            first_confidence=first.confidence,
            retry_confidence=None if second is None else second.confidence,
            reason=reason,
            expansion_terms=list(retry.terms),
        )

    def resolve(
        self, first: RetrievalResult, retried: RetrievalResult | Exception, retry: Retry
    ) -> RetrievalResult:
        """The result to publish: the winner, with the retry recorded in ``corrective``."""
        second = retried if isinstance(retried, RetrievalResult) else None
        scored = Scored.of(second) if second is not None and second.outcome == "ok" else None
        info = self.judge(Scored.of(first), scored, retry)
        kept = second if info.won != "first" and second is not None else first
        return kept.model_copy(update={"corrective": info})
