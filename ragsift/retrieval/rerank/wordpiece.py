"""A BERT WordPiece tokenizer from a ``vocab.txt``: what most cross-encoder folders ship.

It encodes (query, passage) pairs the way BERT-family cross-encoders were trained:
``[CLS] query [SEP] passage [SEP]``, segment ids 0 then 1, the longer side
truncated first. Folders with only a ``tokenizer.json`` need the ``tokenizers``
package instead (see :mod:`ragsift.retrieval.rerank.onnx`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EncodedPair", "WordPieceTokenizer"]

# BERT's limit on one word's characters: longer "words" (base64, hashes) become [UNK].
MAX_WORD_CHARS = 100
_SPECIALS = ("[CLS]", "[SEP]", "[UNK]", "[PAD]")


@dataclass(frozen=True, slots=True)
class EncodedPair:
    """One (query, passage) pair as token ids and segment ids (same length)."""

    input_ids: list[int]
    token_type_ids: list[int]


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    # ASCII symbols count as punctuation for BERT even where Unicode says otherwise ($, ^, `).
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(char: str) -> bool:
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class WordPieceTokenizer:
    """BERT's basic + WordPiece tokenization over a vocabulary.

    Args:
        vocab: token -> id; must hold ``[CLS]``, ``[SEP]``, ``[UNK]`` and ``[PAD]``.
        lowercase: lowercase and strip accents first (uncased models).
    """

    def __init__(self, vocab: dict[str, int], *, lowercase: bool = True) -> None:
        missing = [t for t in _SPECIALS if t not in vocab]
        if missing:
            raise ValueError(f"vocabulary lacks the special tokens {missing}")
        self.vocab = vocab
        self.lowercase = lowercase
        self.cls_id, self.sep_id, self.unk_id, self.pad_id = (vocab[t] for t in _SPECIALS)

    @classmethod
    def from_file(cls, path: Path, *, lowercase: bool = True) -> WordPieceTokenizer:
        """Read a ``vocab.txt`` (one token per line; the line number is its id)."""
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls({token: i for i, token in enumerate(lines)}, lowercase=lowercase)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens)."""
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(self._wordpiece(word))
        return ids

    def encode_pair(self, query: str, passage: str, max_length: int) -> EncodedPair:
        """``[CLS] query [SEP] passage [SEP]`` in at most ``max_length`` tokens."""
        budget = max_length - 3
        if budget < 2:
            raise ValueError(f"max_length must be >= 5, got {max_length}")
        q, p = self.tokenize(query), self.tokenize(passage)
        # The passage gives way first, but keeps at least half the budget.
        p = p[: max(budget - len(q), budget // 2)]
        q = q[: budget - len(p)]
        ids = [self.cls_id, *q, self.sep_id, *p, self.sep_id]
        types = [0] * (len(q) + 2) + [1] * (len(p) + 1)
        return EncodedPair(ids, types)

    def _words(self, text: str) -> list[str]:
        if self.lowercase:
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words: list[str] = []
        current: list[str] = []
        for char in text:
            cat = unicodedata.category(char)
            if char.isspace():
                boundary, keep = True, False
            elif cat in ("Cc", "Cf", "Cs", "Co", "Cn") or char == "\ufffd":
                continue  # control and invalid characters: dropped, as BERT does
            elif _is_punctuation(char) or _is_cjk(char):
                boundary, keep = True, True
            else:
                current.append(char)
                continue
            if boundary and current:
                words.append("".join(current))
                current = []
            if keep:
                words.append(char)
        if current:
            words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk_id]
        out: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk_id]  # one unknown piece makes the whole word unknown
            out.append(found)
            start = end
        return out


def pad(rows: Sequence[Sequence[int]], value: int) -> list[list[int]]:
    """Right-pad ``rows`` with ``value`` to the longest row."""
    width = max((len(r) for r in rows), default=0)
    return [[*r, *([value] * (width - len(r)))] for r in rows]
