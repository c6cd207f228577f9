"""Labelled retrieval sets from SQuAD 2.0-format files.

Corpus = every paragraph of the labelled file (doc id from article title and
paragraph index). In-scope query = an answerable question; its relevant chunk
is the paragraph holding its answer. Near-miss = an ``is_impossible`` question
(on topic, no answer). Out-of-scope = a question from another file whose
articles are not in the corpus: the right outcome is a refusal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsift.errors import InvalidEventError
from ragsift.evaluation.dataset import OUT_OF_SCOPE_GROUP, EvalQuery, LabelledSet
from ragsift.ingest.loaders import SourceDocument, check_unique_ids, safe_doc_id
from ragsift.schemas.payload import lone_surrogate

__all__ = ["load_squad"]


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))  # with a BOM or without
    except RecursionError as exc:
        raise InvalidEventError(f"{path}: cannot read a SQuAD file (nested too deep)") from exc
    except (OSError, ValueError) as exc:  # not JSON or UTF-8, or an int past the digit limit
        raise InvalidEventError(f"{path}: cannot read a SQuAD file ({exc})") from exc
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, list) or not all(isinstance(a, dict) for a in data):
        raise InvalidEventError(f"{path}: not SQuAD format (no top-level 'data' list of articles)")
    surrogate = lone_surrogate(data)  # from an escape such as "\ud800": no text to embed
    if surrogate is not None:
        raise InvalidEventError(f"{path}: holds {surrogate}, a lone surrogate: not Unicode text")
    return data


def _paragraphs(path: Path, article: dict[str, Any]) -> list[dict[str, Any]]:
    paragraphs = article.get("paragraphs", [])
    if not isinstance(paragraphs, list) or not all(
        isinstance(p, dict) and isinstance(p.get("qas", []), list) for p in paragraphs
    ):
        raise InvalidEventError(
            f"{path}: article {article.get('title')!r} has malformed paragraphs"
        )
    return paragraphs


def load_squad(
    labelled: Path, out_of_scope: Path | None = None, *, reword: float = 0.0
) -> LabelledSet:
    """Read a SQuAD 2.0-format file (and optionally a file of out-of-scope questions).

    A question without an ``id`` is named by its position; a blank one is left
    out and counted in the set's ``notes``. ``reword``: the share of each question's
    content words swapped for synonyms, in both files
    (:func:`~ragsift.evaluation.reword.reworded_articles`, ADR 042).

    Raises:
        InvalidEventError: a file is not SQuAD format, has no questions, a context
            or question is not a string, or two paragraphs map to one doc id (one
            would overwrite the other).
    """
    documents: list[SourceDocument] = []
    queries: list[EvalQuery] = []
    doc_groups: dict[str, str] = {}
    blank = 0
    for article in _articles(labelled, reword):
        title = str(article.get("title", "untitled"))
        for i, para in enumerate(_paragraphs(labelled, article)):
            doc_id = safe_doc_id(f"{title}-{i}")
            doc_groups[doc_id] = title
            context = para.get("context", "")
            if not isinstance(context, str):
                raise InvalidEventError(
                    f"{labelled}: article {title!r}, paragraph {i}: 'context' must be a string"
                )
            documents.append(
                SourceDocument(
                    doc_id=doc_id,
                    text=context,
                    title=title.replace("_", " "),
                    source=f"squad:{title}#{i}",
                    source_type="third_party",
                )
            )
            for j, qa in enumerate(para.get("qas", [])):
                question = _question(labelled, qa, f"{title}-{i}-{j}")
                if question is None:
                    blank += 1
                    continue
                qid, text = question
                impossible = bool(qa.get("is_impossible")) or not qa.get("answers")
                queries.append(
                    EvalQuery(
                        query_id=safe_doc_id(f"q-{qid}"),
                        text=text,
                        kind="near_miss" if impossible else "in_scope",
                        relevant=frozenset() if impossible else frozenset({doc_id}),
                        group=title,
                    )
                )
    check_unique_ids(documents)
    if out_of_scope is not None:
        corpus_titles = {q.group for q in queries}
        for article in _articles(out_of_scope, reword):
            title = str(article.get("title", "untitled"))
            if title in corpus_titles:
                continue  # same article on both sides would not be out of scope
            for i, para in enumerate(_paragraphs(out_of_scope, article)):
                for j, qa in enumerate(para.get("qas", [])):
                    question = _question(out_of_scope, qa, f"{title}-{i}-{j}")
                    if question is None:
                        blank += 1
                        continue
                    queries.append(
                        EvalQuery(
                            query_id=safe_doc_id(f"o-{question[0]}"),
                            text=question[1],
                            kind="out_of_scope",
                            relevant=frozenset(),
                            group=f"{OUT_OF_SCOPE_GROUP}{title}",
                        )
                    )
    if not documents or not queries:
        raise InvalidEventError(f"{labelled}: no paragraphs or questions found")
    notes = [f"{blank} blank question{'s' if blank > 1 else ''} left out"] if blank else []
    name = labelled.stem + (f" reworded at {reword:.0%}" if reword else "")
    return LabelledSet(name, documents, queries, doc_groups, notes=notes)


def _articles(path: Path, reword: float) -> list[dict[str, Any]]:
    """A SQuAD file's articles, their questions reworded when ``reword`` is above 0."""
    from ragsift.evaluation.reword import reworded_articles

    articles = _read(path)
    return reworded_articles(articles, reword) if reword else articles


def _question(path: Path, qa: Any, where: str) -> tuple[str, str] | None:
    """A question's id and text; its position (``title-paragraph-question``) where it
    has no id; None for a blank one.

    Raises:
        InvalidEventError: the question is not an object or its text not a string.
    """
    if not isinstance(qa, dict) or not isinstance(qa.get("question"), str):
        raise InvalidEventError(f"{path}: question {where}: needs a string 'question'")
    if not qa["question"].strip():
        return None
    qid = qa.get("id")
    named = isinstance(qid, str | int) and not isinstance(qid, bool) and str(qid)
    return (str(qid) if named else where), qa["question"]
