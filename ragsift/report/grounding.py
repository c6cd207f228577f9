"""Response validation inside the stream (D5, D9): is a generated answer grounded in its sources?

Reuses the confidence library's checks (refusal phrases, numbers / dates /
names absent from the sources) and adds two the report stage can make because
it knows how the sources were numbered: every ``[n]`` must name a source that
was given, and most of the answer's content words must occur in the sources
(a lexical stand-in for answer-to-source similarity that needs no embedder).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsift.confidence import REFUSAL_SENTENCE, is_refusal, validate_response
from ragsift.report.extractive import content_terms

__all__ = [
    "DEFAULT_MIN_TERM_COVERAGE",
    "answer_issues",
    "cited_numbers",
    "is_exact_refusal",
]

# At least half of an answer's content words must occur in its sources. A
# grounded answer quotes or lightly rephrases them; one written from general
# knowledge does not (0 disables the check).
DEFAULT_MIN_TERM_COVERAGE = 0.5

_CITATION = re.compile(r"\[(\d+)\]")


def cited_numbers(answer: str) -> set[int]:
    """The source numbers ``answer`` cites as ``[n]``."""
    return {int(n) for n in _CITATION.findall(answer)}


def is_exact_refusal(answer: str) -> bool:
    """Whether the whole answer is the D4 refusal sentence (quotes and spacing aside)."""
    norm = " ".join(answer.strip().strip("\"'“”").split()).casefold()
    return norm == REFUSAL_SENTENCE.casefold()


def answer_issues(
    answer: str,
    sources: Sequence[str],
    *,
    min_term_coverage: float = DEFAULT_MIN_TERM_COVERAGE,
) -> list[str]:
    """Why ``answer`` must not be shown (empty when it may be).

    Args:
        answer: a generated answer that is not the exact refusal.
        sources: the texts of the numbered sources, ``[1]`` first.
        min_term_coverage: least share of the answer's content words found in the sources.
    """
    if not 0.0 <= min_term_coverage <= 1.0:
        raise ValueError(f"min_term_coverage must be in [0, 1], got {min_term_coverage}")
    if is_refusal(answer):
        return ["refusal-looking answer: it declines to answer but is not the exact refusal"]
    issues = [
        f"cites source [{n}], but {len(sources)} sources were given"
        for n in sorted(cited_numbers(answer))
        if not 1 <= n <= len(sources)
    ]
    # Markers become sentence breaks: "[1]" is not a number, and a name must not
    # run across two quoted sentences.
    plain = _CITATION.sub(" . ", answer)
    issues.extend(validate_response(plain, sources).reasons)
    terms = content_terms(plain)
    if min_term_coverage > 0 and terms:
        known: set[str] = set().union(*(content_terms(s) for s in sources))
        coverage = len(terms & known) / len(terms)
        if coverage < min_term_coverage:
            issues.append(
                f"ungrounded: {coverage:.0%} of the answer's content words occur in the "
                f"sources, below {min_term_coverage:.0%}"
            )
    return issues
