"""The ``query_language`` advice: a result whose query does not look English says so.

ragsift reads English (:mod:`.language`): a French question about a warranty the
index holds can score low and be refused, and its other advice ("expand the query
with synonyms") hides why. The advice is put first and changes nothing else: the
confidence, the answer or refusal and the kept hits stay as scored.
"""

from __future__ import annotations

from typing import Final

from ragsift.observability.metrics import Metrics
from ragsift.retrieval.language import LANGUAGE_NAMES, OTHER_SCRIPT, guess_language
from ragsift.schemas import Advice, RetrievalResult

__all__ = ["QUERY_LANGUAGE_ADVICE_CODE", "language_advice", "with_language_advice"]

QUERY_LANGUAGE_ADVICE_CODE: Final = "query_language"


def language_advice(code: str) -> Advice:
    """The advice for a query that looks written in language ``code``."""
    name = LANGUAGE_NAMES[code]
    looks = (
        "is written mostly in a non-Latin script"
        if code == OTHER_SCRIPT
        else f"looks {name} ({code})"
    )
    return Advice(
        code=QUERY_LANGUAGE_ADVICE_CODE,
        message=(
            f"This query {looks}, not English: ragsift's embedder, keyword index and"
            " confidence calibration read English, so this confidence (and an answer or"
            " refusal made on it) says little about whether the documents hold the"
            " answer. Ask in English to search English documents (docs/confidence.md,"
            " section 13)."
        ),
    )


def with_language_advice(result: RetrievalResult, metrics: Metrics) -> RetrievalResult:
    """``result`` with the ``query_language`` advice first when its query looks
    non-English (counted in ``ragsift_query_language_advice_total``); as it was
    otherwise, and for a result that is not a scored one (outcome other than ok)."""
    if result.outcome != "ok":
        return result
    code = guess_language(result.query)
    if code is None:
        return result
    metrics.query_language_advice.labels(result.tenant_id, code).inc()
    if any(a.code == QUERY_LANGUAGE_ADVICE_CODE for a in result.recommendations):
        return result
    advice = [language_advice(code), *result.recommendations]
    return result.model_copy(update={"recommendations": advice})
