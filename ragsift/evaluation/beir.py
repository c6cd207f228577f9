"""Labelled retrieval sets from a BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/``.

The layout (https://github.com/beir-cellar/beir):

* ``corpus.jsonl``: one document per line, ``{"_id", "title", "text"}``; the
  indexed text is the title and the text (BEIR's own convention for dense
  models), the doc id is ``safe_doc_id(_id)``;
* ``queries.jsonl``: ``{"_id", "text"}`` per line (all splits' queries). An id
  names one question: a line repeating an earlier one exactly (same id, same
  text) is read once and counted in the set's ``notes``; the same id with other
  text is an error (which question the qrels judge is unknown);
* ``qrels/<split>.tsv``: ``query-id<TAB>corpus-id<TAB>score``, after a header
  line or not (a first line whose score is not an integer is a header). Only the
  split's queries are used: one with a score > 0 is in scope (those docs answer
  it); one judged with only zero scores is a near miss. A judged query that
  ``queries.jsonl`` lacks is left out and named in the set's ``notes``. A pair
  judged twice must get one score (a repeated line is harmless; two scores are
  an error: the first or the last would decide relevance silently).

Optional per-query candidate pools (for sets built as "find the answer among
these passages"): ``candidates.jsonl`` with ``{"query_id", "doc_ids": [...]}``
per line (a query's pool on one line; a repeat with another list is an error),
or ``pool="qrels"`` to use every doc the qrels judge for the query
(zero scores included). A pooled query is searched only within its pool.
Out-of-scope questions come from a separate ``queries.jsonl``-format file
and are searched in the whole corpus (they have no pool).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from ragsift.errors import InvalidEventError
from ragsift.evaluation.dataset import OUT_OF_SCOPE_GROUP, EvalQuery, LabelledSet
from ragsift.ingest.loaders import SourceDocument, check_unique_ids, jsonl_rows, safe_doc_id

__all__ = ["CANDIDATES_FILE", "Pool", "is_beir_folder", "load_beir"]

CANDIDATES_FILE = "candidates.jsonl"
Pool = Literal["auto", "corpus", "qrels", "candidates"]


def is_beir_folder(path: Path) -> bool:
    """Whether ``path`` looks like a BEIR dataset folder."""
    return path.is_dir() and (path / "corpus.jsonl").is_file()


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise InvalidEventError(f"{path}: missing (a BEIR folder needs it)")
    for lineno, row in jsonl_rows(path):
        if not isinstance(row, dict):
            raise InvalidEventError(f"{path}:{lineno}: each line must be a JSON object")
        yield lineno, row


def _field(path: Path, lineno: int, row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():  # whitespace alone is no question
        raise InvalidEventError(f"{path}:{lineno}: needs a non-empty string {name!r}")
    return value


def _same(text: str) -> str:
    """A question's text as compared across files: case and spacing aside."""
    return " ".join(text.casefold().split())


def _once(
    seen: dict[str, tuple[int, object]],
    query_id: str,
    field: str,
    row: dict[str, Any],
    where: tuple[Path, int],
) -> bool:
    """Whether ``where`` (file, line) is the first line naming ``query_id``; False for a
    line repeating an earlier one's ``field`` exactly, to be read once.

    Raises:
        InvalidEventError: ``query_id`` came earlier with another ``field``: one of the
            two would be taken silently.
    """
    path, lineno = where
    first, before = seen.setdefault(query_id, (lineno, row.get(field)))
    if first == lineno:
        return True
    if before == row.get(field):
        return False
    raise InvalidEventError(
        f"{path}:{lineno}: query id {query_id!r} is on line {first} too, with another {field!r};"
        " one id names one question"
    )


def _queries(path: Path, repeats: list[str]) -> Iterator[tuple[int, dict[str, Any], str]]:
    """The lines of a ``queries.jsonl``-format file with their ids, each id once: a
    line repeating an earlier one exactly is passed over, its id appended to ``repeats``.

    Raises:
        InvalidEventError: a malformed line, or an id on two lines with other text.
    """
    seen: dict[str, tuple[int, object]] = {}
    for lineno, row in _jsonl(path):
        query_id = _field(path, lineno, row, "_id")
        if _once(seen, query_id, "text", row, (path, lineno)):
            yield lineno, row, query_id
        else:
            repeats.append(query_id)


def _repeated(path: Path, repeats: list[str]) -> list[str]:
    """The note saying which lines of ``path`` repeated a query, if any did."""
    if not repeats:
        return []
    lines = "line repeats" if len(repeats) == 1 else "lines repeat"
    return [
        f"{path}: {len(repeats)} {lines} an earlier query (same id and text), read once"
        f" (first: {repeats[0]!r})"
    ]


def _corpus(folder: Path) -> tuple[list[SourceDocument], dict[str, str]]:
    documents: list[SourceDocument] = []
    ids: dict[str, str] = {}  # BEIR id -> ragsift doc id
    path = folder / "corpus.jsonl"
    for lineno, row in _jsonl(path):
        raw = _field(path, lineno, row, "_id")
        title = row.get("title") if isinstance(row.get("title"), str) else ""
        text = row.get("text")
        if not isinstance(text, str):
            raise InvalidEventError(f"{path}:{lineno}: needs a string 'text'")
        ids[raw] = safe_doc_id(raw)
        documents.append(
            SourceDocument(
                doc_id=ids[raw],
                text=f"{title}\n\n{text}" if title else text,
                title=title or None,
                source=f"beir:{raw}",
                source_type="third_party",
            )
        )
    return check_unique_ids(documents), ids


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        splits = sorted(p.stem for p in path.parent.glob("*.tsv"))
        have = (
            f"this folder has qrels for {', '.join(splits)} (--split {splits[0]})"
            if splits
            else f"{path.parent} holds no qrels file"
        )
        raise InvalidEventError(f"{path}: missing; {have}")
    out: dict[str, dict[str, int]] = {}
    judged_on: dict[tuple[str, str], int] = {}  # (query, doc) -> the line judging it first
    with path.open(encoding="utf-8-sig", newline="") as handle:  # with a BOM or without
        reader = csv.reader(handle, delimiter="\t")
        try:
            for lineno, row in enumerate(reader, 1):
                if not row:
                    continue
                try:
                    query_id, doc_id, score = row[0], row[1], int(row[2])
                except (IndexError, ValueError) as exc:
                    if lineno == 1 and len(row) >= 3 and not row[2].strip().lstrip("-").isdigit():
                        continue  # a header line, whatever its column names
                    raise InvalidEventError(
                        f"{path}:{lineno}: expected query-id, corpus-id, integer score"
                    ) from exc
                scores = out.setdefault(query_id, {})
                first = judged_on.setdefault((query_id, doc_id), lineno)
                if first != lineno and scores[doc_id] != score:
                    raise InvalidEventError(
                        f"{path}:{lineno}: query {query_id!r}, doc {doc_id!r} is judged"
                        f" {score} here and {scores[doc_id]} on line {first};"
                        " a pair takes one score"
                    )
                scores[doc_id] = score
        except UnicodeDecodeError as exc:
            raise InvalidEventError(f"{path}: not UTF-8 text ({exc.reason})") from exc
        except csv.Error as exc:  # a field past csv's size limit, a NUL byte
            raise InvalidEventError(f"{path}:{reader.line_num}: not TSV ({exc})") from exc
    return out


def _doc(ids: dict[str, str], raw: str, where: str) -> str:
    try:
        return ids[raw]
    except KeyError:
        raise InvalidEventError(f"{where}: doc {raw!r} is not in corpus.jsonl") from None


def load_beir(
    folder: Path,
    *,
    split: str = "test",
    out_of_scope: Path | None = None,
    pool: Pool = "auto",
) -> LabelledSet:
    """Read a BEIR folder (see module doc); ``pool="auto"`` uses candidates.jsonl if present.

    Raises:
        InvalidEventError: a file is missing or malformed, qrels or pools name a
            doc the corpus lacks, two corpus ids map to one doc id, a query id
            names two texts, a query-doc pair is judged with two scores, a query has
            two pools, or no query of the split is left.
    """
    documents, ids = _corpus(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels = _qrels(qrels_path)
    if pool == "auto":
        pool = "candidates" if (folder / CANDIDATES_FILE).is_file() else "corpus"
    pools: dict[str, tuple[str, ...]] = {}
    if pool == "candidates":
        cand_path = folder / CANDIDATES_FILE
        pooled: dict[str, tuple[int, object]] = {}
        for lineno, row in _jsonl(cand_path):
            query_id = _field(cand_path, lineno, row, "query_id")
            doc_ids = row.get("doc_ids")
            if not isinstance(doc_ids, list) or not doc_ids:
                raise InvalidEventError(f"{cand_path}:{lineno}: needs a non-empty 'doc_ids' list")
            # as corpus ids: strings or integers (str() made NaN doc "nan", 1e999 "inf")
            if any(isinstance(d, bool) or not isinstance(d, str | int) for d in doc_ids):
                raise InvalidEventError(
                    f"{cand_path}:{lineno}: 'doc_ids' must hold strings or integers"
                )
            _once(pooled, query_id, "doc_ids", row, (cand_path, lineno))
            where = f"{cand_path}:{lineno}"
            pools[query_id] = tuple(_doc(ids, str(d), where) for d in doc_ids)
    elif pool == "qrels":
        pools = {
            q: tuple(_doc(ids, d, str(qrels_path)) for d in judged) for q, judged in qrels.items()
        }
    queries: list[EvalQuery] = []
    queries_path = folder / "queries.jsonl"
    asked: set[str] = set()
    repeats: list[str] = []
    for lineno, row, query_id in _queries(queries_path, repeats):
        judged = qrels.get(query_id)
        if judged is None:
            continue  # a query of another split
        asked.add(query_id)
        relevant = frozenset(
            _doc(ids, d, str(qrels_path)) for d, score in judged.items() if score > 0
        )
        queries.append(
            EvalQuery(
                query_id=query_id,
                text=_field(queries_path, lineno, row, "text"),
                kind="in_scope" if relevant else "near_miss",
                relevant=relevant,
                group=query_id,
                candidates=pools.get(query_id),
            )
        )
    also_asked: list[str] = []
    oos_repeats: list[str] = []
    if out_of_scope is not None:
        # A question of the set is no out-of-scope question, whatever a file says: the
        # same text would be scored once as each (as SQuAD's loader skips an article on
        # both sides).
        texts = {_same(q.text) for q in queries}
        for lineno, row, query_id in _queries(out_of_scope, oos_repeats):
            text = _field(out_of_scope, lineno, row, "text")
            if _same(text) in texts:
                also_asked.append(query_id)
                continue
            queries.append(
                EvalQuery(
                    query_id=f"oos-{query_id}",
                    text=text,
                    kind="out_of_scope",
                    relevant=frozenset(),
                    group=f"{OUT_OF_SCOPE_GROUP}{query_id}",
                )
            )
    if not queries:
        raise InvalidEventError(f"{folder}: no query of split {split!r} is in queries.jsonl")
    unasked = sorted(set(qrels) - asked)
    notes = _repeated(queries_path, repeats)
    if out_of_scope is not None:
        notes += _repeated(out_of_scope, oos_repeats)
    if also_asked:
        are = "question is" if len(also_asked) == 1 else "questions are"
        notes.append(
            f"{out_of_scope}: {len(also_asked)} out-of-scope {are} also in queries.jsonl,"
            f" left out (first: {also_asked[0]!r})"
        )
    if unasked:
        are = "query is" if len(unasked) == 1 else "queries are"
        notes.append(
            f"{qrels_path}: {len(unasked)} judged {are} not in queries.jsonl,"
            f" left out (first: {unasked[0]!r})"
        )
    return LabelledSet(f"{folder.name}/{split}", documents, queries, notes=notes)
