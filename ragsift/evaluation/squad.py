"""Labelled retrieval sets from SQuAD 2.0-format files.

Corpus = every paragraph of the labelled file (doc id from article title and
paragraph index). In-scope query = an answerable question; its relevant chunk
is the paragraph holding its answer. Near-miss = an ``is_impossible`` question
(on topic, no answer). Out-of-scope = a question from another file whose
articles are not in the corpus: the right outcome is a refusal.

A user's file is read strictly where a lax reading would change the figures
without a word: ``is_impossible`` must be a JSON boolean (or the string
``"true"``/``"false"``), not any truthy value; each question needs its own id;
each article needs a title (its paragraphs' doc ids and the half splits are
built from it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsift.errors import InvalidEventError, shown_value
from ragsift.evaluation.dataset import OUT_OF_SCOPE_GROUP, EvalQuery, LabelledSet
from ragsift.ingest.loaders import SourceDocument, check_unique_ids, safe_doc_id
from ragsift.schemas.payload import lone_surrogate

__all__ = ["load_squad", "unanswerable"]


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


def _title(path: Path, article: dict[str, Any], n: int) -> str:
    """Article ``n``'s (1-based) title: a string or an integer, never blank.

    Raises:
        InvalidEventError: no title, null, blank or another type. A missing one was read
            as "untitled" and null as "None": two such articles collided, and one in
            each file passed for one article on both sides (its out-of-scope questions
            left out).
    """
    title = article.get("title")
    if isinstance(title, int) and not isinstance(title, bool):
        return str(title)
    if isinstance(title, str) and title.strip():
        return title
    got = "no 'title'" if "title" not in article else "null" if title is None else None
    raise InvalidEventError(
        f"{path}: article {n} of 'data' needs a non-blank string 'title', got"
        f" {got or shown_value(title)} (doc ids and the half splits are built from it)"
    )


def _paragraphs(path: Path, article: dict[str, Any], title: str) -> list[dict[str, Any]]:
    paragraphs = article.get("paragraphs", [])
    if not isinstance(paragraphs, list) or not all(
        isinstance(p, dict) and isinstance(p.get("qas", []), list) for p in paragraphs
    ):
        raise InvalidEventError(f"{path}: article {title!r} has malformed paragraphs")
    return paragraphs


def unanswerable(qa: dict[str, Any], where: str) -> bool:
    """Whether question ``qa`` has no answer in its paragraph: ``is_impossible`` true,
    or no ``answers``. ``is_impossible`` may be absent (false, as in SQuAD 1.1 files), a
    JSON boolean, or the string "true" or "false" (any case).

    Raises:
        InvalidEventError: any other value. ``bool()`` read the string "false" as true,
            making an answerable question a near miss.
    """
    flag = qa.get("is_impossible", False)
    if isinstance(flag, str) and flag.strip().lower() in ("true", "false"):
        flag = flag.strip().lower() == "true"
    if not isinstance(flag, bool):
        raise InvalidEventError(
            f"{where}: 'is_impossible' must be true or false,"
            f" got {'null' if flag is None else shown_value(flag)}"
        )
    return flag or not qa.get("answers")


def _claim(asked: dict[str, tuple[str, str]], query_id: str, qid: str, where: str) -> str | None:
    """Record that question ``where`` (id ``qid``) is ``query_id``; the error text when
    an earlier question holds it already (one question's figures would count twice or
    its label go to the other)."""
    first_where, first_qid = asked.setdefault(query_id, (where, qid))
    if first_where == where:
        return None
    both = "" if first_qid == qid else f" (both read as {query_id!r})"
    return (
        f"question {where} has id {qid!r}, as question {first_where} has {first_qid!r}"
        f"{both}; each question needs its own id"
    )


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
            or question is not a string, an article has no title, ``is_impossible``
            is not a boolean, two questions of a file share an id, or two paragraphs
            map to one doc id (one would overwrite the other).
    """
    documents: list[SourceDocument] = []
    queries: list[EvalQuery] = []
    doc_groups: dict[str, str] = {}
    asked: dict[str, tuple[str, str]] = {}  # query id -> the question holding it, its raw id
    blank = 0
    for n, article in enumerate(_articles(labelled, reword), 1):
        title = _title(labelled, article, n)
        for i, para in enumerate(_paragraphs(labelled, article, title)):
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
                impossible = unanswerable(qa, f"{labelled}: question {title}-{i}-{j}")
                query_id = safe_doc_id(f"q-{qid}")
                if (twice := _claim(asked, query_id, qid, f"{title}-{i}-{j}")) is not None:
                    raise InvalidEventError(f"{labelled}: {twice}")
                queries.append(
                    EvalQuery(
                        query_id=query_id,
                        text=text,
                        kind="near_miss" if impossible else "in_scope",
                        relevant=frozenset() if impossible else frozenset({doc_id}),
                        group=title,
                    )
                )
    check_unique_ids(documents)
    if out_of_scope is not None:
        corpus_titles = {q.group for q in queries}
        asked_outside: dict[str, tuple[str, str]] = {}
        for n, article in enumerate(_articles(out_of_scope, reword), 1):
            title = _title(out_of_scope, article, n)
            if title in corpus_titles:
                continue  # same article on both sides would not be out of scope
            for i, para in enumerate(_paragraphs(out_of_scope, article, title)):
                for j, qa in enumerate(para.get("qas", [])):
                    question = _question(out_of_scope, qa, f"{title}-{i}-{j}")
                    if question is None:
                        blank += 1
                        continue
                    query_id = safe_doc_id(f"o-{question[0]}")
                    twice = _claim(asked_outside, query_id, question[0], f"{title}-{i}-{j}")
                    if twice is not None:
                        raise InvalidEventError(f"{out_of_scope}: {twice}")
                    queries.append(
                        EvalQuery(
                            query_id=query_id,
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
