"""A cheap guess at whether a text is English, for what ragsift reads in English.

The embedders (all-MiniLM-L6-v2, the hashing embedder), the BM25 tokenizer
(Qdrant's English stemmer and stop words) and the shipped calibrations all read
English: a question or a corpus in another language gets confidences that do not
mean what they say. :func:`guess_language` names the language of a text that looks
like French, Spanish, German, Italian, Portuguese or Dutch (by its function words,
from the Snowball lists in ``data/language_words.tsv``), or written mostly in a
non-Latin script; anything else, including every text with no function word at all
("API rate limits"), reads as English. Deterministic; about 10 µs a query
(``bench/language.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "LANGUAGE_NAMES",
    "OTHER_SCRIPT",
    "LanguageShares",
    "guess_language",
    "language_shares",
]

WORDS_FILE = Path(__file__).parent / "data" / "language_words.tsv"
#: The code of a text written mostly in letters outside the Latin alphabets.
OTHER_SCRIPT = "other"
LANGUAGE_NAMES = {
    "fr": "French",
    "es": "Spanish",
    "de": "German",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    OTHER_SCRIPT: "a non-Latin script",
}
# A text is foreign when its best language's function words weigh at least this much
# (two of its own words, or four it shares with English spelling: "la", "die", "son")
# and outweigh its English function words. Measured on SQuAD 2.0 dev's 11,873 English
# questions and the 268 bundled out-of-domain ones: see docs/confidence.md section 13.
MIN_FOREIGN_WEIGHT = 2.0
# Letters past Latin Extended-B (U+024F) are another script's; more than half of a
# text's letters, and at least this many, make it OTHER_SCRIPT ("保修多久").
MIN_OTHER_LETTERS = 2
_OTHER_LETTER = re.compile(r"[^\W\d_\u0000-\u024f]")
# A word, or an elided French or Italian article before its word ("l'", "qu'").
_TOKEN = re.compile(r"[^\W\d_]+(?:'(?=[^\W\d_]))?")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# Letters English never writes, weighed once per text like a function word: "¿" and
# "ã" belong to one language; "ñ" or "ü" to one, but English borrows names with them
# ("El Niño", "Über"), so half a word.
_LETTERS: dict[str, tuple[tuple[str, float], ...]] = {
    "¿": (("es", 1.0),),
    "¡": (("es", 1.0),),
    "ñ": (("es", 0.5),),
    "ã": (("pt", 1.0),),
    "õ": (("pt", 1.0),),
    "ß": (("de", 1.0),),
    "ä": (("de", 0.5),),
    "ö": (("de", 0.5),),
    "ü": (("de", 0.5),),
    "ç": (("fr", 0.5), ("pt", 0.5)),
    "œ": (("fr", 0.5),),
}
# The ingest warning reads at most this much of each document: a guess, not a count.
SAMPLE_CHARS = 20_000


@cache
def _words() -> dict[str, tuple[tuple[str, float], ...]]:
    """word -> ((language, weight), ...), read once from the bundled table."""
    table: dict[str, list[tuple[str, float]]] = {}
    for line in WORDS_FILE.read_text(encoding="utf-8").splitlines():
        code, word, weight = line.split("\t")
        table.setdefault(word, []).append((code, float(weight)))
    return {word: tuple(langs) for word, langs in table.items()}


def guess_language(text: str) -> str | None:
    """The code of the language ``text`` looks written in when that is not English
    (a key of :data:`LANGUAGE_NAMES`), or None: English, or nothing to tell by."""
    lowered = text.lower().translate(_APOSTROPHES)
    tokens = _TOKEN.findall(lowered)
    other = len(_OTHER_LETTER.findall(lowered))
    if other >= MIN_OTHER_LETTERS and 2 * other > sum(map(len, tokens)):
        return OTHER_SCRIPT
    table = _words()
    weights: dict[str, float] = {}
    for token in tokens:
        found = table.get(token)
        if found is None and token.endswith("'"):  # English "don't": "don'" reads "don"
            found = table.get(token[:-1])
        if found is None:
            continue
        for code, weight in found:
            weights[code] = weights.get(code, 0.0) + weight
    for letter, found in _LETTERS.items():
        if letter in lowered:
            for code, weight in found:
                weights[code] = weights.get(code, 0.0) + weight
    english = weights.pop("en", 0.0)
    if not weights:
        return None
    best = max(weights.values())
    if best < MIN_FOREIGN_WEIGHT or best <= english:
        return None
    return min(code for code, weight in weights.items() if weight == best)  # a tie: fixed


@dataclass(frozen=True, slots=True)
class LanguageShares:
    """How much of a body of text (by characters) looks written in each non-English
    language; ``total`` counts every character read."""

    total: int
    foreign: dict[str, int]

    @property
    def foreign_share(self) -> float:
        """The share of the text that looks non-English, in [0, 1]."""
        return sum(self.foreign.values()) / self.total if self.total else 0.0

    def top(self) -> tuple[str, float] | None:
        """The most common non-English language and its share, or None."""
        if not self.foreign or not self.total:
            return None
        code = max(sorted(self.foreign), key=lambda c: self.foreign[c])
        return code, self.foreign[code] / self.total


def language_shares(texts: Iterable[str]) -> LanguageShares:
    """Each text's language guessed from its first ``SAMPLE_CHARS`` characters, and
    weighed by its whole length."""
    total = 0
    foreign: dict[str, int] = {}
    for text in texts:
        total += len(text)
        code = guess_language(text[:SAMPLE_CHARS])
        if code is not None:
            foreign[code] = foreign.get(code, 0) + len(text)
    return LanguageShares(total, foreign)
