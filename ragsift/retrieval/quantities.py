"""The quantities a sentence states, read for the D7 contradiction check.

A quantity is a number with a unit that says what kind of thing it measures: a
duration (compared in days), a percentage, an amount of one currency, a time
of day (compared to the minute), or a range of two times of day ("9am–5:30pm",
"from 9 a.m. to 5 p.m.", "between 12 and 2 pm"), one value: two ranges that share
an end are still two ranges. Each comes with the content words around it,
which say *what* it measures, and, written as a modifier ("a 2-year limited
warranty"), the words it modifies. Bare numbers (years, counts), ages
("13-year-old") and capitalised number words ("the Seven Years' War") are not read.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ragsift.retrieval.terms import content_terms

__all__ = ["CLOCK", "CLOCK_RANGE", "Quantity", "quantities", "same_value"]

VALUE_TOLERANCE = 0.03  # 12 months vs 1 year (360 vs 365 days) is the same period
# Words either side of a quantity that say what it measures: "return an item within
# [30 days] of delivery". Four reach past the usual preposition and article.
CONTEXT_WORDS = 4
# Where those four hold no content word ("30 days, or within [60 days] if you are a
# member"), the words this far either side: a value said of nothing is never compared.
WIDE_CONTEXT_WORDS = 8
MODIFIED_WORDS = 2  # words after "2-year" that name what it measures: "limited warranty"
MIN_CONTEXT_CHARS = 3  # "s" of "city's" is no evidence of anything
# The words either side of a quantity are read within this many characters of it (four
# words fit many times over): reading all the text before and after each quantity made
# a long sentence of many quantities quadratic (~6 s for 5,000 times of day in 20 KB).
CONTEXT_CHARS = 200
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
#: The kind of two times of day joined as a range: one value, start and end to the
#: minute (``start * MINUTES_PER_DAY + end``). Its two ends are times of day as well.
CLOCK_RANGE = "range of times of day"
MINUTES_PER_DAY = 24 * 60
_HALF_DAY = 12 * 60
# Two times of day joined by a dash, "to", "until", "till", "through" or, after
# "between", "and". Either side is what _CLOCK reads, or a start without am/pm checked
# in _clock_range ("9–5pm", "9:00–17:30"). Every piece, the spaces too, is bounded:
# an attempt reads a few dozen characters at most, so a scan stays linear.
_TIME = r"\d{1,2}(?::\d\d)?(?:\s?[ap](?:\.\s?m\.|\s?m\b))?"
_RANGE = re.compile(
    rf"(?<![\w:.,])(?:(?P<between>between)\s{{1,3}})?(?P<start>{_TIME})"
    r"(?:\s{0,3}[-\u2010-\u2014]\s{0,3}|\s{1,3}(?P<join>to|until|till|through|thru|and)\s{1,3})"
    rf"(?P<end>{_TIME})(?![\w:])",
    re.IGNORECASE,
)
# A start without am/pm: an hour of the end's half-day before a 12-hour end, or a
# one-digit hour with its minutes before a 24-hour end.
_BARE_12 = re.compile(r"(?P<hour>1[0-2]|0?[1-9])(?::(?P<minute>[0-5]\d))?")
_BARE_24 = re.compile(r"(?P<hour>[0-9]):(?P<minute>[0-5]\d)")
# What every _QUANTITY, _CLOCK and _RANGE match holds, but a lower-case number word
# (checked as a substring: those are matched case-sensitively): a currency sign or a digit.
_QUANTITY_START = re.compile(r"[$€£\d]")
_WORD = re.compile(r"[^\W_]+")


class Quantity(NamedTuple):
    """One stated quantity: its value in its kind's base unit (days, percent, currency
    units, minutes after midnight; a :data:`CLOCK_RANGE` both ends), the text that
    stated it, the content words around it, and for a modifier
    ("a 2-year limited warranty") the :data:`MODIFIED_WORDS` that name what it measures."""

    value: float
    text: str
    context: frozenset[str]
    modifies: frozenset[str] = frozenset()


def quantities(sentence: str) -> dict[str, list[Quantity]]:
    """The sentence's quantities by kind: ``duration`` (``duration:business``...),
    ``percent``, ``money:usd`` (``:eur``, ``:gbp``), :data:`CLOCK` (in minutes
    after midnight) and :data:`CLOCK_RANGE` (the ends of a range are in :data:`CLOCK`
    too, in the order written)."""
    out: dict[str, list[Quantity]] = {}
    if _QUANTITY_START.search(sentence) is None and not any(
        word in sentence for word in _WORD_NUMBERS
    ):
        return out  # no match can start: scanning for the two is ~half of a full match
    clocks = _clock_ranges(sentence, out)
    for m in _CLOCK.finditer(sentence):
        context = _context(sentence, m.start(), m.end())
        clocks.append((m.start(), Quantity(float(_minute(m)), m.group(0).strip(), context)))
    if clocks:
        out[CLOCK] = [q for _, q in sorted(clocks, key=lambda c: c[0])]
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
        context = _context(sentence, m.start(), m.end())
        written = m.group(0).strip()
        modifies = _modified(sentence, m.end()) if "-" in written else frozenset()
        out.setdefault(kind, []).append(Quantity(value, written, context, modifies))
    return out


def _clock_ranges(sentence: str, out: dict[str, list[Quantity]]) -> list[tuple[int, Quantity]]:
    """Adds the sentence's ranges of times of day to ``out``; returns the starts that
    only a range reads ("9" of "9–5pm"), each with where it was written."""
    starts: list[tuple[int, Quantity]] = []
    at = 0
    while (m := _RANGE.search(sentence, at)) is not None:
        read = _clock_range(m)
        if read is None:
            at = m.start("end")  # "99–9am–5pm": the end may start a range of its own
            continue
        first, last, bare = read
        context = _context(sentence, m.start(), m.end())
        value = float(first * MINUTES_PER_DAY + last)
        out.setdefault(CLOCK_RANGE, []).append(Quantity(value, m.group(0), context))
        if bare:
            begin, end = m.span("start")
            context = _context(sentence, begin, end)
            starts.append((begin, Quantity(float(first), m["start"], context)))
        at = m.end()  # an end starts no other range: "9am–5pm–8pm" is one, then 8pm
    return starts


def _clock_range(m: re.Match[str]) -> tuple[int, int, bool] | None:
    """A :data:`_RANGE` match's start and end (minutes after midnight) and whether the
    start has no reading of its own; None when the two are not times of day."""
    if m["join"] and m["join"].casefold() == "and" and not m["between"]:
        return None  # "at 9am and 5pm" lists two times
    end = _CLOCK.fullmatch(m["end"])
    if end is None:
        return None
    last = _minute(end)
    start = _CLOCK.fullmatch(m["start"])
    if start is not None:
        return _minute(start), last, False
    if not end["half"]:
        bare = _BARE_24.fullmatch(m["start"])
        if bare is None:
            return None
        return 60 * int(bare["hour"]) + int(bare["minute"]), last, True
    bare = _BARE_12.fullmatch(m["start"])
    if bare is None:
        return None
    # The end's half-day ("1–5pm"), or the other one for a start later in it ("9–5pm").
    first = int(bare["hour"]) % 12 * 60 + int(bare["minute"] or 0)
    half = last - last % _HALF_DAY
    first += half if first <= last - half else _HALF_DAY - half
    return first, last, True


def _minute(m: re.Match[str]) -> int:
    """Minutes after midnight of a :data:`_CLOCK` match."""
    if m["half"]:
        hour = int(m["hour"]) % 12 + (12 if m["half"].casefold() == "p" else 0)
        return 60 * hour + int(m["minute"] or 0)
    return 60 * int(m["hour24"]) + int(m["minute24"])


def _modified(sentence: str, end: int) -> frozenset[str]:
    """The first content words after a quantity written as a modifier: what it measures."""
    found: list[str] = []
    for word in _after(sentence, end)[: 2 * MODIFIED_WORDS]:
        found.extend(content_terms(word))
        if len(found) >= MODIFIED_WORDS:
            break
    return frozenset(found[:MODIFIED_WORDS])


def _context(sentence: str, start: int, end: int) -> frozenset[str]:
    """The content words around ``sentence[start:end]`` that say what it measures: the
    :data:`CONTEXT_WORDS` either side, or :data:`WIDE_CONTEXT_WORDS` where those hold
    none ("or within 60 days if you are a member")."""
    before, after = _before(sentence, start), _after(sentence, end)
    near = _context_terms(before[-CONTEXT_WORDS:] + after[:CONTEXT_WORDS])
    return near or _context_terms(before[-WIDE_CONTEXT_WORDS:] + after[:WIDE_CONTEXT_WORDS])


def _context_terms(words: list[str]) -> frozenset[str]:
    return frozenset(
        t
        for t in content_terms(" ".join(words))
        if len(t) >= MIN_CONTEXT_CHARS and t not in _CONTEXT_STOP and not t.isdigit()
    )


def _before(sentence: str, start: int) -> list[str]:
    """The words within :data:`CONTEXT_CHARS` before ``start``, but one the bound cuts."""
    begin = max(0, start - CONTEXT_CHARS)
    words = _WORD.findall(sentence, begin, start)
    return words[1:] if words and _cuts(sentence, begin) else words


def _after(sentence: str, end: int) -> list[str]:
    """The words within :data:`CONTEXT_CHARS` after ``end``, but one the bound cuts."""
    stop = end + CONTEXT_CHARS
    words = _WORD.findall(sentence, end, stop)
    return words[:-1] if words and _cuts(sentence, stop) else words


def _cuts(sentence: str, at: int) -> bool:
    """Whether a bound at ``at`` falls inside a word."""
    return 0 < at < len(sentence) and _WORD.fullmatch(sentence, at - 1, at + 1) is not None


def _parse(number: str) -> float:
    word = _WORD_NUMBERS.get(number.casefold())
    return float(word) if word is not None else float(number.replace(",", ""))


def same_value(a: float, b: float, kind: str) -> bool:
    """Whether two values of one ``kind`` are the same: times of day to the minute,
    others within :data:`VALUE_TOLERANCE`."""
    if kind in (CLOCK, CLOCK_RANGE):
        return a == b
    return abs(a - b) <= VALUE_TOLERANCE * max(abs(a), abs(b))
