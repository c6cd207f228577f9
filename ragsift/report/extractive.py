"""The no-LLM report: the kept sentences that best answer the question, each with its citation.

Sentences are ranked by how many of the question's content words they share
(light suffix folding, so "returned" matches "return"), then by the rank of
their hit, then by position in it. The answer quotes the sources verbatim, so
it cannot state a fact they do not contain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsift.retrieval.terms import content_terms
from ragsift.schemas import RetrievedChunk

__all__ = [
    "DEFAULT_MAX_SENTENCES",
    "content_terms",
    "extractive_answer",
    "split_sentences",
]

DEFAULT_MAX_SENTENCES = 3  # past three quoted sentences an extract stops reading as an answer
# Chinese and Japanese end a sentence with a full-width mark and no space: a page of
# their text was one "sentence", and its answer quoted the whole chunk.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n\s*\n")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (after ``.``, ``!``, ``?`` or a blank line), stripped, non-empty."""
    return [" ".join(s.split()) for s in _SENTENCE_END.split(text) if s.strip()]


def extractive_answer(
    question: str,
    hits: Sequence[RetrievedChunk],
    *,
    max_sentences: int = DEFAULT_MAX_SENTENCES,
    max_chars: int = 1_200,
) -> str:
    """The best sentences of ``hits`` for ``question``, each followed by ``[n]`` (n = hit order).

    Returns ``""`` when no sentence shares a content word with the question; the
    caller answers with the refusal sentence then. Sentences that would push the
    answer past ``max_chars`` are skipped; a first sentence longer than that is cut.
    """
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    wanted = content_terms(question)
    ranked: list[tuple[int, int, int, str]] = []
    seen: set[str] = set()
    for number, hit in enumerate(hits, 1):
        for position, sentence in enumerate(split_sentences(hit.text)):
            overlap = len(wanted & content_terms(sentence))
            key = sentence.casefold()
            if overlap and key not in seen:  # the same sentence in two chunks is quoted once
                seen.add(key)
                ranked.append((-overlap, number, position, sentence))
    ranked.sort()
    parts: list[str] = []
    length = 0
    for _, number, _, sentence in ranked:
        piece = f"{sentence} [{number}]"
        extra = len(piece) + (1 if parts else 0)
        if length + extra > max_chars:
            if parts:
                continue
            marker = f"… [{number}]"
            piece = sentence[: max(max_chars - len(marker), 0)].rstrip() + marker
            extra = len(piece)
        parts.append(piece)
        length += extra
        if len(parts) == max_sentences:
            break
    return " ".join(parts)
