"""Does the answer's expected type tell an answering passage from an on-topic one?

An experiment after ADR 020, whose remaining cost is near misses: passages on
the question's subject that lack its answer. A "when" question wants a date, a
"how many" one a number, a "who" or "where" one a name the question does not
already hold. If the passage sentence that best covers the question's words
holds no such candidate, the passage may be on topic without answering.

For every answerable question of a SQuAD-format file, this pairs its own
paragraph (label 1) with the paragraph of the same article that shares the
most of the question's content words (label 0: what a hole leaves as the best
hit). Features:

- ``coverage``: share of the question's content words in the paragraph;
- ``best_sentence``: the same for its best-covering sentence;
- ``typed``: 1 when that sentence holds a candidate of the expected type that
  is not in the question (0 for questions without a type: what, which...).

It prints the 5-fold cross-validated AUROC of a logistic model on the
features with and without ``typed``, over all pairs and over typed questions,
and how often each type finds a candidate in the answering and the on-topic
paragraph:

    python scripts/answer_type_probe.py ../shared/data/squad2/dev-v2.0.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import cross_val_predict

from ragsift.errors import InvalidEventError
from ragsift.evaluation.dataset import LabelledSet
from ragsift.evaluation.squad import load_squad
from ragsift.retrieval.reader import split_sentences
from ragsift.retrieval.terms import content_terms

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_CANDIDATES = {
    "date": re.compile(rf"\b(?:1\d{{3}}|20\d{{2}})s?\b|\b(?:{_MONTHS})\b|\bcentur(?:y|ies)\b"),
    "number": re.compile(
        r"\b\d[\d,.]*\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
        r"|twenty|thirty|forty|fifty|hundred|thousand|million|billion|dozen)\b",
        re.IGNORECASE,
    ),
    # A capitalised word not opening the sentence: a name, roughly.
    "name": re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+"),
}
_TYPES = (
    ("date", re.compile(r"\bwhen\b|\b(?:what|which) (?:year|century|date|decade|month)\b")),
    (
        "number",
        re.compile(
            r"\bhow (?:many|much|long|far|old|large|big|tall|high|often)\b"
            r"|\bwhat (?:percentage|percent|number|amount)\b"
        ),
    ),
    ("name", re.compile(r"\bwho(?:m|se)?\b|\bwhere\b|\bwhat (?:city|country|state|region)\b")),
)
FEATURES = ("coverage", "best_sentence", "typed")


def expected_type(question: str) -> str | None:
    """The kind of answer the question asks for, or None (what, which, why...)."""
    lowered = question.casefold()
    return next((kind for kind, pattern in _TYPES if pattern.search(lowered)), None)


def has_candidate(kind: str, sentence: str, question: str) -> bool:
    """Whether ``sentence`` holds a ``kind`` candidate that the question does not."""
    asked = question.casefold()
    return any(m.group(0).casefold() not in asked for m in _CANDIDATES[kind].finditer(sentence))


def features(question: str, terms: set[str], paragraph: str, held: set[str]) -> list[float]:
    """``FEATURES`` of one pair: the question, its content words, a paragraph and the
    paragraph's content words (``terms`` not empty)."""
    scored = [(len(terms & content_terms(s)) / len(terms), s) for s in split_sentences(paragraph)]
    best, sentence = max(scored, key=lambda pair: pair[0], default=(0.0, ""))
    kind = expected_type(question)
    typed = kind is not None and has_candidate(kind, sentence, question)
    return [len(terms & held) / len(terms), best, float(typed)]


def pairs(dataset: LabelledSet) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """Features, labels and expected types: each answerable question's own paragraph
    and the article's other paragraph that shares the most of its words."""
    text = {d.doc_id: d.text for d in dataset.documents}
    held = {doc_id: content_terms(t) for doc_id, t in text.items()}  # once per paragraph
    articles: dict[str, list[str]] = {}
    for doc_id, group in dataset.doc_groups.items():
        articles.setdefault(group, []).append(doc_id)
    rows: list[list[float]] = []
    labels: list[int] = []
    kinds: list[str | None] = []
    for query in dataset.queries:
        terms = content_terms(query.text)
        if query.kind != "in_scope" or not terms:
            continue
        (own,) = query.relevant
        others = [d for d in articles[query.group] if d != own]
        if not others:
            continue
        closest = max(others, key=lambda d: len(terms & held[d]))
        for doc_id, label in ((own, 1), (closest, 0)):
            rows.append(features(query.text, terms, text[doc_id], held[doc_id]))
            labels.append(label)
            kinds.append(expected_type(query.text))
    return np.array(rows), np.array(labels), kinds


def report(x: np.ndarray, y: np.ndarray, kinds: list[str | None]) -> dict[str, Any]:
    """Cross-validated AUROC with and without ``typed``, and each type's candidate rates."""
    typed = np.array([k is not None for k in kinds])
    out: dict[str, Any] = {"pairs": int(len(y) // 2), "typed_share": round(float(typed.mean()), 3)}
    for name, columns in (("without_typed", [0, 1]), ("with_typed", [0, 1, 2])):
        model = LogisticRegression(max_iter=1000)
        p = cross_val_predict(model, x[:, columns], y, cv=5, method="predict_proba")[:, 1]
        out[name] = {
            "auroc": round(float(roc_auc_score(y, p)), 3),
            "auroc_typed_questions": round(float(roc_auc_score(y[typed], p[typed])), 3),
        }
    kind_array = np.array(kinds, dtype=object)
    out["candidate_found"] = {
        kind: {
            "questions": int((kind_array == kind).sum() // 2),
            "answering": round(float(x[(kind_array == kind) & (y == 1), 2].mean()), 3),
            "on_topic": round(float(x[(kind_array == kind) & (y == 0), 2].mean()), 3),
        }
        for kind in ("date", "number", "name")
        if (kind_array == kind).any()
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad", type=Path, help="a SQuAD 2.0-format file")
    args = parser.parse_args()
    try:
        dataset = load_squad(args.squad)
    except InvalidEventError as exc:
        parser.exit(2, f"answer_type_probe: {exc}\n")
    x, y, kinds = pairs(dataset)
    if len(y) < 10:  # 5 folds of both labels
        parser.exit(2, f"answer_type_probe: {args.squad}: {len(y) // 2} pairs, need 5\n")
    print(json.dumps(report(x, y, kinds)))


if __name__ == "__main__":
    main()
