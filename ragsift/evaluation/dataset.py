"""Labelled retrieval sets (:class:`LabelledSet`), their halves, holes and mixes.

SQuAD 2.0-format files are read by :mod:`ragsift.evaluation.squad`, BEIR folders
by :mod:`ragsift.evaluation.beir`, both into a :class:`LabelledSet`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import numpy as np

from ragsift.errors import InvalidEventError
from ragsift.ingest.loaders import SourceDocument, check_unique_ids, jsonl_rows

__all__ = [
    "EvalQuery",
    "LabelledSet",
    "QueryKind",
    "first_side",
    "left_out",
    "limit_out_of_scope",
    "limit_questions",
    "select_half",
    "split_groups",
    "with_holes",
    "with_pseudo_queries",
]

QueryKind = Literal["in_scope", "near_miss", "out_of_scope"]
OUT_OF_SCOPE_GROUP = "oos:"  # prefix of an out-of-scope question's group


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One labelled question."""

    query_id: str
    text: str
    kind: QueryKind
    relevant: frozenset[str]
    """Doc ids that answer it (empty for near-miss and out-of-scope questions)."""
    group: str
    """Article title (or query id): the unit of every split (no group on both sides)."""
    candidates: tuple[str, ...] | None = None
    """Doc ids this query is searched within (its own pool); None: the whole corpus."""


@dataclass(frozen=True, slots=True)
class LabelledSet:
    """A corpus and its labelled questions."""

    name: str
    documents: list[SourceDocument]
    queries: list[EvalQuery]
    doc_groups: dict[str, str] = field(default_factory=dict)
    """Doc id -> group, for sets whose corpus splits with its questions (SQuAD articles)."""
    notes: list[str] = field(default_factory=list)
    """What loading left out or assumed, for the user to see (a warning line each)."""

    def counts(self) -> dict[str, int]:
        """Questions per kind, plus the corpus size."""
        out = {"documents": len(self.documents)}
        for q in self.queries:
            out[q.kind] = out.get(q.kind, 0) + 1
        return out


def split_groups(groups: Iterable[str], fraction: float, seed: int = 0) -> set[str]:
    """A seeded share of the groups (sorted first, so the choice is stable across runs)."""
    ordered = sorted(set(groups))
    chosen = np.random.default_rng(seed).permutation(np.array(ordered, dtype=object))
    return {str(g) for g in chosen[: round(len(ordered) * fraction)]}


def first_side(groups: Iterable[str], fraction: float = 0.5, seed: int = 0) -> set[str]:
    """The groups on the first side of the seeded split that ``--half`` and the fit share.

    Labelled groups (articles) and out-of-scope groups are drawn apart, each side
    getting ``fraction`` of each. ``select_half`` (``--half 1``) and the fit of
    ``ragsift calibrate`` without ``--half`` take this side, so ``ragsift eval --half 2``
    reports on questions the fit never saw. (A single draw over both kinds put 3 of
    half 2's 8 SQuAD articles into the shipped fits until 2026-11-28: ADR 026.)
    """
    every = set(groups)
    outside = {g for g in every if g.startswith(OUT_OF_SCOPE_GROUP)}
    return split_groups(every - outside, fraction, seed) | split_groups(outside, fraction, seed)


def left_out(n_paragraphs: int, fraction: float, rng: random.Random) -> set[int]:
    """The paragraphs of one article that a corpus with holes leaves out.

    A seeded share ``fraction`` of the ``n_paragraphs`` (drawn from ``rng``), never the
    last one, so the article stays in the corpus and its other questions stay on topic.
    """
    dropped = set(rng.sample(range(n_paragraphs), round(n_paragraphs * fraction)))
    dropped.discard(n_paragraphs - 1)
    return dropped


def with_holes(dataset: LabelledSet, fraction: float, seed: int = 0) -> LabelledSet:
    """``dataset`` over a corpus that covers its articles in part, as a user's often does.

    A seeded share ``fraction`` of each article's paragraphs leaves the corpus
    (:func:`left_out`); the answerable questions written on them become near misses
    ("holes": on topic, the answer nowhere in the corpus). The set's own near misses
    leave, so every near miss is a hole. Articles are drawn in corpus order from
    ``random.Random(seed)``, as ``scripts/squad_to_beir.py --holes`` draws them, so
    both make the same holes.

    Raises:
        InvalidEventError: ``fraction`` outside [0, 1), or a set whose corpus records
            no articles (a BEIR folder: nothing says which paragraphs belong together).
    """
    if not 0.0 <= fraction < 1.0:
        raise InvalidEventError(f"the holes share must be in [0, 1), got {fraction}")
    if fraction == 0.0:
        return dataset
    if not dataset.doc_groups:
        raise InvalidEventError(
            f"{dataset.name}: holes need articles (a SQuAD-format set); this corpus records none"
        )
    articles: dict[str, list[str]] = {}
    for doc in dataset.documents:
        articles.setdefault(dataset.doc_groups.get(doc.doc_id, doc.doc_id), []).append(doc.doc_id)
    rng = random.Random(seed)
    dropped = {ids[i] for ids in articles.values() for i in left_out(len(ids), fraction, rng)}
    queries: list[EvalQuery] = []
    for q in dataset.queries:
        if q.kind == "near_miss":
            continue
        if q.relevant & dropped:
            q = replace(q, kind="near_miss", relevant=frozenset())
        queries.append(q)
    return replace(
        dataset,
        name=f"{dataset.name} with {fraction:.0%} holes",
        documents=[d for d in dataset.documents if d.doc_id not in dropped],
        queries=queries,
        doc_groups={d: g for d, g in dataset.doc_groups.items() if d not in dropped},
    )


def select_half(dataset: LabelledSet, half: Literal[1, 2], seed: int = 0) -> LabelledSet:
    """Half 1 or 2 of a set, split by group: the halves share no article and no question.

    Labelled groups and out-of-scope groups are split separately (each half
    gets about half of each); a document goes with its group when the set
    records one (SQuAD paragraphs), else the corpus is kept whole (BEIR).
    """
    every = {q.group for q in dataset.queries}
    first = first_side(every, 0.5, seed)
    keep = first if half == 1 else every - first
    queries = [q for q in dataset.queries if q.group in keep]
    documents = [
        d
        for d in dataset.documents
        if d.doc_id not in dataset.doc_groups or dataset.doc_groups[d.doc_id] in keep
    ]
    return replace(
        dataset, name=f"{dataset.name} half {half}", documents=documents, queries=queries
    )


def with_pseudo_queries(
    dataset: LabelledSet, path: Path, extra: Iterable[SourceDocument] = ()
) -> LabelledSet:
    """``dataset`` with its in-scope questions replaced by pseudo-queries from ``path``.

    ``path`` is the JSONL ``ragsift calibrate --collection --held-out`` writes (``text``,
    ``doc_id``: the chunk's document is the relevant one). The set's out-of-scope
    questions stay; its own labelled and near-miss questions go. ``extra``
    documents join the corpus (e.g. the demo handbook the collection also holds).

    Raises:
        InvalidEventError: the file is unreadable, a line is malformed, or it names a
            document the corpus does not hold.
    """
    documents = [*dataset.documents, *extra]
    check_unique_ids(documents)
    known = {d.doc_id for d in documents}
    queries: list[EvalQuery] = []
    try:
        rows = list(jsonl_rows(path))
    except OSError as exc:
        raise InvalidEventError(f"{path}: cannot read pseudo-queries ({exc})") from exc
    for lineno, row in rows:
        if not (
            isinstance(row, dict)
            and isinstance(row.get("text"), str)
            and isinstance(row.get("doc_id"), str)
        ):
            raise InvalidEventError(f"{path}:{lineno}: needs string 'text' and 'doc_id' fields")
        if row["doc_id"] not in known:
            raise InvalidEventError(
                f"{path}:{lineno}: doc {row['doc_id']!r} is not in the corpus; evaluate on the"
                " corpus the collection was built from (--labelled plus --corpus)"
            )
        queries.append(
            EvalQuery(
                query_id=f"p-{lineno}",
                text=row["text"],
                kind="in_scope",
                relevant=frozenset({row["doc_id"]}),
                group=row["doc_id"],
            )
        )
    if not queries:
        raise InvalidEventError(f"{path}: no pseudo-queries")
    queries.extend(q for q in dataset.queries if q.kind == "out_of_scope")
    return replace(
        dataset, name=f"{dataset.name} + pseudo-queries", documents=documents, queries=queries
    )


def limit_out_of_scope(dataset: LabelledSet, limit: int, seed: int = 0) -> LabelledSet:
    """``dataset`` with at most ``limit`` out-of-scope questions (a seeded sample).

    Selective risk depends on the mix of answerable and unanswerable questions: a
    set with 40 out-of-scope questions per in-scope one measures another traffic
    than the calibration assumed. This sets the mix explicitly.

    Raises:
        InvalidEventError: ``limit`` < 0.
    """
    return limit_questions(dataset, "out_of_scope", limit, seed)


def limit_questions(dataset: LabelledSet, kind: str, limit: int, seed: int = 0) -> LabelledSet:
    """``dataset`` with at most ``limit`` questions of ``kind`` (a seeded sample).

    Raises:
        InvalidEventError: ``limit`` < 0.
    """
    if limit < 0:
        raise InvalidEventError(f"the {kind.replace('_', '-')} limit must be >= 0, got {limit}")
    chosen = [i for i, q in enumerate(dataset.queries) if q.kind == kind]
    if len(chosen) <= limit:
        return dataset
    keep = set(np.random.default_rng(seed).choice(chosen, size=limit, replace=False).tolist())
    queries = [q for i, q in enumerate(dataset.queries) if q.kind != kind or i in keep]
    return replace(dataset, queries=queries)
