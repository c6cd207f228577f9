"""What ``eval`` reads besides the labelled set: a collection's held-out pseudo-queries
and extra documents (``--pseudo-queries``, ``--corpus``), the seeded limits on each kind
of question (``--max-*``), the corrective retrieval it replays when
``RAGSIFT_CORRECTIVE_ENABLED`` is set (B10), and the reranker it reorders the hits
with when ``RAGSIFT_RERANKER_KIND`` is set (the first-hit line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ragsift.cli.common import _run, print_error, print_skipped
from ragsift.cli.progress import _stage_progress
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = [
    "eval_correction",
    "eval_reranker",
    "first_hit_words",
    "first_hits_of",
    "limited",
    "with_pseudo_queries",
]


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


def eval_reranker(settings: Settings) -> Any:
    """The reranker ``RAGSIFT_RERANKER_KIND`` configures (None: off), built before the
    retrieval run so a bad setting costs no run; exit 2 when it cannot be built."""
    from ragsift.wiring import build_reranker

    try:
        return build_reranker(settings.reranker)
    except RagsiftError as exc:
        print_error(f"reranker: {exc}")
        raise typer.Exit(2) from exc


def first_hits_of(run: Any, evaluated: Any, settings: Settings, reranker: Any) -> dict[str, Any]:
    """How often each order puts the relevant hit first (``ragsift.evaluation.first_hit``);
    with a ``reranker`` (:func:`eval_reranker`), reordered by it too, then closed. Exit 2
    when it fails on a question."""
    from ragsift.evaluation.first_hit import RerankFailedError, first_hits

    async def measure() -> dict[str, Any]:
        try:
            with _stage_progress() as tick:
                return await first_hits(
                    run,
                    evaluated,
                    reranker,
                    candidates=settings.reranker.candidates,
                    progress=tick,
                )
        finally:
            if reranker is not None:
                await reranker.close()

    try:
        return _run(measure())
    except RerankFailedError as exc:
        print_error(f"reranker failed: {exc}")
        raise typer.Exit(2) from exc


def first_hit_words(first: dict[str, Any]) -> str:
    """The first-hit line under the eval table."""
    orders = [f"the retriever's order {first['retriever']:.3f}"]
    if first["dense"] is not None:
        orders.append(f"by cosine (a result's order) {first['dense']:.3f}")
    line = f"first hit relevant, {first['in_scope']} in-scope questions: " + ", ".join(orders)
    if first.get("reranked") is None:
        return line
    return (
        f"{line}, reranked by {first['reranker_id']} over the first"
        f" {first['reranked_window']} hits {first['reranked']:.3f} (the confidence figures"
        " above are scored without the reranker)"
    )
