"""What to tell people about a result, as data: the A7 disclaimer and B5 recommendations.

Report workers render these; nothing here formats for a particular UI.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ragsift.confidence.levels import Status
from ragsift.confidence.signals import Signals

__all__ = [
    "DISCLAIMER_TEMPLATES",
    "Disclaimer",
    "Recommendation",
    "RecommendationCode",
    "disclaimer_for",
    "recommendations_for",
]

# A7: one template per status; {pct} is the confidence in percent. High needs none.
DISCLAIMER_TEMPLATES: dict[Status, str | None] = {
    "high_confidence": None,
    "medium_confidence": (
        "Based on moderately relevant retrieved context ({pct}% confidence); "
        "treat the findings as general guidance."
    ),
    "low_confidence": (
        "Based on loosely related retrieved context ({pct}% confidence); treat this as "
        "exploratory and validate the findings with additional data."
    ),
    "no_relevant_context": (
        "No retrieved context was relevant enough to use; this answer relies on current "
        "data only, without retrieved context to compare against."
    ),
}

# ADR 049: a refused query reads at best low_confidence; its disclaimer says why it is
# not used rather than calling context it may well hold "loosely related".
REFUSAL_DISCLAIMERS: dict[str, str] = {
    "too_few_documents": (
        "Retrieved context ({pct}% confidence) comes from fewer documents than this "
        "query requires, so it is not used to answer; review it before relying on it."
    ),
    "low_confidence": (
        "Retrieved context ({pct}% confidence) did not clear this query's answer bar, "
        "so it is not used to answer; review it before relying on it."
    ),
}

RecommendationCode = Literal["expand_query", "exact_keyword_search", "multi_hop"]
"""B5 follow-up actions."""

# B5 triggers: BM25 and dense "agree" at a correlation of 0.5 or more (ragsift default,
# halfway between seed B's disagreeing 0.32 and agreeing 0.87 examples); two agreeing
# hits are the least that counts as consensus.
_AGREEMENT_MIN_CORRELATION = 0.5
_MIN_CONSENSUS = 2


@dataclass(frozen=True, slots=True)
class Disclaimer:
    """The disclaimer a report must carry (A7); ``text`` is None when none is needed."""

    status: Status
    text: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One B5 follow-up: a machine code and a sentence for people."""

    code: RecommendationCode
    message: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return asdict(self)


def disclaimer_for(status: Status, confidence: float, *, refusal: str | None = None) -> Disclaimer:
    """The A7 disclaimer of a result with this status and confidence.

    ``refusal`` is a refused query's answerability reason: a refusal that still reads
    ``low_confidence`` (ADR 049) says it is not used, and why.
    """
    template = DISCLAIMER_TEMPLATES[status]
    if refusal is not None and status == "low_confidence":
        template = REFUSAL_DISCLAIMERS.get(refusal, template)
    text = None if template is None else template.format(pct=round(100 * confidence))
    return Disclaimer(status=status, text=text)


def recommendations_for(
    status: Status, signals: Signals, high_threshold: float, *, keyword_only: bool = False
) -> tuple[Recommendation, ...]:
    """B5 recommendations for a result that is not high-confidence (none otherwise).

    * ``expand_query``: the best hit is below the high bar or fewer than two hits agree;
    * ``exact_keyword_search``: BM25 and dense disagree, or no keyword search ran (never
      for a ``keyword_only`` search: that is what it was);
    * ``multi_hop``: the hits miss some query entities, or entities were not checked.
    """
    if status == "high_confidence":
        return ()
    out: list[Recommendation] = []
    if signals.top_score < high_threshold or signals.consensus_count < _MIN_CONSENSUS:
        out.append(
            Recommendation(
                "expand_query",
                "Expand the query with synonyms or related terms and search again.",
            )
        )
    corr = signals.bm25_dense_correlation
    if not keyword_only and (corr is None or corr < _AGREEMENT_MIN_CORRELATION):
        out.append(
            Recommendation(
                "exact_keyword_search",
                "Try an exact keyword (BM25) search: keyword and semantic retrieval "
                "disagree or only one of them ran.",
            )
        )
    coverage = signals.entity_coverage
    if coverage is None or coverage < 1.0:
        out.append(
            Recommendation(
                "multi_hop",
                "Try multi-hop retrieval to reach entities the retrieved chunks do not cover.",
            )
        )
    return tuple(out)
