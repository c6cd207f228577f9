"""The probes of ``calibrate --collection`` (its default method) and ``eval --probes``:
questions a corpus does not answer, searched in it to re-certify the answer
threshold there (docs/adr/014-certify-on-the-collections-own-probes.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import typer
from rich.text import Text

from ragsift.cli.common import (
    _embedded,
    _runtime,
    console,
    err_console,
    print_error,
    print_warning,
)
from ragsift.cli.progress import _stage_progress
from ragsift.cli.render import fmt_number as _fmt
from ragsift.errors import RagsiftError

T = TypeVar("T")

#: Probes that are among the evaluated questions, as a share of the bank, that are
#: left out rather than refusing the bank: stock questions asked of several articles
#: (1 of the bundled 3,480 is, in SQuAD's half 2). More than that, and the bank is
#: about what is evaluated.
STRAY_SHARE = 0.01

__all__ = [
    "base_calibration",
    "eval_probes",
    "level_probes",
    "probe_calibrate_collection",
    "probe_certified",
    "run_collection_job",
    "split_probe_rows",
    "store_artifact",
    "with_probe_rows",
]


def eval_probes(source: str, artifact: Any, questions: Any) -> tuple[Any, str]:
    """The probes of ``eval --probes`` and their source's name (None: not probed).

    ``auto`` probes with the bundled bank whenever ``ragsift ingest`` would: an
    applied artifact that can be re-certified (an in-scope sample, not re-certified
    on probes already), unless the bank's questions are among the evaluated ``questions``
    (certifying on what is scored would flatter it): up to :data:`STRAY_SHARE` of
    the bank, those questions are left out and the rest probe. Without
    ``--artifact`` the fit is on the corpus itself: nothing to probe.
    """
    from ragsift.confidence.selfcal import unprobed_because
    from ragsift.evaluation.probes import BUNDLED

    if source == "none" or (source == "auto" and artifact is None):
        return None, source
    if artifact is None:
        print_error(
            "--probes needs --artifact: it re-certifies that artifact's"
            " answer threshold on the evaluated corpus"
        )
        raise typer.Exit(2)
    explicit = source != "auto"
    if source == "auto":
        why = unprobed_because(artifact)
        if why is not None:
            err_console.print(f"probes: none, as the service would not probe either: {why}")
            return None, source
        source = BUNDLED
    probes = _load_probes(source)
    asked = {q.text.strip().casefold() for q in questions}
    shared = sum(p.text.strip().casefold() in asked for p in probes)
    dropped = ""
    if 0 < shared <= len(probes) * STRAY_SHARE:
        # A few stock questions ("What is the population of Los Angeles?") asked of
        # other articles too: leave those out, not the bank.
        probes = [p for p in probes if p.text.strip().casefold() not in asked]
        dropped = f"; {shared} that are among the evaluated questions left out"
        shared = 0
    if shared:
        what = (
            f"{shared} of the {len(probes)} probe questions ({source}) are among the evaluated"
            " questions: certifying on them would flatter the result"
        )
        if source == BUNDLED and not explicit:
            err_console.print(
                f"probes: none ({what}; the bank is `test-v2.0`'s half-1 articles:"
                " use --half 2 with --dataset squad2, or --probes FILE)"
            )
            return None, "auto"
        print_error(f"{what}; use other probes (--probes FILE) or none")
        raise typer.Exit(2)
    err_console.print(
        f"probes: {len(probes)} questions ({source}{dropped}), searched with the out-of-scope"
        " questions to re-certify the artifact on this corpus; the probes themselves are not"
        " scored (--probes none evaluates the artifact as it is)"
    )
    return probes, source


def _load_probes(source: str) -> Any:
    """The probes of ``source`` (``bundled`` or a file), or exit 2 naming what is wrong."""
    from ragsift.evaluation.probes import load_probes

    try:
        return load_probes(source)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc


#: Probes per bank article that measure a fit corpus's levels: two medians need far
#: fewer than the 3,480 a certificate does (400 on SQuAD's ten off-corpus articles;
#: a median's standard error there is ~0.005 in cosine), and every fit pays the search.
LEVEL_PROBES_PER_GROUP: Final = 40


def level_probes(ds: Any) -> list[Any]:
    """The bundled probes that measure a fit corpus's probe levels (ADR 024): the bank
    less the articles ``ds``'s corpus holds (others it answers are left out by their
    scores, as a collection's are), :data:`LEVEL_PROBES_PER_GROUP` of each article,
    evenly spaced through it. Questions ``ds`` also asks stay: they are read for where they score,
    not fitted or certified on."""
    from ragsift.evaluation.probes import bundled_probes

    held = set(ds.doc_groups.values())
    groups: dict[str, list[Any]] = {}
    for p in bundled_probes():
        if p.group not in held:
            groups.setdefault(p.group, []).append(p)
    chosen: list[Any] = []
    for members in groups.values():
        # evenly spaced through the article: its questions follow its paragraphs
        step = max(len(members) / LEVEL_PROBES_PER_GROUP, 1.0)
        chosen.extend(
            members[int(i * step)] for i in range(min(len(members), LEVEL_PROBES_PER_GROUP))
        )
    return chosen


def split_probe_rows(run: Any, n: int) -> tuple[Any, Any]:
    """A run of :func:`with_probe_rows`'s set as (the set's own rows, the probes' rows)."""
    import dataclasses

    if not n:
        return run, None
    cut = len(run.hits) - n
    reader = run.reader

    def part(rows: slice, queries: list[Any]) -> Any:
        return dataclasses.replace(
            run,
            dataset=dataclasses.replace(run.dataset, queries=queries),
            hits=run.hits[rows],
            reader=None if reader is None else reader[rows],
        )

    queries = run.queries
    return part(slice(None, cut), queries[:cut]), part(slice(cut, None), queries[cut:])


def with_probe_rows(ds: Any, probes: Any) -> Any:
    """``ds`` with the probes appended as its last questions (``ds`` itself without)."""
    from ragsift.evaluation.probes import with_probe_queries

    return ds if not probes else with_probe_queries(ds, probes)


def probe_certified(run: Any, artifact: Any, probes: Any, source: str) -> tuple[Any, Any]:
    """``artifact`` re-certified on the run's probe rows (its last ones), and what moved."""
    import numpy as np

    from ragsift.confidence import ConfidenceError, Provenance
    from ragsift.confidence.selfcal import left_out_of, with_probes
    from ragsift.evaluation.probes import aligned_on_probes, alignment_on

    n = len(probes)
    reader = run.reader[-n:] if run.reader is not None else None
    aligned, confidence = aligned_on_probes(
        artifact,
        run.hits[-n:],
        [p.group for p in probes],
        mode=run.mode,
        reader=reader,
        queries=[q.text for q in run.queries[-n:]],
        enabled=alignment_on(),
    )
    try:
        probed = with_probes(
            aligned,
            confidence,
            [p.group for p in probes],
            provenance=Provenance(
                method=f"probes ({source}), ragsift eval",
                base_version=artifact.version,
                collection=run.dataset.name,
                chunks=len(run.dataset.documents),
            ),
        )
    except ConfidenceError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    before, after = artifact.conformal, probed.conformal
    if not after.feasible:  # `ingest` then keeps the bar in force (marked); answers as now
        print_warning(
            f"the probes certify no answer threshold on this corpus"
            f" (the artifact's {before.threshold:.2f} is not certified here either); evaluated"
            " as it is, as the service would serve it"
        )
    return probed if after.feasible else artifact, {
        "source": source,
        "n": n,
        "applied": after.feasible,
        "threshold_before": before.threshold if before.feasible else None,
        "threshold": after.threshold if after.feasible else None,
        "risk_upper_bound": after.risk_upper_bound,
        "probe_confidence_p90": round(float(np.quantile(confidence, 0.9)), 4),
        "left_out": left_out_of(probed),
        # The collection's score alignment (ADR 024): None where none was made.
        "alignment": None if probed.alignment is None else probed.alignment.model_dump(),
        # What the re-map (ADR 015) makes of a few shipped confidences.
        "remapped": None
        if probed.remap is None
        else {f"{p:.1f}": round(float(probed.remap.apply([p])[0]), 4) for p in (0.5, 0.7, 0.9)},
    }


def base_calibration(runtime: Any, alpha: float | None) -> Any:
    """The calibration ``calibrate --collection`` adjusts, at the requested alpha (None:
    as it is)."""
    base = runtime.pipeline.engines.calibration
    if base is None:
        print_error(
            "self-calibration adjusts the calibrated scorer; set"
            " RAGSIFT_CONFIDENCE_SCORER=calibrated"
        )
        raise typer.Exit(2)
    if alpha is not None and base.conformal.alpha != alpha:
        base = base.model_copy(
            update={"conformal": base.conformal.model_copy(update={"alpha": alpha})}
        )
    return base


def probe_calibrate_collection(
    collection: str,
    tenant: str | None,
    data_dir: Path | None,
    out: Path | None,
    source: str,
    alpha: float,
    k: int,
) -> None:
    """``calibrate --collection`` (probes): re-certify, store (or write) and summarize."""
    from ragsift.confidence.registry import CalibrationScope
    from ragsift.confidence.selfcal import left_out_of
    from ragsift.evaluation.holes import missing_answer_rate, with_missing_answers
    from ragsift.evaluation.probes import probe_calibrate

    probes = _load_probes(source)
    _, runtime = _runtime(data_dir, answers=False)
    # Not re-labelled with the requested alpha: its own certificate is the floor
    # (ADR 014), and only at its own alpha.
    base = base_calibration(runtime, None)

    async def job(tick: Callable[[str, int, int], None]) -> tuple[Any, Any]:
        artifact = await probe_calibrate(
            runtime.index,
            runtime.embedder,
            base,
            probes,
            collection=collection,
            tenant=tenant,
            k=k,
            alpha=alpha,
            source=source,
            progress=tick,
        )
        if not artifact.conformal.feasible:
            return artifact, None
        # What the probes do not cover: questions on the collection's own subjects.
        holes = await missing_answer_rate(
            runtime.index,
            runtime.embedder,
            artifact,
            collection=collection,
            tenant=tenant,
            k=k,
            progress=tick,
        )
        return artifact, holes

    artifact, holes = run_collection_job(runtime, collection, job)
    if holes is not None:
        artifact = with_missing_answers(artifact, holes)  # stored with it
    scope = CalibrationScope(collection, tenant)
    before, after = base.conformal, artifact.conformal
    if not after.feasible:
        why = (
            f"{len(probes)} questions it should not answer ({source}) score so high here"
            f" that no answer threshold keeps risk <= {alpha} (the shipped"
            f" {before.threshold:.2f} does not either)"
        )
        outcome = _uncertified_outcome(runtime, scope, base, artifact, why, out)
        print_error(f"on {scope}, {why}; {outcome}")
        raise typer.Exit(1)
    where = store_artifact(runtime, scope, artifact, out)
    console.print(
        f"calibrated {scope} on {len(probes)} probe questions ({source}): version"
        f" {artifact.version} (from {base.version}), written to {where}"
    )
    console.print(
        f"answer threshold {before.threshold:.3f} -> {after.threshold:.3f} for risk <="
        f" {after.alpha} with this collection's out-of-scope scores (upper bound"
        f" {_fmt(after.risk_upper_bound)}, share answered at the calibration's mix"
        f" {_fmt(after.coverage)}); {_remap_words(artifact)}"
    )
    console.print(f"not covered by the probes: {holes.describe()}")
    dropped = left_out_of(artifact)
    if dropped:
        err_console.print(Text.assemble(("note: ", "yellow"), f"probes {dropped}"))


def _uncertified_outcome(
    runtime: Any, scope: Any, base: Any, artifact: Any, why: str, out: Path | None
) -> str:
    """Mark the scope's calibration in force as not certified there, as an ingest's
    re-probe does (ADR 015), unless the run wrote to a file or asked for another
    alpha (the bar in force is certified at its own); what was done, in words."""
    from ragsift.confidence.artifact import UNCERTIFIED_ADVICE_CODE
    from ragsift.evaluation.reprobe import in_force, mark_scope_uncertified

    advice = (
        "Check that the probes are not about your documents (--probes FILE), or accept a"
        " higher --alpha"
    )
    if out is not None or artifact.conformal.alpha != base.conformal.alpha:
        return f"nothing stored. {advice}"
    store = runtime.calibration_store
    kept = in_force(store, scope, base)
    marked = mark_scope_uncertified(store, scope, kept, artifact.provenance, why)
    return (
        f"answers keep the bar in force, and each result of the scope now carries the"
        f" `{UNCERTIFIED_ADVICE_CODE}` advice (calibration {marked.version}). {advice}"
    )


def _remap_words(artifact: Any) -> str:
    """What the probes' alignment (ADR 024) and re-map (ADR 015) did, in words."""
    return artifact.probe_moves() or "confidence as shipped"


def store_artifact(runtime: Any, scope: Any, artifact: Any, out: Path | None) -> str:
    """Write ``artifact`` to ``out``, or put it in the runtime's store; where it went."""
    from ragsift.confidence import save_calibration

    if out is not None:
        save_calibration(artifact, out)
        return str(out)
    store = runtime.calibration_store
    assert store is not None  # the embedded runtime always has one
    store.put(scope, artifact)
    return f"the calibration store for {scope}"


def run_collection_job(
    runtime: Any, collection: str, job: Callable[[Callable[[str, int, int], None]], Awaitable[T]]
) -> T:
    """Run ``job(progress)`` inside the runtime, with progress bars; its errors as exit 2,
    but a service it cannot reach (Qdrant, a remote embedder) exit 1: an outage."""
    from ragsift.confidence import ConfidenceError
    from ragsift.retrieval.errors import CollectionNotFoundError

    async def run() -> T:
        async with runtime:
            with _stage_progress() as tick:
                try:
                    return await job(tick)
                except asyncio.CancelledError:  # Ctrl-C: it exited 130 without a word
                    print_warning("interrupted: nothing was stored; the calibration in force stays")
                    raise

    try:
        return _embedded(run())
    except CollectionNotFoundError as exc:
        print_error(f"no collection {collection!r} in this data dir: {exc}")
        raise typer.Exit(2) from exc
    except (RagsiftError, ConfidenceError) as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
