"""Split documents into overlapping chunks with stable ids.

Chunks break at paragraph, then sentence, then word boundaries, so a chunk
rarely cuts a sentence in half. Chunk ids are ``<doc_id>:<n>``: re-ingesting a
document replaces its chunks instead of adding new ones. They are unique within
a tenant only; the index scopes point ids by tenant and collection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_CHUNK_CHARS", "DEFAULT_OVERLAP_CHARS", "Chunk", "Chunker"]

# ~150-200 words: long enough to hold an answer with its context, short enough
# that one chunk is about one thing (SQuAD paragraphs average ~750 chars).
DEFAULT_CHUNK_CHARS = 1_000
# Overlap carries the cut chunk's last 150 characters, from a word boundary, into
# the next one, so an answer on a boundary survives in one chunk. So every chunk
# after a document's first starts inside a sentence (what `ask` shows of it too).
# Starting it at a sentence instead would change the chunks of the calibration
# corpus (a fifth of SQuAD's paragraphs are over 1,000 characters): a refit.
DEFAULT_OVERLAP_CHARS = 150

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a document."""

    chunk_id: str
    doc_id: str
    index: int
    text: str


class Chunker:
    """Paragraph- and sentence-aware chunking with overlap.

    Args:
        max_chars: upper bound on a chunk's length (a single longer word is cut).
        overlap_chars: how much of the previous chunk's tail starts the next one.
    """

    def __init__(
        self, max_chars: int = DEFAULT_CHUNK_CHARS, overlap_chars: int = DEFAULT_OVERLAP_CHARS
    ):
        if max_chars < 50:
            raise ValueError(f"max_chars must be >= 50, got {max_chars}")
        if not 0 <= overlap_chars < max_chars // 2:
            raise ValueError(
                f"overlap_chars must be in [0, max_chars/2) = [0, {max_chars // 2}),"
                f" got {overlap_chars}"
            )
        self.max_chars = max_chars
        self.overlap_chars = overlap_chars

    def split(self, doc_id: str, text: str) -> list[Chunk]:
        """The chunks of one document, in order; empty text gives no chunks."""
        pieces = self._pieces(text)
        chunks: list[str] = []
        current = ""
        for piece in pieces:
            candidate = f"{current} {piece}".strip() if current else piece
            if len(candidate) <= self.max_chars:
                current = candidate
                continue
            if current:
                chunks.append(current)
                tail = self._tail(current)
                current = f"{tail} {piece}".strip() if tail else piece
                if len(current) > self.max_chars:
                    current = piece
            else:
                current = piece
        if current:
            chunks.append(current)
        return [Chunk(f"{doc_id}:{i}", doc_id, i, t) for i, t in enumerate(chunks)]

    def _pieces(self, text: str) -> list[str]:
        """Paragraphs, split further into sentences and words until each fits."""
        out: list[str] = []
        for para in _PARAGRAPH.split(text):
            para = " ".join(para.split())
            if not para:
                continue
            if len(para) <= self.max_chars:
                out.append(para)
                continue
            for sentence in _SENTENCE.split(para):
                if len(sentence) <= self.max_chars:
                    out.append(sentence)
                else:
                    out.extend(self._words(sentence))
        return out

    def _words(self, sentence: str) -> list[str]:
        parts: list[str] = []
        current = ""
        for word in sentence.split():
            while len(word) > self.max_chars:  # a pathological "word" (base64, URLs)
                parts.append(word[: self.max_chars])
                word = word[self.max_chars :]
            if len(current) + len(word) + 1 > self.max_chars:
                parts.append(current)
                current = word
            else:
                current = f"{current} {word}".strip()
        if current:
            parts.append(current)
        return parts

    def _tail(self, chunk: str) -> str:
        """The last ``overlap_chars`` of a chunk, starting at a word boundary."""
        if self.overlap_chars == 0:
            return ""
        tail = chunk[-self.overlap_chars :]
        cut = tail.find(" ")
        return tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
