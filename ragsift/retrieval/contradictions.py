"""Kept sources that disagree on what the query asks (D7: contradictions are surfaced).

The check reads the kept hits' sentences, no model and nothing fitted:

1. A *statement* is a sentence of one of the top ``max_sources`` kept hits that
   shares at least ``min_shared_terms`` content words with the query (all of
   them when the query has fewer): the sentences that talk about what is asked.
2. Two statements from *different documents* that share those same query words
   contradict when
   - **value**: both state a quantity of the same kind (a duration, a
     percentage, an amount of one currency, a time of day, a range of two times
     of day) about the same thing (the words
     around the two quantities share a content word: "*return* an item within
     30 days" vs "*returned* within 14 days"), and neither value is one the
     other statement gives too ("2 weeks" and "14 days" agree: durations are
     compared in days, within 3 %; a range is one value, so "9am–5:30pm" and
     "8am–5:30pm" differ though both say 5:30pm). Beside a value both give, the
     others are cases of a list, and two conflict only when each one's words are
     all said by the other statement (Saturday's hours are not Sunday's); or
   - **negation**: they say nearly the same thing (at least 60 % of their
     content words in common) and exactly one of them is negated ("refunds are
     issued for opened items" vs "refunds are not issued for opened items").
3. The first contradicting pair in rank order is reported: its chunks, the two
   sentences and, for a value, the values as written.

Sentences of one document never contradict each other (a policy listing two
periods for two cases is not a conflict), nor does a sentence that states both
values. Bare numbers (years, counts) are not compared: without a unit, two
numbers in two documents are rarely the same fact; nor are ages ("13-year-old")
or capitalised number words, which name things ("the Seven Years' War"). False alarms on SQuAD
in-scope queries are measured in docs/reports.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from types import MappingProxyType
from typing import Final

from ragsift.retrieval.quantities import CLOCK, Quantity, quantities, same_value
from ragsift.retrieval.reader import split_sentences
from ragsift.retrieval.terms import content_terms
from ragsift.schemas import Contradiction, RetrievalResult, RetrievedChunk
from ragsift.settings import ContradictionSettings

__all__ = [
    "CLOCK",
    "DEFAULT_MAX_SOURCES",
    "DEFAULT_MIN_SHARED_CONTEXT",
    "DEFAULT_MIN_SHARED_TERMS",
    "DISAGREE_ACTION",
    "ContradictionDetector",
    "Quantity",
    "quantities",
]

DEFAULT_MAX_SOURCES = 5  # the hits a reader of the answer sees first; deeper ones rarely matter
DEFAULT_MIN_SHARED_TERMS = 2  # one shared word ("policy") is not yet the same fact
NEGATION_MIN_OVERLAP = 0.6  # share of content words two sentences need to be "the same claim"
MIN_NEGATION_TERMS = 3  # shorter sentences say too little to contradict each other
MAX_STATEMENT_CHARS = 300  # a sentence quoted in the result is clipped to this
#: What a HIGH or MEDIUM result whose sources disagree asks of a human (B3).
DISAGREE_ACTION: Final = "review recommended: the kept sources disagree"
_AUTOMATABLE: Final = frozenset(("HIGH", "MEDIUM"))
#: Chunk texts whose sentences are kept read (~1-2 KB each: a few MB at most).
READ_CACHE_TEXTS: Final = 4096
#: Sentences whose quantities and negation are kept read: a few per cached text.
READ_CACHE_SENTENCES: Final = 4 * READ_CACHE_TEXTS
# Context words two quantities must share to measure the same thing. One keeps
# paraphrases ("return an item within 30 days" / "items may be returned within 14
# days"); two flags only near-verbatim versions. docs/reports.md has both rates.
DEFAULT_MIN_SHARED_CONTEXT = 1

_NEGATION = re.compile(r"\b(?:not|no|never|none|nor|cannot|without)\b|n't\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Statement:
    chunk: RetrievedChunk
    sentence: str
    terms: frozenset[str]
    asked: frozenset[str]  # the query's words among ``terms``: read once, not per pair

    # Quantities and negation are read only for the pairs that get that far: most
    # statements never meet a pair that shares the query's words, or never one close
    # enough for a negation. Each is cached per sentence (chunks recur across queries).
    @property
    def values(self) -> Mapping[str, Sequence[Quantity]]:
        return _values(self.sentence)

    @property
    def negated(self) -> bool:
        return _negated(self.sentence)


def _measured_by(quantity: Quantity, other: _Statement) -> bool:
    """Whether ``other`` says what a modifier ``quantity`` measures: a returns sentence
    never saying "warranty" states no other one than "a 2-year limited warranty"."""
    return not quantity.modifies or bool(quantity.modifies & other.terms)


def _value_conflict(
    a: _Statement, b: _Statement, min_context: int, wanted: set[str]
) -> tuple[str, str] | None:
    """Two different values of one kind stated about the same thing, as written.

    The query words that describe one value must all be said by the other
    statement: "a 2-year *warranty* on the Orbit thermostat" and "return the
    Orbit thermostat within 30 days" share the product, not what the query asks.
    """
    for kind, left in a.values.items():
        right = b.values.get(kind, [])
        # A value both give is agreed; only values the other side does not give can
        # conflict. Once one is agreed, the two are lists of cases, and two values
        # conflict only when each one's words are all said by the other statement:
        # "8am–5pm weekdays" against "9am–5pm weekdays" beside an agreed Saturday, not
        # "10am–2pm on Saturdays" against "10am–4pm on Sundays" beside agreed weekdays.
        # Before, one agreed value passed the whole kind over.
        alone = [x for x in left if not any(same_value(x.value, y.value, kind) for y in right)]
        other = [y for y in right if not any(same_value(x.value, y.value, kind) for x in left)]
        listed = len(alone) < len(left) or len(other) < len(right)
        for x in alone:
            for y in other:
                if (
                    len(x.context & y.context) >= min_context
                    and x.context & wanted <= b.terms
                    and y.context & wanted <= a.terms
                    and _measured_by(x, b)
                    and _measured_by(y, a)
                    and (not listed or (x.context <= b.terms and y.context <= a.terms))
                ):
                    return x.text, y.text
    return None


def _negation_conflict(a: _Statement, b: _Statement) -> bool:
    # The word checks first: they are set arithmetic, where reading negation scans text.
    if min(len(a.terms), len(b.terms)) < MIN_NEGATION_TERMS:
        return False
    shared = len(a.terms & b.terms)  # over the union's size, without building the union
    if shared / (len(a.terms) + len(b.terms) - shared) < NEGATION_MIN_OVERLAP:
        return False
    return a.negated != b.negated


class ContradictionDetector:
    """Finds kept sources that disagree on what a query asks (module docstring).

    Args:
        max_sources: kept hits read, top first.
        min_shared_terms: query content words a sentence must share to be read.
        min_shared_context: words around two quantities they must share to be compared.
    """

    def __init__(
        self,
        *,
        max_sources: int = DEFAULT_MAX_SOURCES,
        min_shared_terms: int = DEFAULT_MIN_SHARED_TERMS,
        min_shared_context: int = DEFAULT_MIN_SHARED_CONTEXT,
    ):
        if max_sources < 2:
            raise ValueError(
                f"max_sources must be >= 2 (a contradiction takes two), got {max_sources}"
            )
        if min_shared_terms < 1:
            raise ValueError(f"min_shared_terms must be >= 1, got {min_shared_terms}")
        if min_shared_context < 1:
            raise ValueError(f"min_shared_context must be >= 1, got {min_shared_context}")
        self.min_shared_context = min_shared_context
        self.max_sources = max_sources
        self.min_shared_terms = min_shared_terms

    @classmethod
    def from_settings(cls, settings: ContradictionSettings) -> ContradictionDetector:
        """The detector ``RAGSIFT_CONTRADICTIONS_*`` configures."""
        return cls(
            max_sources=settings.max_sources,
            min_shared_terms=settings.min_shared_terms,
            min_shared_context=settings.min_shared_context,
        )

    def find(self, query: str, hits: Sequence[RetrievedChunk]) -> Contradiction | None:
        """The first pair of ``hits`` (rank order) that contradict on ``query``, or None."""
        hits = hits[: self.max_sources]
        if len({h.doc_id for h in hits}) < 2:
            return None
        wanted = content_terms(query)
        need = min(self.min_shared_terms, len(wanted))
        if need == 0:
            return None
        statements = [s for h in hits for s in self._statements(h, wanted, need)]
        for a, b in combinations(statements, 2):
            if a.chunk.doc_id == b.chunk.doc_id or len(a.asked & b.asked) < need:
                continue
            values = _value_conflict(a, b, self.min_shared_context, wanted)
            if values is not None:
                return _contradiction("value", a, b, list(values))
            if _negation_conflict(a, b):
                return _contradiction("negation", a, b, [])
        return None

    def mark(self, result: RetrievalResult) -> RetrievalResult:
        """``result`` with its ``contradiction`` set when its kept hits disagree, and then
        flagged for review: a HIGH result was "safe to automate" with two sources saying
        two different things."""
        found = self.find(result.query, result.hits)
        if found is None:
            return result
        update: dict[str, object] = {"contradiction": found, "should_flag_for_review": True}
        if result.level in _AUTOMATABLE:
            update["review_action"] = DISAGREE_ACTION
        return result.model_copy(update=update)

    @staticmethod
    def _statements(hit: RetrievedChunk, wanted: set[str], need: int) -> list[_Statement]:
        statements = []
        for sentence, terms in _read(hit.text):
            asked = terms & wanted
            if len(asked) >= need:
                statements.append(_Statement(hit, sentence, terms, asked))
        return statements


@lru_cache(maxsize=READ_CACHE_TEXTS)
def _read(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The sentences of a chunk's text with their content words.

    A chunk comes back in query after query; reading it afresh each time (splitting,
    folding every word) was ~40% of the embedded pipeline's time per batch.
    """
    return tuple((s, frozenset(content_terms(s))) for s in split_sentences(text))


@lru_cache(maxsize=READ_CACHE_SENTENCES)
def _values(sentence: str) -> Mapping[str, Sequence[Quantity]]:
    """The sentence's quantities by kind, read-only: shared between queries."""
    return MappingProxyType({k: tuple(v) for k, v in quantities(sentence).items()})


@lru_cache(maxsize=READ_CACHE_SENTENCES)
def _negated(sentence: str) -> bool:
    return _NEGATION.search(sentence) is not None


def _contradiction(kind: str, a: _Statement, b: _Statement, values: list[str]) -> Contradiction:
    return Contradiction.model_validate(
        {
            "kind": kind,
            "chunk_ids": [a.chunk.chunk_id, b.chunk.chunk_id],
            "doc_ids": [a.chunk.doc_id, b.chunk.doc_id],
            "statements": [_clip(a.sentence), _clip(b.sentence)],
            "values": values,
        }
    )


def _clip(sentence: str) -> str:
    if len(sentence) <= MAX_STATEMENT_CHARS:
        return sentence
    return sentence[: MAX_STATEMENT_CHARS - 1].rstrip() + "…"
