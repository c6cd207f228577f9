"""Response validation (D5, its pure part): refusals, unsupported facts, answer-source similarity.

An answer is *invalid* when it states numbers, dates or names that no source
contains, or (when embeddings are given) when it is less similar to every
source than ``min_similarity``. An invalid answer is replaced by the D4
refusal sentence. A refusal is always valid. Embedding the texts is the
caller's job (an I/O edge); this module only compares the vectors it is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragsift.confidence.answerability import REFUSAL_SENTENCE
from ragsift.confidence.errors import ConfidenceError

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "REFUSAL_PHRASES",
    "ResponseValidation",
    "UnsupportedFact",
    "answer_source_similarity",
    "is_refusal",
    "unsupported_facts",
    "validate_response",
]

# ragsift default: answers whose best cosine to any source is below 0.5 share too little
# with them (seed D leaves the value configurable without a figure).
DEFAULT_MIN_SIMILARITY = 0.5

REFUSAL_PHRASES: tuple[str, ...] = (
    "i cannot answer this based on the provided documents",
    "i cannot answer this question based on the provided documents",
    "i can't answer this based on the provided documents",
    "i can't answer this question based on the provided documents",
    "i am unable to answer this based on the provided documents",
    "the provided documents do not contain",
    "the provided documents don't contain",
    "not covered in the provided documents",
)
"""Lower-case phrases that mark an answer as a refusal (D4, D5)."""

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE_RE = re.compile(
    rf"\b(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?)\b",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_NAME_RE = re.compile(r"\b[A-Z][\w'-]*[a-z][\w'-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\w'-]+)*")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)$")
# Capitalized words that are not names when they open a span.
_NOT_NAMES = frozenset(
    (
        *("the", "a", "an", "in", "on", "at", "of", "for", "to", "and", "but", "or", "if"),
        *("this", "that", "these", "those", "it", "its", "i", "we", "you", "he", "she"),
        *("they", "there", "here", "what", "when", "where", "which", "who", "why", "how"),
        *("based", "according", "however", "yes", "no"),
    )
)

FactKind = Literal["number", "date", "name"]


@dataclass(frozen=True, slots=True)
class UnsupportedFact:
    """A number, date or name in the answer that no source contains."""

    kind: FactKind
    text: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ResponseValidation:
    """The verdict on one answer.

    Attributes:
        is_valid: the answer may be shown as is.
        is_refusal: the answer is a refusal.
        similarity: best cosine between answer and source embeddings, if given.
        unsupported: facts absent from every source.
        reasons: why it is invalid (empty when valid).
        final_answer: the answer, or the refusal sentence if invalid.
    """

    is_valid: bool
    is_refusal: bool
    similarity: float | None
    unsupported: tuple[UnsupportedFact, ...]
    reasons: tuple[str, ...]
    final_answer: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (B8)."""
        return asdict(self)


def _normalize(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.casefold().split())


def is_refusal(text: str) -> bool:
    """Whether ``text`` refuses to answer from the documents (any of REFUSAL_PHRASES)."""
    norm = _normalize(text)
    return any(phrase in norm for phrase in REFUSAL_PHRASES)


def _number_key(token: str) -> str:
    return token.replace(",", "")


def unsupported_facts(answer: str, sources: Sequence[str]) -> tuple[UnsupportedFact, ...]:
    """Numbers, dates and names in ``answer`` that appear in none of ``sources``.

    Matching is case-insensitive; numbers ignore thousands separators ("1,000" = "1000").
    """
    corpus = _normalize(" \n ".join(sources))
    corpus_numbers = {_number_key(m) for m in _NUMBER_RE.findall(corpus)}
    found: list[UnsupportedFact] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: FactKind, text: str) -> None:
        if (kind, text) not in seen:
            seen.add((kind, text))
            found.append(UnsupportedFact(kind, text))

    covered: list[tuple[int, int]] = []
    for m in _DATE_RE.finditer(answer):
        covered.append(m.span())
        if _normalize(m.group()) not in corpus:
            add("date", m.group())
    for m in _NUMBER_RE.finditer(answer):
        if any(a <= m.start() < b for a, b in covered):
            continue
        if _number_key(m.group()) not in corpus_numbers:
            add("number", m.group())
    for m in _NAME_RE.finditer(answer):
        if any(a <= m.start() < b for a, b in covered):
            continue  # a month name inside a date already checked
        words = m.group().split()
        at_start = _SENTENCE_START_RE.search(answer[: m.start()]) is not None
        while words and words[0].casefold() in _NOT_NAMES:
            words = words[1:]
            at_start = False
        if not words or (at_start and len(words) == 1):
            continue  # a lone capitalized word opening a sentence is not evidence of a name
        name = " ".join(words)
        if _normalize(name) not in corpus:
            add("name", name)
    return tuple(found)


def answer_source_similarity(
    answer_embedding: npt.ArrayLike, source_embeddings: npt.ArrayLike
) -> float:
    """Best cosine similarity between the answer vector and any source vector.

    Raises:
        ConfidenceError: shapes do not match or there are no sources.
    """
    a = np.asarray(answer_embedding, dtype=np.float64)
    s = np.atleast_2d(np.asarray(source_embeddings, dtype=np.float64))
    if a.ndim != 1 or s.ndim != 2 or s.shape[1] != a.shape[0] or s.shape[0] == 0:
        raise ConfidenceError(
            f"need an answer vector (d,) and source vectors (n, d), got {a.shape} and {s.shape}"
        )
    norms = np.linalg.norm(s, axis=1) * np.linalg.norm(a)
    cos = np.where(norms > 0, s @ a / np.where(norms > 0, norms, 1.0), 0.0)
    return float(cos.max())


def validate_response(
    answer: str,
    sources: Sequence[str],
    *,
    answer_embedding: npt.ArrayLike | None = None,
    source_embeddings: npt.ArrayLike | None = None,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
    check_facts: bool = True,
) -> ResponseValidation:
    """Validate an LLM answer against its sources (module docstring).

    Args:
        answer: the generated answer.
        sources: the texts of the kept hits it was given.
        answer_embedding, source_embeddings: optional vectors for the similarity check.
        min_similarity: least best-cosine an answer needs.
        check_facts: whether to check numbers, dates and names.
    """
    if not -1.0 <= min_similarity <= 1.0:
        raise ConfidenceError(f"min_similarity must be in [-1, 1], got {min_similarity}")
    if is_refusal(answer):
        return ResponseValidation(True, True, None, (), (), answer)
    reasons: list[str] = []
    similarity = None
    if answer_embedding is not None and source_embeddings is not None:
        similarity = answer_source_similarity(answer_embedding, source_embeddings)
        if similarity < min_similarity:
            reasons.append(f"answer-source similarity {similarity:.3f} < {min_similarity}")
    facts = unsupported_facts(answer, sources) if check_facts else ()
    if facts:
        listed = ", ".join(f"{f.kind} {f.text!r}" for f in facts)
        reasons.append(f"unsupported facts: {listed}")
    if not sources:
        reasons.append("no sources to support the answer")
    valid = not reasons
    return ResponseValidation(
        is_valid=valid,
        is_refusal=False,
        similarity=similarity,
        unsupported=facts,
        reasons=tuple(reasons),
        final_answer=answer if valid else REFUSAL_SENTENCE,
    )
