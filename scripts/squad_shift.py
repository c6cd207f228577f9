"""Write SQuAD 2.0 files re-chunked or re-phrased, to measure how a calibration transfers.

    python scripts/squad_shift.py sentences ../shared/data/squad2 /tmp/shift
    ragsift eval --labelled /tmp/shift/sentences-dev-v2.0.json \
        --out-of-scope ../shared/data/squad2/test-v2.0.json --half 2 --artifact half1.json

Modes (docs/evaluation.md, "Transfer to other chunkings" and "Questions in a
user's words"):

* ``sentences``: every paragraph cut into chunks of two sentences; an
  answerable question goes with the chunk that holds its whole first answer
  (dropped when the answer crosses a cut), a near miss with the first chunk;
* ``paragraphs``: three consecutive paragraphs of an article per chunk;
* ``keywords``: every question (of both files) cut to its content words, as a
  search box gets them; chunks unchanged;
* ``synonyms``: every question (of both files) asked in other words, as a user
  who has not read the passage asks it: each content word that its paragraph
  also uses is replaced, with probability ``RAGSIFT_SHIFT_SHARE`` (default 1),
  by a synonym from WordNet that the paragraph does not use (the first lemma of
  the word's most frequent sense; plural nouns keep their ``s``; capitalised
  words, numbers and words without one stay). Chunks unchanged. It reads
  Debian's WordNet 3.0 (``apt-get install wordnet-base``; ``WNSEARCHDIR`` for
  another folder) and prints the share of questions and words it changed.

The dev file is transformed; the test file too for ``keywords`` and ``synonyms``
(its questions are the out-of-scope ones), else it is used as it is.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "into",
        "than",
        "then",
        "there",
        "their",
        "they",
        "he",
        "she",
        "his",
        "her",
        "him",
        "them",
        "or",
        "and",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "about",
        "after",
        "before",
        "during",
        "over",
        "under",
        "between",
        "s",
    ]
)
SENTENCES_PER_CHUNK = 2
PARAGRAPHS_PER_CHUNK = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def keywords(question: str) -> str:
    """The question's content words (the question itself when none are left)."""
    kept = [w for w in _WORD.findall(question) if w.lower() not in STOPWORDS]
    return " ".join(kept) if kept else question


WORDNET = Path(os.environ.get("WNSEARCHDIR", "/usr/share/wordnet"))
WORDNET_POS = ("noun", "verb", "adj", "adv")
SHIFT_SEED = 20261127
_MIN_SYNONYM_WORD = 3


@cache
def _wordnet_index() -> dict[str, list[tuple[int, str, int]]]:
    """word -> [(tagged sense count, part of speech, offset of its most frequent sense)]."""
    if not (WORDNET / "index.noun").is_file():
        raise SystemExit(
            f"synonyms: no WordNet at {WORDNET} (apt-get install wordnet-base, or set WNSEARCHDIR)"
        )
    index: dict[str, list[tuple[int, str, int]]] = {}
    for pos in WORDNET_POS:
        for line in (WORDNET / f"index.{pos}").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):  # the licence header
                continue
            fields = line.split()
            lemma, synsets, pointers = fields[0], int(fields[2]), int(fields[3])
            tagged = int(fields[5 + pointers])
            first = int(fields[6 + pointers])
            if synsets:
                index.setdefault(lemma, []).append((tagged, pos, first))
    return index


@cache
def _synset_lemmas(pos: str, offset: int) -> tuple[str, ...]:
    with (WORDNET / f"data.{pos}").open("rb") as data:
        data.seek(offset)
        fields = data.readline().decode("utf-8").split()
    count = int(fields[3], 16)
    return tuple(re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).lower() for i in range(count))


def synonym(word: str, avoid: set[str]) -> str | None:
    """A WordNet synonym of lower-case ``word`` from its most frequent sense, none in ``avoid``."""
    suffix = ""
    senses = _wordnet_index().get(word)
    base = _wordnet_index().get(word[:-1], [])
    if senses is None and word.endswith("s") and not any(s[1] == "verb" for s in base):
        # a plural noun; "comes" (a verb's third person) is left alone
        word, suffix = word[:-1], "s"
        senses = [s for s in base if s[1] == "noun"]
    if not senses:
        return None
    _, pos, offset = max(senses)
    for lemma in _synset_lemmas(pos, offset):
        if (
            lemma.isalpha()
            and lemma != word
            and lemma[:4] != word[:4]
            and lemma + suffix not in avoid
            and lemma not in avoid
        ):
            return lemma + suffix
    return None


def reword(question: str, context: str, rng: random.Random, share: float) -> tuple[str, int, int]:
    """``question`` with the content words its context uses swapped for synonyms.

    Returns the new question, how many words could be swapped, how many were.
    """
    used = {w.lower() for w in _WORD.findall(context)}
    out, eligible, swapped, last = [], 0, 0, 0
    for i, m in enumerate(_WORD.finditer(question)):
        word = m.group()
        lower = word.lower()
        if (
            lower in STOPWORDS
            or len(word) < _MIN_SYNONYM_WORD
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


def _pieces(context: str) -> list[tuple[int, int]]:
    """(start, end) of chunks of SENTENCES_PER_CHUNK sentences."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(context):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(context)))
    return [
        (spans[i][0], spans[min(i + SENTENCES_PER_CHUNK, len(spans)) - 1][1])
        for i in range(0, len(spans), SENTENCES_PER_CHUNK)
    ]


def _split(paragraph: dict[str, Any]) -> list[dict[str, Any]]:
    pieces = _pieces(paragraph["context"])
    buckets: list[list[dict[str, Any]]] = [[] for _ in pieces]
    for qa in paragraph["qas"]:
        answers = qa.get("answers") or []
        if qa.get("is_impossible") or not answers:
            buckets[0].append(qa)
            continue
        first = answers[0]
        start, end = first["answer_start"], first["answer_start"] + len(first["text"])
        for j, (lo, hi) in enumerate(pieces):
            if lo <= start and end <= hi:
                inside = [
                    dict(a, answer_start=a["answer_start"] - lo)
                    for a in answers
                    if lo <= a["answer_start"] and a["answer_start"] + len(a["text"]) <= hi
                ]
                buckets[j].append(dict(qa, answers=inside))
                break
    return [
        {"context": paragraph["context"][lo:hi], "qas": qas}
        for (lo, hi), qas in zip(pieces, buckets, strict=True)
    ]


def _merge(paragraphs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = []
    for i in range(0, len(paragraphs), PARAGRAPHS_PER_CHUNK):
        context, qas = "", []
        for p in paragraphs[i : i + PARAGRAPHS_PER_CHUNK]:
            context += "\n\n" if context else ""
            offset = len(context)
            context += p["context"]
            for qa in p["qas"]:
                moved = [dict(a, answer_start=a["answer_start"] + offset) for a in qa["answers"]]
                qas.append(dict(qa, answers=moved))
        merged.append({"context": context, "qas": qas})
    return merged


def transform(
    data: list[dict[str, Any]], mode: str, counts: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """The articles of a SQuAD file, shifted by ``mode`` (``counts`` tallies ``synonyms``)."""
    out = []
    counts = {} if counts is None else counts
    rng = random.Random(SHIFT_SEED)
    share = float(os.environ.get("RAGSIFT_SHIFT_SHARE", "1"))
    if not 0 <= share <= 1:
        raise SystemExit(f"RAGSIFT_SHIFT_SHARE must be in [0, 1], got {share}")
    for article in data:
        paragraphs = article["paragraphs"]
        if mode == "sentences":
            paragraphs = [piece for p in paragraphs for piece in _split(p)]
        elif mode == "paragraphs":
            paragraphs = _merge(paragraphs)
        elif mode == "keywords":
            paragraphs = [
                dict(p, qas=[dict(qa, question=keywords(qa["question"])) for qa in p["qas"]])
                for p in paragraphs
            ]
        elif mode == "synonyms":
            reworded = []
            for p in paragraphs:
                qas = []
                for qa in p["qas"]:
                    question, eligible, swapped = reword(qa["question"], p["context"], rng, share)
                    counts["questions"] = counts.get("questions", 0) + 1
                    counts["changed"] = counts.get("changed", 0) + (swapped > 0)
                    counts["eligible_words"] = counts.get("eligible_words", 0) + eligible
                    counts["swapped_words"] = counts.get("swapped_words", 0) + swapped
                    qas.append(dict(qa, question=question))
                reworded.append(dict(p, qas=qas))
            paragraphs = reworded
        else:
            raise SystemExit(
                f"mode must be sentences, paragraphs, keywords or synonyms, got {mode!r}"
            )
        out.append(dict(article, paragraphs=paragraphs))
    return out


def main(mode: str, source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    names = ["dev-v2.0.json"] + (["test-v2.0.json"] if mode in ("keywords", "synonyms") else [])
    for name in names:
        raw = json.loads((source / name).read_text(encoding="utf-8"))
        counts: dict[str, int] = {}
        raw["data"] = transform(raw["data"], mode, counts)
        path = target / f"{mode}-{name}"
        path.write_text(json.dumps(raw), encoding="utf-8")
        chunks = sum(len(a["paragraphs"]) for a in raw["data"])
        said = ""
        if counts:
            said = (
                f"; {counts['changed']} of {counts['questions']} questions reworded, "
                f"{counts['swapped_words']} words swapped of {counts['eligible_words']} "
                "with a synonym"
            )
        print(f"{path}: {chunks} chunks{said}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or any(a.startswith("-") for a in sys.argv[1:]):
        raise SystemExit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
