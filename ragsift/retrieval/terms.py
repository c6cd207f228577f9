"""Content words of a text: what the extractive report and the contradiction check compare.

Case-folded, light suffix folding (so "returned" matches "return"), no stop words.
Chinese and Japanese write no spaces, so a run of their characters is read as its
character pairs (a lone character as itself): read whole, a question shared no word
with a passage unless it copied a whole clause of it. Kept below ``report`` so
retrieval-time checks use the same words as the report.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["content_terms"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Han ideographs (with extension A and compatibility ones) and kana.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
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


def _pieces(word: str) -> list[str]:
    """``word``, or where it holds Chinese or Japanese characters, its other parts and
    each run's character pairs (a run of one character: itself)."""
    if not _CJK.search(word):
        return [word]
    out: list[str] = []
    at = 0
    for run in _CJK.finditer(word):
        if run.start() > at:
            out.append(word[at : run.start()])
        chars = run.group()
        out.extend(
            [chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)]
        )
        at = run.end()
    if at < len(word):
        out.append(word[at:])
    return out


def content_terms(text: str) -> set[str]:
    """Case-folded, suffix-folded words of ``text`` that carry meaning (no stop words)."""
    folded = text.casefold()
    # Most texts hold no Chinese or Japanese: one search for the whole text, not one
    # per word (a third of this function's time on SQuAD's sentences); and an ASCII
    # text holds none of their characters, told without the search at all (isascii
    # reads a flag of the string: the search cost ~15 ns a character, 6 us a chunk).
    if folded.isascii() or _CJK.search(folded) is None:
        return {_fold(w) for w in _WORD.findall(folded) if w not in _STOP}
    return {_fold(p) for w in _WORD.findall(folded) for p in _pieces(w) if p not in _STOP}
