"""Questions in other words: SQuAD's, asked as a user who has not read the passage asks.

SQuAD's crowd workers wrote each question while reading its paragraph and reused
its words, so a fit on them alone learns that an answerable question's hit holds
its words. A user asks in their own ("How do I get a refund?" of a page that says
"return ... for a full refund"), and such questions were read as unanswered: on
SQuAD reworded with synonyms, and on the handbook and the Debian FAQ asked in
their users' words, the confidence was under-confident (ADR 042).

:func:`reword` swaps each content word of a question that its paragraph also uses,
with probability ``share``, for a synonym the paragraph does not use: the first
lemma of the word's most frequent WordNet sense (plural nouns keep their ``s``;
capitalised words but the first, numbers and words without a synonym stay).
:func:`reworded_articles` does it to a SQuAD file's articles, seeded, so
``ragsift calibrate --reword`` and ``scripts/squad_shift.py synonyms`` make the
same questions. The synonyms come from ``data/synonyms.tsv.gz``, written from
WordNet 3.0 by ``scripts/wordnet_synonyms.py`` (its licence: ``data/WORDNET-LICENSE``).
"""

from __future__ import annotations

import gzip
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

__all__ = ["REWORD_SEED", "STOPWORDS", "WORD", "reword", "reworded_articles", "synonym"]

SYNONYMS: Final = Path(__file__).with_name("data") / "synonyms.tsv.gz"
#: One seed for every file: a file's questions are reworded in order, each draw one word.
REWORD_SEED: Final = 20261127
_MIN_WORD: Final = 3
#: A word as the rewording and keyword questions read one.
WORD: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")

#: Function words: never swapped (and what a keyword question leaves out).
STOPWORDS: Final = frozenset(
    [
        "a",
        "about",
        "after",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "before",
        "being",
        "between",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "during",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "might",
        "must",
        "no",
        "not",
        "of",
        "on",
        "or",
        "over",
        "s",
        "shall",
        "she",
        "should",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "under",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "yes",
    ]
)


@dataclass(frozen=True, slots=True)
class _Entry:
    best: tuple[str, ...]  # the lemmas of the word's most frequent sense that may replace it
    noun: tuple[str, ...]  # the same for its most frequent noun sense (none with a verb sense)


@cache
def _table() -> dict[str, _Entry]:
    table = {}
    with gzip.open(SYNONYMS, "rt", encoding="utf-8") as lines:
        for line in lines:
            word, best, noun = line.rstrip("\n").split("\t")
            table[word] = _Entry(_lemmas(best), _lemmas(noun))
    return table


def _lemmas(field: str) -> tuple[str, ...]:
    return tuple(lemma for lemma in field.split(",") if lemma)


def synonym(word: str, avoid: set[str]) -> str | None:
    """A synonym of lower-case ``word`` from its most frequent sense, none in ``avoid``."""
    table = _table()
    suffix = ""
    entry = table.get(word)
    if entry is not None:
        options = entry.best
    elif word.endswith("s") and word[:-1] in table:  # a plural noun
        word, suffix, options = word[:-1], "s", table[word[:-1]].noun
    else:
        return None
    for lemma in options:
        if lemma + suffix not in avoid and lemma not in avoid:
            return lemma + suffix
    return None


def reword(question: str, context: str, rng: random.Random, share: float) -> tuple[str, int, int]:
    """``question`` with the content words ``context`` uses swapped for synonyms.

    Returns the new question, how many words could be swapped, and how many were.
    """
    used = {w.lower() for w in WORD.findall(context)}
    out, eligible, swapped, last = [], 0, 0, 0
    for i, m in enumerate(WORD.finditer(question)):
        word = m.group()
        lower = word.lower()
        if (
            lower in STOPWORDS
            or len(word) < _MIN_WORD
            or not word.isalpha()
            or (i > 0 and word[0].isupper())
            or lower not in used
        ):
            continue
        new = synonym(lower, used)
        if new is None:
            continue
        eligible += 1
        if rng.random() >= share:
            continue
        swapped += 1
        out.append(question[last : m.start()])
        out.append(new.capitalize() if word[0].isupper() else new)
        last = m.end()
    out.append(question[last:])
    return "".join(out), eligible, swapped


def reworded_articles(
    articles: list[Any], share: float, counts: dict[str, int] | None = None
) -> list[Any]:
    """A SQuAD file's articles with their questions reworded (:func:`reword`), seeded.

    A question or paragraph that is not what SQuAD's format says is left as it is,
    for the loader to name. ``counts`` tallies questions, changed questions, and the
    words that could be and were swapped.

    Raises:
        ValueError: ``share`` outside [0, 1].
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the share of words reworded must be in [0, 1], got {share}")
    counts = {} if counts is None else counts
    rng = random.Random(REWORD_SEED)
    out = []
    for article in articles:
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            out.append(article)
            continue
        reworded = []
        for p in paragraphs:
            qas = p.get("qas") if isinstance(p, dict) else None
            if not isinstance(qas, list) or not isinstance(p.get("context"), str):
                reworded.append(p)
                continue
            new_qas = []
            for qa in qas:
                if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
                    new_qas.append(qa)
                    continue
                question, eligible, swapped = reword(qa["question"], p["context"], rng, share)
                counts["questions"] = counts.get("questions", 0) + 1
                counts["changed"] = counts.get("changed", 0) + (swapped > 0)
                counts["eligible_words"] = counts.get("eligible_words", 0) + eligible
                counts["swapped_words"] = counts.get("swapped_words", 0) + swapped
                new_qas.append(dict(qa, question=question))
            reworded.append(dict(p, qas=new_qas))
        out.append(dict(article, paragraphs=reworded))
    return out
