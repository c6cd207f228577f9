"""The labelled-set options, loading and retrieval runs that ``eval`` and ``calibrate``
share: which set (SQuAD files or a BEIR folder), which half, which holes, which
features a fit uses and what a run must read for them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ragsift.cli.common import (
    _run,
    _settings,
    err_console,
    print_error,
    print_warning,
)
from ragsift.cli.progress import _stage_progress
from ragsift.errors import RagsiftError

__all__ = ["SQUAD_DIR"]


SQUAD_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "squad2"


def _load_dataset(
    dataset: str | None,
    labelled: Path | None,
    out_of_scope: Path | None,
    split: str,
    pool: str,
    half: int | None,
    holes: float,
    reword: float,
) -> Any:
    """The labelled set named on the command line (SQuAD files or a BEIR folder), or exit 2.

    Its arguments are the options of the same names ``calibrate`` and ``eval`` share."""
    from ragsift.evaluation import is_beir_folder, load_beir, load_squad, select_half
    from ragsift.evaluation.dataset import with_holes

    beir: Path | None = None
    if dataset is not None:
        if dataset == "squad2":
            base = Path(os.environ.get("RAGSIFT_SQUAD2_DIR", SQUAD_DIR))
            labelled, out_of_scope = base / "dev-v2.0.json", base / "test-v2.0.json"
        elif is_beir_folder(Path(dataset)):
            beir = Path(dataset)
        else:
            print_error(
                f"--dataset {dataset!r} is neither squad2 nor a BEIR folder"
                " (a folder with corpus.jsonl, queries.jsonl and qrels/)"
            )
            raise typer.Exit(2)
    if beir is None and labelled is None:
        print_error("give --dataset squad2|BEIR_FOLDER or --labelled FILE")
        raise typer.Exit(2)
    for path in (labelled, out_of_scope):
        if path is not None and not path.is_file():
            print_error(f"no such file: {path}")
            raise typer.Exit(2)
    if pool not in ("auto", "corpus", "qrels", "candidates"):
        print_error("--pool must be auto, corpus, qrels or candidates")
        raise typer.Exit(2)
    if reword and beir is not None:
        print_error(
            "--reword: SQuAD-format sets only (a question is reworded against its"
            " paragraph's words; a BEIR folder's questions have none)"
        )
        raise typer.Exit(2)
    try:
        if beir is not None:
            ds = load_beir(beir, split=split, out_of_scope=out_of_scope, pool=pool)  # type: ignore[arg-type]  # checked above
        else:
            assert labelled is not None
            ds = load_squad(labelled, out_of_scope, reword=reword)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    for note in ds.notes:
        print_warning(note)
    if half is not None:
        if half not in (1, 2):
            print_error(f"--half must be 1 or 2, got {half}")
            raise typer.Exit(2)
        ds = select_half(ds, 1 if half == 1 else 2)
    try:
        return with_holes(ds, holes)
    except RagsiftError as exc:
        print_error(f"--holes: {exc}")
        raise typer.Exit(2) from exc


def _retrieval_runs(
    ds: Any,
    k: int,
    modes: tuple[str, ...],
    reads: frozenset[str] = frozenset(),
    correction: Any = None,
    vector_cache: Path | None = None,
) -> dict[str, Any]:
    """Retrieve every question in each of ``modes``, embedding everything once; with
    ``reads`` (reader features), read the hits too; with ``correction`` (B10), retry
    the weak or split ones once; with ``vector_cache``, vectors kept there by an
    earlier run are not embedded again."""

    from ragsift.evaluation.probes import PROBE_GROUP
    from ragsift.evaluation.runner import run_retrievals
    from ragsift.evaluation.vector_cache import CachedVectors, with_vector_cache
    from ragsift.retrieval.reader import Reader
    from ragsift.wiring import build_embedder

    settings = _settings()
    embedder = with_vector_cache(build_embedder(settings.embedder), vector_cache)
    reader = (
        Reader.of_features(embedder, reads, top_n=settings.confidence.reader_top_n)
        if reads
        else None
    )
    counts = ds.counts()
    pooled = sum(q.candidates is not None for q in ds.queries)
    # The probes ride along as out-of-scope rows (searched, never scored): counted apart,
    # so the line says how many of the set's own questions are evaluated.
    probes = sum(q.group.startswith(PROBE_GROUP) for q in ds.queries)
    err_console.print(
        f"{ds.name}: {counts['documents']} documents, {counts.get('in_scope', 0)} in-scope,"
        f" {counts.get('near_miss', 0)} near-miss,"
        f" {counts.get('out_of_scope', 0) - probes} out-of-scope questions"
        f"{f' ({pooled} searched in their own pools)' if pooled else ''}"
        f"{f', and {probes} probes (searched, not scored)' if probes else ''};"
        f" embedder {embedder.embedder_id}"
    )
    with _stage_progress() as tick:
        runs = _run(
            run_retrievals(
                ds, embedder, k=k, modes=modes, progress=tick, reader=reader, corrective=correction
            )
        )
    if isinstance(embedder, CachedVectors):
        embedder.close()
        err_console.print(
            f"vector cache {embedder.path}: {embedder.hits} vectors read from it,"
            f" {embedder.misses} texts embedded now"
        )
    return runs


def _fit_features(settings: Any) -> tuple[str, ...]:
    """The features a calibration fits: term coverage always; sentence match, and token
    match with the ONNX embedder (the one that gives token states), with
    RAGSIFT_CONFIDENCE_READER_SIGNALS=on (ADR 020, ADR 041)."""
    from ragsift.confidence.features import DEFAULT_FEATURES
    from ragsift.evaluation.scoring import READER_SIGNAL_FEATURES, SHIPPED_FEATURES

    if settings.confidence.reader_signals == "on":
        tokens = settings.embedder.kind == "onnx"
        reader = (f for f in READER_SIGNAL_FEATURES if tokens or f != "token_match")
        return (*DEFAULT_FEATURES, *reader)
    return SHIPPED_FEATURES


def _reads(features: Any) -> frozenset[str]:
    """The reader signals a run must read for these features."""
    from ragsift.confidence.features import READER_FEATURES

    return READER_FEATURES.intersection(features)


Dataset = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="squad2 (the bundled SQuAD 2.0 files) or a BEIR folder"
        " (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv; docs/evaluation.md).",
    ),
]
Labelled = Annotated[
    Path | None, typer.Option("--labelled", help="A SQuAD 2.0-format file (corpus + labels).")
]
OutOfScope = Annotated[
    Path | None,
    typer.Option(
        "--out-of-scope",
        help="Out-of-scope questions: a SQuAD-format file, or queries.jsonl format for BEIR.",
    ),
]
Split = Annotated[str, typer.Option("--split", help="BEIR qrels split (qrels/SPLIT.tsv).")]
VectorCache = Annotated[
    Path | None,
    typer.Option(
        "--vector-cache",
        help="Keep the corpus's and questions' vectors in this folder (a SQLite file per"
        " embedder: a hash of each text and its vector, never the text), and embed only"
        " what an earlier run did not. Off by default (docs/evaluation.md).",
    ),
]
PoolOption = Annotated[
    str,
    typer.Option(
        "--pool",
        help="BEIR: where each query searches. auto = candidates.jsonl if present, else"
        " corpus; qrels = the docs its qrels judge; candidates = candidates.jsonl.",
    ),
]
Half = Annotated[
    int | None,
    typer.Option(
        "--half",
        help="Keep half 1 or 2 of the articles (seeded split by title; SQuAD corpus and"
        " out-of-scope articles split too): calibrate on one, eval on the other.",
    ),
]
Holes = Annotated[
    float,
    typer.Option(
        "--holes",
        help="SQuAD-format sets: leave this share of each article's paragraphs out of the"
        " corpus; their answerable questions become near misses (on topic, answer"
        " missing) and the set's own near misses leave. calibrate fits them as"
        " unanswered (docs/evaluation.md).",
    ),
]
Reword = Annotated[
    float,
    typer.Option(
        "--reword",
        min=0.0,
        max=1.0,
        help="SQuAD-format sets: swap this share of each question's content words that"
        " its paragraph uses for WordNet synonyms it does not (seeded; out-of-scope"
        " questions too), as a user asks who has not read the passage (ADR 042). The"
        " shipped calibrations are fit without it (ADR 043).",
    ),
]
SearchModeOption = Annotated[
    Literal["hybrid", "dense", "keyword"],
    typer.Option(
        "--mode",
        help="How every question is searched, as a query event's mode says: hybrid (BM25"
        " and dense, the default), dense, or keyword (scored with the artifact's"
        " keyword model, ADR 029).",
    ),
]
