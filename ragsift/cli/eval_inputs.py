"""What ``eval`` reads besides the labelled set: a collection's held-out pseudo-queries
and extra documents (``--pseudo-queries``, ``--corpus``), the seeded limits on each kind
of question (``--max-*``), and the corrective retrieval it replays when
``RAGSIFT_CORRECTIVE_ENABLED`` is set (B10)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ragsift.cli.common import print_error, print_skipped
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = ["eval_correction", "limited", "with_pseudo_queries"]


def with_pseudo_queries(ds: Any, pseudo_queries: Path | None, corpus: Path | None) -> Any:
    """``eval --pseudo-queries/--corpus``: a collection's held-out test questions as in-scope."""
    from ragsift.evaluation.dataset import with_pseudo_queries as held_out_in_scope
    from ragsift.ingest.loaders import iter_documents

    if pseudo_queries is None:
        print_error("--corpus needs --pseudo-queries")
        raise typer.Exit(2)
    skipped: list[tuple[Path, str]] = []
    try:
        extra = list(iter_documents(corpus, skipped=skipped)) if corpus is not None else []
        if corpus is not None:
            print_skipped(corpus, skipped)
        return held_out_in_scope(ds, pseudo_queries, extra)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc


def eval_correction(settings: Settings, artifact: Any) -> Any:
    """B10 in eval when RAGSIFT_CORRECTIVE_ENABLED is set; it needs the artifact it is
    judged by, so only with --artifact."""
    if not settings.corrective.enabled:
        return None
    if artifact is None:
        print_error(
            "RAGSIFT_CORRECTIVE_ENABLED=1 in eval needs --artifact: the"
            " retry is kept or not by that artifact's confidence"
        )
        raise typer.Exit(2)
    from ragsift.evaluation.corrective import EvalCorrection

    try:
        return EvalCorrection(
            settings.corrective, artifact, artifact.embedder_id, max_k=settings.limits.max_k
        )
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc


def limited(ds: Any, **limits: int | None) -> Any:
    """``ds`` with at most ``limits[kind]`` seeded questions of each kind given, or exit 2."""
    from ragsift.evaluation.dataset import limit_questions

    for kind, limit in limits.items():
        if limit is None:
            continue
        try:
            ds = limit_questions(ds, kind, limit)
        except RagsiftError as exc:
            print_error(str(exc))
            raise typer.Exit(2) from exc
    return ds
