"""Content words of a text: what the extractive report and the contradiction check compare.

Case-folded, light suffix folding (so "returned" matches "return"), no stop words.
Kept below ``report`` so retrieval-time checks use the same words as the report.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["content_terms"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "s")
_MIN_STEM = 3  # never fold a word below three letters ("is" -> "i")
_STOP = frozenset(
    (
        *("a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "but", "not", "no"),
        *("is", "are", "was", "were", "be", "been", "do", "does", "did", "have", "has", "had"),
        *("i", "me", "my", "you", "your", "we", "our", "it", "its", "they", "their", "he", "she"),
        *("how", "what", "when", "which", "who", "whom", "why", "where", "can", "could"),
        *("will", "would", "should", "may", "might", "must", "shall", "with", "by", "at", "as"),
        *("from", "this", "that", "these", "those", "there", "here", "about", "into", "any"),
        *("if", "then", "so", "than", "also", "all", "some", "many", "much", "more", "most"),
    )
)


@lru_cache(maxsize=65_536)  # a corpus's vocabulary recurs: look a word up, not fold it again
def _fold(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            return word[: -len(suffix)]
    return word


def content_terms(text: str) -> set[str]:
    """Case-folded, suffix-folded words of ``text`` that carry meaning (no stop words)."""
    return {_fold(w) for w in _WORD.findall(text.casefold()) if w not in _STOP}
