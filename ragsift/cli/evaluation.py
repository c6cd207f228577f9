"""Measuring confidence on labelled sets: ``eval`` (the options and loading it shares
with ``calibrate`` are in :mod:`ragsift.cli.labelled`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragsift.cli.common import (
    _check_writable,
    _settings,
    console,
    plain_console,
    print_error,
    print_warning,
)
from ragsift.cli.eval_inputs import (
    eval_correction,
    eval_reranker,
    first_hit_words,
    first_hits_of,
    limited,
    with_pseudo_queries,
)
from ragsift.cli.labelled import (
    SQUAD_DIR,
    Dataset,
    Half,
    Holes,
    Labelled,
    OutOfScope,
    PoolOption,
    Reword,
    SearchModeOption,
    Split,
    VectorCache,
    _fit_features,
    _load_dataset,
    _reads,
    _retrieval_runs,
)
from ragsift.cli.render import eval_table, orders_words
from ragsift.cli.replay import (
    ArrivalOrders,
    Feedback,
    FeedbackAfresh,
    FeedbackBias,
    FeedbackDraws,
    FeedbackFrom,
    check_feedback_options,
    draws_words,
    feedback_words,
    replay_feedback,
)
from ragsift.confidence.fit_groups import in_sample_count
from ragsift.schemas import MAX_K

__all__ = ["SQUAD_DIR", "evaluate"]


def evaluate(
    dataset: Dataset = None,
    labelled: Labelled = None,
    out_of_scope: OutOfScope = None,
    split: Split = "test",
    pool: PoolOption = "auto",
    half: Half = None,
    holes: Holes = 0.0,
    reword: Reword = 0.0,
    artifact_path: Annotated[
        Path | None,
        typer.Option(
            "--artifact",
            help="Apply this calibration artifact to every question (no refit). Without it,"
            " the calibration is refit on half the articles and reported on the other half.",
        ),
    ] = None,
    near_miss_negatives: Annotated[
        bool,
        typer.Option(
            "--near-miss-negatives",
            help="Score near-miss (is_impossible) questions as negatives in every figure.",
        ),
    ] = False,
    per_query: Annotated[
        Path | None,
        typer.Option("--per-query", help="Write one JSON line per evaluated question here."),
    ] = None,
    pseudo_queries: Annotated[
        Path | None,
        typer.Option(
            "--pseudo-queries",
            help="Use these as the in-scope questions (the --held-out file of `ragsift"
            " calibrate --collection`); the set's out-of-scope questions stay.",
        ),
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus", help="Add these documents (a file or folder, as `ragsift ingest`)."
        ),
    ] = None,
    max_out_of_scope: Annotated[
        int | None,
        typer.Option(
            "--max-out-of-scope",
            help="Keep at most this many out-of-scope questions (seeded sample): risk"
            " depends on the mix of answerable and unanswerable questions.",
        ),
    ] = None,
    max_in_scope: Annotated[
        int | None,
        typer.Option(
            "--max-in-scope",
            help="Keep at most this many in-scope questions (seeded sample), e.g. to"
            " measure a stream that is mostly unanswerable.",
        ),
    ] = None,
    max_near_miss: Annotated[
        int | None,
        typer.Option(
            "--max-near-miss",
            help="Keep at most this many near-miss questions (seeded sample); they are"
            " part of the stream the answer threshold's mix is estimated from.",
        ),
    ] = None,
    probes_source: Annotated[
        str,
        typer.Option(
            "--probes",
            help="Re-certify --artifact's answer threshold on this corpus first, as `ragsift"
            " ingest` and `calibrate --collection` do: 'auto' (the default: the bundled bank"
            " when the artifact can be re-certified, as the service does after an ingest),"
            " 'bundled', 'none', or a file of questions the corpus does not answer (.jsonl"
            " with text/group, or .txt). They are searched, not evaluated; they must not be"
            " among the evaluated questions.",
            metavar="auto|bundled|none|FILE",
        ),
    ] = "auto",
    feedback: Feedback = None,
    feedback_from: FeedbackFrom = "all",
    feedback_bias: FeedbackBias = 1.0,
    feedback_draws: FeedbackDraws = 1,
    feedback_afresh: FeedbackAfresh = False,
    arrival_orders: ArrivalOrders = 1,
    k: Annotated[int, typer.Option(help="Hits retrieved per question.", min=1, max=MAX_K)] = 8,
    mode: SearchModeOption = "hybrid",
    vector_cache: VectorCache = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure the confidence scores on a labelled dataset: ranking, calibration, answer
    rate and risk at the answer threshold, the calibrated scorer against the simple rules.

    With RAGSIFT_CORRECTIVE_ENABLED=1 and --artifact: corrective retrieval (docs/corrective.md).
    With RAGSIFT_RERANKER_KIND set: how often the reranker's first hit is the relevant one,
    beside the retriever's and the cosine order (the confidence is scored without it)."""
    import numpy as np

    from ragsift.cli.probing import eval_probes, probe_certified, with_probe_rows
    from ragsift.confidence import ConfidenceError, load_calibration
    from ragsift.evaluation import evaluate_scorers, fit_from_run
    from ragsift.evaluation.keyword_probes import keyword_probed
    from ragsift.evaluation.mix import hybrid_reads
    from ragsift.evaluation.scoring import KEYWORD_UNREAD

    check_feedback_options(
        feedback, feedback_from, feedback_bias, feedback_draws, mode, afresh=feedback_afresh
    )
    ds = _load_dataset(dataset, labelled, out_of_scope, split, pool, half, holes, reword)
    if pseudo_queries is not None or corpus is not None:
        ds = with_pseudo_queries(ds, pseudo_queries, corpus)
    ds = limited(ds, out_of_scope=max_out_of_scope, in_scope=max_in_scope, near_miss=max_near_miss)
    _check_writable(per_query, "--per-query")
    settings = _settings()
    artifact = None
    in_sample: int | None = None
    if artifact_path is not None:
        from ragsift.wiring import build_embedder

        try:
            artifact = load_calibration(
                artifact_path,
                embedder_id=build_embedder(settings.embedder).embedder_id,
                metric="cosine",
            )
        except (OSError, ConfidenceError) as exc:
            print_error(f"{artifact_path}: {exc}")
            raise typer.Exit(2) from exc
    features = _fit_features(settings) if artifact is None else artifact.features
    reads = _reads(features)
    probes, probes_source = eval_probes(probes_source, artifact, ds.queries)
    correction = eval_correction(settings, artifact)
    reranker = eval_reranker(settings)  # before the run: a bad setting costs no retrieval
    # The service probes a collection with hybrid searches, whatever its queries' mode;
    # a keyword query is held to the mix its scope's hybrid traffic shows (ADR 029).
    hybrid_too = probes or (mode == "keyword" and artifact is not None)
    modes = (mode,) if mode == "hybrid" or not hybrid_too else (mode, "hybrid")
    runs = _retrieval_runs(with_probe_rows(ds, probes), k, modes, reads, correction, vector_cache)
    run, probe_run = runs[mode], runs["hybrid" if probes else mode]
    if artifact is None:
        if mode == "keyword":  # what a keyword-only query can read (ADR 029)
            features = tuple(f for f in features if f not in KEYWORD_UNREAD)
        try:
            artifact, fit = fit_from_run(run, features=features, near_miss_negatives=holes > 0)
        except ConfidenceError as exc:  # too few questions, one kind only: the data's fault
            print_error(f"cannot fit on {run.dataset.name}: {exc}")
            raise typer.Exit(2) from exc
        evaluated = ~fit
        how = "refit on half (fit on half the articles, reported on the other half)"
    else:
        if mode == "keyword" and artifact.keyword is None:
            print_error(
                f"{artifact_path}: fit before keyword-only queries had a model of their own"
                " (ADR 029); refit it with `ragsift calibrate`"
            )
            raise typer.Exit(2)
        evaluated = np.ones(len(run.queries), dtype=bool)
        how = (
            f"applied artifact {artifact_path} ({artifact.version}, fit on {artifact.data.source})"
        )
        in_sample = in_sample_count(artifact.data.fit_groups, (q.group for q in ds.queries))
        if in_sample:  # ADR 026: the shipped fits once held 3 of --half 2's 8 articles
            print_warning(
                f"{in_sample} of {len(ds.queries)} questions come from articles this artifact"
                " was fit on: their figures are in sample, not a measure of transfer"
            )
    probed = None
    if probes:
        artifact, probed = probe_certified(probe_run, artifact, probes, probes_source)
        evaluated[len(ds.queries) :] = False
        if probed["applied"]:
            how += f", re-certified on this corpus with {len(probes)} probes ({artifact.version})"
        if probed["applied"] and mode == "keyword":  # the probes searched keyword-only too
            artifact, probed["keyword"] = keyword_probed(run, artifact, probes)
    served: dict[str, Any] = {
        "near_miss_negatives": near_miss_negatives,
        "unanswerable_share": settings.confidence.unanswerable_share,
        "near_miss": settings.confidence.near_miss == "auto",
        "mix_lower": settings.confidence.mix_lower == "auto",
    }
    replayed = history = None
    if feedback is not None:
        artifact, replayed, history = replay_feedback(
            run,
            artifact,
            evaluated,
            feedback,
            feedback_from,
            served,
            feedback_bias,
            feedback_draws,
            carried=not feedback_afresh,
        )
        if replayed["withheld"] is None:
            how += f", re-fit on {feedback} feedback labels ({artifact.version})"
        else:  # ADR 031
            how += f", its re-fit on {feedback} feedback labels withheld (too few labels)"
    keyword = artifact.keyword_model() if mode == "keyword" else None
    watched = None
    if keyword is not None:
        # Served as the pipeline serves a keyword-only query: the artifact's keyword
        # model, with the collection's alignment (the probes' re-map is the hybrid one's),
        # at the mix the same questions show searched hybrid.
        watched = (artifact, hybrid_reads(runs["hybrid"], artifact, evaluated))
        artifact = keyword
    result = evaluate_scorers(
        run,
        artifact,
        evaluated,
        **served,
        watched=watched,
        orders=arrival_orders,
        history=history,
    )
    if per_query is not None:
        with per_query.open("w", encoding="utf-8") as handle:
            for row in result.per_query(run):
                handle.write(json.dumps(row) + "\n")
    in_scope = np.array([q.kind == "in_scope" for q in run.queries])
    first_hit = first_hits_of(run, evaluated, settings, reranker)
    summary = {
        "dataset": run.dataset.name,
        "embedder_id": run.embedder_id,
        "mode": run.mode,
        "k": run.k,
        "calibration": how,
        "calibration_version": artifact.version,
        "near_miss_negatives": near_miss_negatives,
        "reader_signals": sorted(reads),
        "counts": ds.counts(),
        "evaluated_queries": int(evaluated.sum()),
        "recall_at_k": float((run.relevant_rank()[in_scope] > 0).mean())
        if in_scope.any()
        else None,
        "first_hit": first_hit,
        "scorers": [r.to_dict() for r in result.reports],
        "mix": result.mix.to_dict(),
    }
    if result.orders is not None:
        summary["mix"]["orders"] = result.orders.to_dict()
    if artifact_path is not None:
        summary["in_sample_questions"] = in_sample
    if probed is not None:
        summary["probes"] = probed
    if replayed is not None:
        summary["feedback"] = replayed
    if correction is not None:  # B10: RAGSIFT_CORRECTIVE_ENABLED=1
        kinds = [q.kind for q, e in zip(run.queries, evaluated, strict=True) if e]
        calibrated = result.scores["calibrated"][1]
        summary["corrective"] = correction.summary(evaluated, result.labels, calibrated, kinds)
    if as_json:
        print(json.dumps(summary))
        return
    title = (
        f"ragsift eval — {run.dataset.name}, {run.embedder_id}, {run.mode} k={run.k};"
        f" {how}; {int(evaluated.sum())} questions"
        f"{', near misses as negatives' if near_miss_negatives else ''}"
    )
    table = eval_table(result.reports, artifact.conformal.alpha, title)
    plain_console(width=max(console.width, 200)).print(table)
    if summary["recall_at_k"] is not None:
        console.print(f"recall@{run.k} of in-scope questions: {summary['recall_at_k']:.3f}")
    if first_hit["retriever"] is not None:
        console.print(first_hit_words(first_hit))
    if correction is not None:
        console.print(f"corrective retrieval: {json.dumps(summary['corrective'])}")
    if result.orders is not None:
        console.print(orders_words(summary["mix"]["orders"]))
    if replayed is not None:
        console.print(feedback_words(replayed))
        if "draws" in replayed:
            console.print(draws_words(replayed["draws"]))
