"""Labelled retrieval sets from SQuAD 2.0-format files.

Corpus = every paragraph of the labelled file (doc id from article title and
paragraph index). In-scope query = an answerable question; its relevant chunk
is the paragraph holding its answer. Near-miss = an ``is_impossible`` question
(on topic, no answer). Out-of-scope = a question from another file whose
articles are not in the corpus: the right outcome is a refusal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragsift.errors import InvalidEventError
from ragsift.ingest.loaders import SourceDocument, safe_doc_id

__all__ = ["EvalQuery", "LabelledSet", "load_squad"]

QueryKind = Literal["in_scope", "near_miss", "out_of_scope"]


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One labelled question."""

    query_id: str
    text: str
    kind: QueryKind
    relevant_doc: str | None
    group: str
    """Article title: the unit of the fit/report split (no article on both sides)."""


@dataclass(frozen=True, slots=True)
class LabelledSet:
    """A corpus and its labelled questions."""

    name: str
    documents: list[SourceDocument]
    queries: list[EvalQuery]

    def counts(self) -> dict[str, int]:
        """Questions per kind, plus the corpus size."""
        out = {"documents": len(self.documents)}
        for q in self.queries:
            out[q.kind] = out.get(q.kind, 0) + 1
        return out


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidEventError(f"{path}: cannot read a SQuAD file ({exc})") from exc
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, list):
        raise InvalidEventError(f"{path}: not SQuAD format (no top-level 'data' list)")
    return data


def load_squad(labelled: Path, out_of_scope: Path | None = None) -> LabelledSet:
    """Read a SQuAD 2.0-format file (and optionally a file of out-of-scope questions)."""
    documents: list[SourceDocument] = []
    queries: list[EvalQuery] = []
    for article in _read(labelled):
        title = str(article.get("title", "untitled"))
        for i, para in enumerate(article.get("paragraphs", [])):
            doc_id = safe_doc_id(f"{title}-{i}")
            documents.append(
                SourceDocument(
                    doc_id=doc_id,
                    text=para["context"],
                    title=title.replace("_", " "),
                    source=f"squad:{title}#{i}",
                    source_type="third_party",
                )
            )
            for qa in para.get("qas", []):
                impossible = bool(qa.get("is_impossible")) or not qa.get("answers")
                queries.append(
                    EvalQuery(
                        query_id=safe_doc_id(f"q-{qa['id']}"),
                        text=qa["question"],
                        kind="near_miss" if impossible else "in_scope",
                        relevant_doc=None if impossible else doc_id,
                        group=title,
                    )
                )
    if out_of_scope is not None:
        corpus_titles = {q.group for q in queries}
        for article in _read(out_of_scope):
            title = str(article.get("title", "untitled"))
            if title in corpus_titles:
                continue  # same article on both sides would not be out of scope
            for para in article.get("paragraphs", []):
                for qa in para.get("qas", []):
                    queries.append(
                        EvalQuery(
                            query_id=safe_doc_id(f"o-{qa['id']}"),
                            text=qa["question"],
                            kind="out_of_scope",
                            relevant_doc=None,
                            group=f"oos:{title}",
                        )
                    )
    if not documents or not queries:
        raise InvalidEventError(f"{labelled}: no paragraphs or questions found")
    return LabelledSet(labelled.stem, documents, queries)
