"""``calibrate``: fit the confidence calibration from a labelled set, or adapt the
shipped one to an indexed collection (self-calibration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragsift.cli.common import (
    DataDir,
    _check_names,
    _check_writable,
    _runtime,
    _settings,
    console,
    print_error,
)
from ragsift.cli.labelled import (
    Dataset,
    Half,
    Holes,
    Labelled,
    OutOfScope,
    PoolOption,
    Reword,
    Split,
    VectorCache,
    _fit_features,
    _load_dataset,
    _reads,
    _retrieval_runs,
)
from ragsift.cli.probing import (
    base_calibration,
    probe_calibrate_collection,
    run_collection_job,
    store_artifact,
)
from ragsift.cli.render import fmt_number as _fmt
from ragsift.schemas import MAX_K

__all__ = ["calibrate"]


def calibrate(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Where to write the artifact JSON (with --collection: instead of the store).",
        ),
    ] = None,
    dataset: Dataset = None,
    labelled: Labelled = None,
    out_of_scope: OutOfScope = None,
    split: Split = "test",
    pool: PoolOption = "auto",
    half: Half = None,
    holes: Holes = 0.0,
    reword: Reword = 0.0,
    alpha: Annotated[
        float, typer.Option(help="Target risk: answered-without-relevant-context rate.")
    ] = 0.1,
    k: Annotated[int, typer.Option(help="Hits retrieved per question.", min=1, max=MAX_K)] = 8,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection",
            "-c",
            help="Self-calibrate this indexed collection from its own chunks (no labels"
            " needed) and store the result, so its queries are scored with it.",
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant", "-t", help="With --collection: calibrate only this tenant's documents."
        ),
    ] = None,
    data_dir: DataDir = None,
    held_out: Annotated[
        Path | None,
        typer.Option(
            "--held-out",
            help="With --collection --method pseudo-queries: write the test questions kept"
            " out of the fit here (JSONL, for `ragsift eval --pseudo-queries`).",
        ),
    ] = None,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="With --collection: 'probes' re-maps the confidence and re-certifies the"
            " answer threshold on how your collection scores questions it cannot answer;"
            " 'pseudo-queries' (experimental) re-maps it on test questions cut from your"
            " chunks instead.",
            metavar="probes|pseudo-queries",
        ),
    ] = "probes",
    probes: Annotated[
        str,
        typer.Option(
            "--probes",
            help="With --method probes: 'bundled' (3,480 Wikipedia questions) or a file of"
            " questions your collection does not answer (.jsonl with text/group, or .txt).",
            metavar="bundled|FILE",
        ),
    ] = "bundled",
    vector_cache: VectorCache = None,
) -> None:
    """Fit the confidence calibration: from a labelled set, or from one of your collections.

    With --collection, ragsift adapts its shipped calibration to your documents
    without labels. By default (--method probes) it searches your collection with
    questions it cannot answer, re-maps the confidence to how high they score there
    (short chunks give them closer matches) and re-certifies the answer threshold,
    never under the shipped one. Where they score much lower than on the
    calibration corpus (few or short pages), it first raises the collection's
    score levels to match (ADR 024; RAGSIFT_CONFIDENCE_ALIGNMENT=off: not). The result
    is stored under the data dir (calibrations/) and used for that collection's
    queries (that tenant's, with --tenant) from then on. `ragsift ingest` does this
    for the tenant it indexes (bundled probes); run it here for a collection-wide
    calibration or your own probes. When no threshold keeps the risk, the
    calibration in force stays and is marked, so each result of the scope says its
    bar is not certified (with --out or another --alpha, and with --method
    pseudo-queries, nothing is stored; docs/confidence.md, section 11). A
    certified run also estimates what the probes do not cover: how often a
    question on the collection's own subjects whose answer it lacks would be
    answered (docs/confidence.md, section 12).

    With --dataset/--labelled it fits from labelled questions: without --half on
    the questions of half 1's articles (the ones `ragsift eval --half 2` leaves
    out, ADR 026); with --half on every article of that half. The model fits term
    coverage too, and sentence match (with the ONNX embedder, token match too) with
    RAGSIFT_CONFIDENCE_READER_SIGNALS=on. The
    shipped calibrations are --dataset squad2 --holes 0.15: about one in seven of
    each article's paragraphs left out, their questions fitted as on topic and
    unanswered (ADR 020, ADR 026). --reword is not in that recipe: a fit on
    reworded questions let near misses through where traffic is mostly answerable
    (ADR 043).
    """
    if not 0 < alpha < 1:  # before any data is read
        print_error(f"--alpha must be in (0, 1), got {alpha:g}")
        raise typer.Exit(2)
    _check_writable(out, "--out")  # refused now, not after the fit
    _check_writable(held_out, "--held-out")
    if collection is not None:
        _check_names(tenant=tenant, collection=collection)
        if vector_cache is not None:
            print_error("--vector-cache keeps a labelled set's vectors: not with --collection")
            raise typer.Exit(2)
        if method not in ("probes", "pseudo-queries"):
            print_error(f"--method must be probes or pseudo-queries, got {method!r}")
            raise typer.Exit(2)
        if method == "probes" and held_out is not None:
            print_error(
                "--held-out needs --method pseudo-queries (the probes"
                " method makes no test questions from your chunks)"
            )
            raise typer.Exit(2)
        if method == "probes":
            probe_calibrate_collection(collection, tenant, data_dir, out, probes, alpha, k)
        else:
            _self_calibrate(collection, tenant, data_dir, out, held_out, alpha, k)
        return
    if out is None:
        print_error("give --out FILE (or --collection to self-calibrate)")
        raise typer.Exit(2)
    from ragsift.cli.probing import level_probes, split_probe_rows, with_probe_rows
    from ragsift.confidence import ConfidenceError, save_calibration
    from ragsift.evaluation import fit_from_run
    from ragsift.evaluation.probes import with_levels
    from ragsift.evaluation.scoring import FIT_FRACTION, with_dense_only, with_keyword

    ds = _load_dataset(dataset, labelled, out_of_scope, split, pool, half, holes, reword)
    features = _fit_features(_settings())
    bank = level_probes(ds)
    # The same questions searched dense-only and keyword-only too: what `mode: dense`
    # queries are imputed for the BM25 agreement they lack (ADR 028), and the model
    # `mode: keyword` queries are scored with (ADR 029), are fit on them.
    modes = ("hybrid", "dense", "keyword")
    runs = _retrieval_runs(
        with_probe_rows(ds, bank), k, modes, _reads(features), vector_cache=vector_cache
    )
    run, probe_run = split_probe_rows(runs["hybrid"], len(bank))
    dense_run, _ = split_probe_rows(runs["dense"], len(bank))
    keyword_run, _ = split_probe_rows(runs["keyword"], len(bank))
    fit_fraction = 1.0 if half else FIT_FRACTION
    try:
        # the holes are on-topic questions the corpus cannot answer: fit as unanswered
        artifact, fit = fit_from_run(
            run,
            alpha=alpha,
            fit_fraction=fit_fraction,
            features=features,
            near_miss_negatives=holes > 0,
        )
        artifact = with_dense_only(artifact, dense_run, fit, near_miss_negatives=holes > 0)
        artifact = with_keyword(
            artifact,
            keyword_run,
            alpha=alpha,
            fit_fraction=fit_fraction,
            near_miss_negatives=holes > 0,
        )
    except ConfidenceError as exc:  # too few questions, one kind only: the data's fault
        print_error(f"cannot fit on {run.dataset.name}: {exc}")
        raise typer.Exit(2) from exc
    if bank:
        # Where off-topic questions score on this corpus: the zero every collection's
        # scores are aligned to when it is probed (ADR 024).
        artifact = with_levels(
            artifact,
            probe_run.hits,
            [p.group for p in bank],
            reader=probe_run.reader,
            queries=[p.text for p in bank],
        )
    save_calibration(artifact, out)
    conformal = artifact.conformal
    console.print(
        f"wrote {out}: version {artifact.version} for {artifact.embedder_id}/{artifact.metric};"
        f" conformal answer threshold {conformal.threshold:.3f} for risk <= {alpha}"
        f" (upper bound {conformal.risk_upper_bound}, coverage {conformal.coverage},"
        f" feasible {conformal.feasible})"
    )
    for part in (artifact.dense_only, artifact.keyword):
        if part is not None:
            console.print(part.describe())


def _self_calibrate(
    collection: str,
    tenant: str | None,
    data_dir: Path | None,
    out: Path | None,
    held_out: Path | None,
    alpha: float,
    k: int,
) -> None:
    """``calibrate --collection``: fit, store (or write) and summarize the calibration."""

    from ragsift.confidence.registry import CalibrationScope
    from ragsift.evaluation.selfcal import self_calibrate

    _, runtime = _runtime(data_dir, answers=False)
    base = base_calibration(runtime, alpha)

    result = run_collection_job(
        runtime,
        collection,
        lambda tick: self_calibrate(
            runtime.index,
            runtime.embedder,
            base,
            collection=collection,
            tenant=tenant,
            k=k,
            progress=tick,
        ),
    )
    artifact = result.artifact
    scope = CalibrationScope(collection, tenant)
    if held_out is not None:
        # Written whether or not a threshold is certified: `ragsift eval --pseudo-queries`
        # measures the shipped calibration on this collection with them either way.
        with held_out.open("w", encoding="utf-8") as handle:
            for q in result.held_out:
                row = {"text": q.text, "tenant_id": q.tenant_id, "doc_id": q.doc_id}
                handle.write(json.dumps(row) + "\n")
    if not artifact.conformal.feasible:
        # Storing it would refuse every query of the collection; the shipped one stays.
        print_error(
            f"no answer threshold of {scope} held risk <= {alpha} on its"
            f" {artifact.conformal.n_calibration} held-out test questions (their source chunk"
            " was often not the top hit); nothing stored, the shipped calibration stays in use"
        )
        raise typer.Exit(1)
    where = store_artifact(runtime, scope, artifact, out)
    before, after, prov = base.conformal, artifact.conformal, artifact.provenance
    assert prov is not None
    console.print(
        f"self-calibrated {scope} ({result.chunks} chunks; {prov.positives} answerable and"
        f" {prov.negatives} unanswerable test questions): version {artifact.version}"
        f" (from {base.version}), written to {where}"
    )
    console.print(
        f"answer threshold {before.threshold:.3f} -> {after.threshold:.3f} for risk <="
        f" {after.alpha} on this collection's test questions (upper bound"
        f" {_fmt(after.risk_upper_bound)}, share answered {_fmt(after.coverage)},"
        f" feasible {after.feasible})"
    )
