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
  words, numbers and words without one stay). Chunks unchanged. The synonyms
  are WordNet 3.0's, from the table ragsift ships (``ragsift/evaluation/reword.py``,
  the same rewording as ``ragsift calibrate --reword``); it prints the share of
  questions and words it changed.

The dev file is transformed; the test file too for ``keywords`` and ``synonyms``
(its questions are the out-of-scope ones), else it is used as it is.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ragsift.evaluation.reword import STOPWORDS, WORD, reworded_articles
from ragsift.evaluation.squad import unanswerable

SENTENCES_PER_CHUNK = 2
PARAGRAPHS_PER_CHUNK = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


def keywords(question: str) -> str:
    """The question's content words (the question itself when none are left)."""
    kept = [w for w in WORD.findall(question) if w.lower() not in STOPWORDS]
    return " ".join(kept) if kept else question


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
        if unanswerable(qa, f"question {qa.get('id')}"):
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
    share = float(os.environ.get("RAGSIFT_SHIFT_SHARE", "1"))
    if not 0 <= share <= 1:
        raise SystemExit(f"RAGSIFT_SHIFT_SHARE must be in [0, 1], got {share}")
    if mode == "synonyms":
        return reworded_articles(data, share, counts)
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
