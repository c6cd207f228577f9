"""Kept sources that disagree on what the query asks (D7: contradictions are surfaced).

The check reads the kept hits' sentences, no model and nothing fitted:

1. A *statement* is a sentence of one of the top ``max_sources`` kept hits that
   shares at least ``min_shared_terms`` content words with the query (all of
   them when the query has fewer): the sentences that talk about what is asked.
2. Two statements from *different documents* that share those same query words
   contradict when
   - **value**: both state a quantity of the same kind (a duration, a
     percentage, an amount of one currency, a time of day) about the same thing (the words
     around the two quantities share a content word: "*return* an item within
     30 days" vs "*returned* within 14 days"), and no value of one matches a
     value of the other ("2 weeks" and "14 days" agree: durations are compared
     in days, within 3 %); or
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
from typing import Final, NamedTuple

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
VALUE_TOLERANCE = 0.03  # 12 months vs 1 year (360 vs 365 days) is the same period
NEGATION_MIN_OVERLAP = 0.6  # share of content words two sentences need to be "the same claim"
MIN_NEGATION_TERMS = 3  # shorter sentences say too little to contradict each other
MAX_STATEMENT_CHARS = 300  # a sentence quoted in the result is clipped to this
# Words either side of a quantity that say what it measures: "return an item within
# [30 days] of delivery". Four reach past the usual preposition and article.
CONTEXT_WORDS = 4
MODIFIED_WORDS = 2  # words after "2-year" that name what it measures: "limited warranty"
MIN_CONTEXT_CHARS = 3  # "s" of "city's" is no evidence of anything
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
# Words next to almost any quantity ("within 30 days", "every 2 weeks"): sharing one
# says nothing about measuring the same thing.
_CONTEXT_STOP = frozenset(
    ("within", "after", "before", "during", "per", "each", "every", "up", "least", "over",
     "under", "until", "around", "about", "only", "just", "first", "last", "next", "later",
     "ago", "another", "one", "two", "year", "month", "week", "day", "hour", "minute")
)  # fmt: skip

_DAY = 1.0
_TIME_UNITS = {
    "second": _DAY / 86_400,
    "minute": _DAY / 1_440,
    "hour": _DAY / 24,
    "day": _DAY,
    "week": 7 * _DAY,
    "month": 30 * _DAY,
    "year": 365 * _DAY,
}
_CURRENCIES = {
    "$": "usd", "dollar": "usd", "usd": "usd",
    "€": "eur", "euro": "eur", "eur": "eur",
    "£": "gbp", "gbp": "gbp",
}  # fmt: skip
_WORD_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fourteen": 14,
    "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 1e3, "million": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9}
# Number words in lower case only: capitalised, they name things ("Six-Day War").
_NUMBER = r"\d[\d,]*(?:\.\d+)?|(?-i:" + "|".join(_WORD_NUMBERS) + ")"
# "30 days", "14 business days", "thirty-day", "20%", "5 percent", "$50", "$4 million",
# "50 euros"; not "13-year-old" (an age).
_QUANTITY = re.compile(
    r"(?P<currency>[$€£])\s?(?P<amount>\d[\d,]*(?:\.\d+)?)"
    r"(?:\s?(?P<scale>thousand|million|billion|bn|m)\b)?"
    rf"|(?<![\w.,])(?P<number>{_NUMBER})[\s-]?"
    r"(?:(?P<qualifier>business|working|calendar)[\s-])?"
    r"(?P<unit>%|(?:second|minute|hour|day|week|month|year|percent|per\s?cent|dollar|euro|usd"
    r"|eur|gbp)s?\b(?![\s-]old\b))",
    re.IGNORECASE,
)
# A time of day: "9am", "9 a.m.", "5:30 pm" (not "noon": no digit); or a 24-hour
# "09:00"/"17:30" with two digits for the hour ("3:16" is a verse or a ratio as often).
_CLOCK = re.compile(
    r"(?<![\w:.,])(?P<hour>1[0-2]|0?[1-9])(?::(?P<minute>[0-5]\d))?"
    r"\s?(?P<half>[ap])(?:\.\s?m\.|\s?m\b)"
    r"|(?<![\w:.,])(?P<hour24>[01]\d|2[0-3]):(?P<minute24>[0-5]\d)(?![\w:])",
    re.IGNORECASE,
)
#: The kind of a time of day: compared to the minute (9:00 and 9:15 are two times).
CLOCK = "time of day"
# What every _QUANTITY and _CLOCK match starts with, but a lower-case number word
# (checked as a substring: those are matched case-sensitively): a currency sign or a digit.
_QUANTITY_START = re.compile(r"[$€£\d]")
_WORD = re.compile(r"[^\W_]+")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nor|cannot|without)\b|n't\b", re.IGNORECASE)


class Quantity(NamedTuple):
    """One stated quantity: its value in its kind's base unit (days, percent, currency
    units), the text that stated it, the content words around it, and for a modifier
    ("a 2-year limited warranty") the :data:`MODIFIED_WORDS` that name what it measures."""

    value: float
    text: str
    context: frozenset[str]
    modifies: frozenset[str] = frozenset()


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


def quantities(sentence: str) -> dict[str, list[Quantity]]:
    """The sentence's quantities by kind: ``duration`` (``duration:business``...),
    ``percent``, ``money:usd`` (``:eur``, ``:gbp``), and :data:`CLOCK` (in minutes
    after midnight)."""
    out: dict[str, list[Quantity]] = {}
    if _QUANTITY_START.search(sentence) is None and not any(
        word in sentence for word in _WORD_NUMBERS
    ):
        return out  # no match can start: scanning for the two is ~half of a full match
    for m in _CLOCK.finditer(sentence):
        if m["half"]:
            hour = int(m["hour"]) % 12 + (12 if m["half"].casefold() == "p" else 0)
            minute = int(m["minute"] or 0)
        else:
            hour, minute = int(m["hour24"]), int(m["minute24"])
        context = _context(sentence[: m.start()], sentence[m.end() :])
        out.setdefault(CLOCK, []).append(
            Quantity(60.0 * hour + minute, m.group(0).strip(), context)
        )
    for m in _QUANTITY.finditer(sentence):
        if m["currency"]:
            kind, value = f"money:{_CURRENCIES[m['currency']]}", _parse(m["amount"])
            if m["scale"]:
                value *= _SCALES[m["scale"].casefold()]
        else:
            value = _parse(m["number"])
            unit = m["unit"].casefold().rstrip("s") if m["unit"] != "%" else "%"
            if unit in _TIME_UNITS:
                qualifier = m["qualifier"]
                kind = f"duration:{qualifier.casefold()}" if qualifier else "duration"
                value *= _TIME_UNITS[unit]
            elif unit in _CURRENCIES:
                kind = f"money:{_CURRENCIES[unit]}"
            else:
                kind = "percent"
        after = sentence[m.end() :]
        context = _context(sentence[: m.start()], after)
        written = m.group(0).strip()
        modifies = _modified(after) if "-" in written else frozenset()
        out.setdefault(kind, []).append(Quantity(value, written, context, modifies))
    return out


def _modified(after: str) -> frozenset[str]:
    """The first content words after a quantity written as a modifier: what it measures."""
    found: list[str] = []
    for word in _WORD.findall(after)[: 2 * MODIFIED_WORDS]:
        found.extend(content_terms(word))
        if len(found) >= MODIFIED_WORDS:
            break
    return frozenset(found[:MODIFIED_WORDS])


def _context(before: str, after: str) -> frozenset[str]:
    words = _WORD.findall(before)[-CONTEXT_WORDS:] + _WORD.findall(after)[:CONTEXT_WORDS]
    terms = content_terms(" ".join(words))
    return frozenset(
        t
        for t in terms
        if len(t) >= MIN_CONTEXT_CHARS and t not in _CONTEXT_STOP and not t.isdigit()
    )


def _parse(number: str) -> float:
    word = _WORD_NUMBERS.get(number.casefold())
    return float(word) if word is not None else float(number.replace(",", ""))


def _same(a: float, b: float, kind: str) -> bool:
    if kind == CLOCK:
        return a == b
    return abs(a - b) <= VALUE_TOLERANCE * max(abs(a), abs(b))


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
        if any(_same(x.value, y.value, kind) for x in left for y in right):
            continue  # they agree on one value: the other is another case, not a conflict
        for x in left:
            for y in right:
                if (
                    len(x.context & y.context) >= min_context
                    and x.context & wanted <= b.terms
                    and y.context & wanted <= a.terms
                    and _measured_by(x, b)
                    and _measured_by(y, a)
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
