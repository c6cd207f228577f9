"""``calibrations list|remove|reprobe``: the scoped calibrations a store holds, and which
are used.

A scope (a collection, or one tenant in it) gets a calibration of its own from
``ragsift calibrate --collection``, from ``ragsift ingest``'s re-probe and from the
feedback re-fit. Queries use the most specific usable one (docs/confidence.md,
section 11); these commands show each, with its state as a query would find it,
remove one, and probe again every scope that is due (after an upgrade). The store
is the one the query path reads: Redis with ``RAGSIFT_CALIBRATION_STORE=redis``,
else ``RAGSIFT_CALIBRATION_STORE_DIR``, else ``<data dir>/calibrations``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ragsift.cli.calibration_rows import bar_text, keyword_bar, made_by, scope_row, shown_name
from ragsift.cli.common import (
    EXIT_FAILURE,
    Collection,
    DataDir,
    _embedded,
    _fail,
    _runtime,
    _settings,
    console,
    err_console,
    print_error,
    print_warning,
    service_hint,
)
from ragsift.cli.progress import _stage_progress

__all__ = ["calibrations_app"]

calibrations_app = typer.Typer(
    help="The calibrations stored per collection and tenant: list them, remove one, probe"
    " the due ones again.",
    no_args_is_help=True,
)


def _registry(data_dir: Path | None) -> Any:
    """A registry over the configured store and default, as the query path builds it."""
    from ragsift.confidence.registry import CalibrationRegistry
    from ragsift.errors import RagsiftError
    from ragsift.retrieval.engines import EngineSet
    from ragsift.wiring import CALIBRATIONS_DIR, build_calibration_store, build_embedder

    settings = _settings(data_dir)
    try:
        engines = EngineSet(settings.confidence, build_embedder(settings.embedder).embedder_id)
    except (RagsiftError, OSError) as exc:
        _fail(str(exc))
    if engines.calibration is None:
        _fail(
            "scoped calibrations apply to the calibrated scorer only; set"
            " RAGSIFT_CONFIDENCE_SCORER=calibrated"
        )
    store = build_calibration_store(settings, Path(settings.data_dir) / CALIBRATIONS_DIR)
    return CalibrationRegistry(engines.calibration, store, refresh_s=0)


@calibrations_app.command("list")
def calibrations_list(
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Each scope's calibration: version, what made it, its bar, and whether queries use it.

    "answered, answer missing" is the share of questions on the scope's own subjects
    whose answer it does not hold that the calibration answered, as estimated when
    it was made (docs/confidence.md, section 12; the estimate has run low).

    A calibration is not used when it was fit for another embedder or metric, was
    made on another shipped calibration than the one in use (after an upgrade),
    or cannot be read: its queries get the next broader one (collection, then the
    shipped default), and the state says why and what to do.
    """
    registry = _registry(data_dir)
    default = registry.default
    try:
        scopes = registry.store.scopes() if registry.store is not None else []
        rows = [scope_row(scope, *registry.examine(scope)) for scope in scopes]
    except OSError as exc:
        print_error(f"cannot read the calibration store: {exc}{service_hint(exc)}")
        raise typer.Exit(EXIT_FAILURE) from exc
    shipped = {
        "version": default.version,
        "made_by": made_by(default),
        "answer_threshold": default.conformal.threshold if default.conformal.feasible else None,
        "keyword_answer_threshold": keyword_bar(default),
    }
    if as_json:
        print(json.dumps({"default": shipped, "scopes": rows}, ensure_ascii=False))
        return
    table = Table(pad_edge=False, show_edge=False)
    table.add_column("scope", no_wrap=True)
    table.add_column("version", no_wrap=True)
    # Headers broken where a narrow column would cut them ("thresho…"), and the
    # made-by and state columns folded rather than cut: 80 columns show every word.
    table.add_column("made by", overflow="fold")
    table.add_column("answer\nthreshold", justify="right", min_width=9, overflow="fold")
    table.add_column("answered,\nanswer\nmissing", justify="right")
    table.add_column("state", overflow="fold")
    table.add_row(
        "(default)",
        default.version,
        shipped["made_by"],
        bar_text(shipped),
        "-",
        "in use where no scope has a usable one",
    )
    for row in rows:
        name = (
            row["collection"] if row["tenant"] is None else f"{row['tenant']}/{row['collection']}"
        )
        scope = shown_name(name)
        # The method's name; its whole description is in --json.
        method = (row["made_by"] or "-").split(":", 1)[0]
        holes = row["missing_answer_share"]
        missing = "-" if holes is None else f"~{holes:.0%}"
        table.add_row(scope, row["version"] or "-", method, bar_text(row), missing, row["state"])
    console.print(table)
    if not rows:
        console.print(
            "no calibration is stored per collection or tenant: every query uses the default"
        )
    stale = sum(row["ignored_reason"] == "base" for row in rows)
    if stale:
        console.print(
            f"{stale} made on another shipped calibration (an upgrade refit it):"
            " `ragsift calibrations reprobe` probes them again now"
        )


def _check_names(collection: str | None, tenant: str | None) -> None:
    """Names no query could carry are refused with the events' own rule (and never
    echoed: a name may hold terminal control characters)."""
    from pydantic import TypeAdapter, ValidationError

    from ragsift.schemas.base import CollectionName, TenantId

    checks: list[tuple[str, Any, str | None]] = [
        ("--collection", CollectionName, collection),
        ("--tenant", TenantId, tenant),
    ]
    for option, kind, value in checks:
        if value is None:
            continue
        try:
            TypeAdapter(kind).validate_python(value)
        except ValidationError as exc:
            _fail(f"{option}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")


@calibrations_app.command("remove")
def calibrations_remove(
    collection: Collection = "default",
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            "-t",
            help="The tenant whose calibration to remove (none: the collection's).",
        ),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Remove one scope's calibration: its queries then use the next broader one.

    A tenant's feedback labels in the collection and its last re-fit are forgotten too
    (kept, the next label re-fit the removed calibration from them), also when it has
    no calibration stored; how many is said. Its next re-fit waits for
    RAGSIFT_FEEDBACK_MIN_LABELS new sampled labels. Exit 2 when there is neither a
    calibration nor a label to remove.
    """
    from ragsift.cli.forget_labels import remove_scope, removed_words
    from ragsift.confidence import ConfidenceError
    from ragsift.confidence.registry import CalibrationScope
    from ragsift.errors import RagsiftError

    if tenant is not None and not tenant.strip():
        _fail("--tenant must name a tenant; leave it out to remove the collection's calibration")
    _check_names(collection, tenant)
    registry, settings = _registry(data_dir), _settings(data_dir)
    if registry.store is None:
        _fail("no calibration store is configured: there is nothing to remove")
    try:
        scope = CalibrationScope(collection, tenant)
    except ConfidenceError as exc:
        _fail(str(exc))
    try:
        removed = remove_scope(registry.store, settings, scope)
    except (OSError, RagsiftError) as exc:
        print_error(f"cannot write the calibration or feedback store: {exc}{service_hint(exc)}")
        raise typer.Exit(EXIT_FAILURE) from exc
    if not removed.anything:
        labels = " and no feedback labels" if tenant is not None else ""
        _fail(f"no calibration is stored for {scope}{labels}: nothing removed")
    now = registry.resolve(tenant, collection)
    console.print(removed_words(scope, now.version, removed, settings.feedback.min_labels))


async def _require_named(runtime: Any, collection: str, tenant: str | None) -> None:
    """Refuse (exit 2) the scope ``reprobe`` names when nothing is stored for it and it
    holds no documents: a collection that does not exist, or a tenant with none in it."""
    from ragsift.cli.embedded import _require_documents
    from ragsift.retrieval.errors import CollectionNotFoundError, missing_collection

    if tenant is not None:
        await _require_documents(runtime, tenant, collection)
        return
    try:
        await runtime.index.collection_info(collection)
    except CollectionNotFoundError:
        _fail(f"{missing_collection(collection)} in {runtime.data_dir}: nothing to probe")


#: Outcomes of ``reprobe`` that leave a scope without what the command is for: a bar
#: certified on its own scores (ADR 015), or a collection to probe. Exit 1.
_FAILED = frozenset({"infeasible", "no_collection"})


@calibrations_app.command("reprobe")
def calibrations_reprobe(
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Only this collection's scopes.")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Only this tenant's scopes.")
    ] = None,
    data_dir: DataDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Probe again every stored scope that is due, as an ingest into it would.

    Due: its probe calibration was made on another shipped calibration (an upgrade
    refit it, and queries skip it until then), or its chunk count moved by more than
    RAGSIFT_CALIBRATION_REPROBE_FRACTION since its probes. Every other scope keeps its
    calibration, and the reason is printed (fit on feedback, made with your own probes
    or pseudo-queries, not moved). With --collection (and --tenant) naming a scope that
    has nothing stored, that scope is probed (one never probed: under 10 chunks before
    ADR 047, or ingested with --no-probe); one with no documents (no such collection, or
    a tenant with none in it) is refused, exit 2, as is --tenant alone naming a tenant
    with nothing stored. Exit 1 when a scope ends with no bar certified on its own
    scores, or its collection is gone.
    """
    from ragsift.confidence.registry import CalibrationScope
    from ragsift.evaluation.sweep import reprobe_stored

    if tenant is not None and not tenant.strip():
        _fail("--tenant must name a tenant; leave it out to probe every tenant's scopes")
    _check_names(collection, tenant)
    settings, runtime = _runtime(data_dir, existing=True, answers=False)
    base = runtime.pipeline.engines.calibration
    if base is None:
        _fail(
            "scoped calibrations apply to the calibrated scorer only; set"
            " RAGSIFT_CONFIDENCE_SCORER=calibrated"
        )

    def only(scope: CalibrationScope) -> bool:
        return (collection is None or scope.collection == collection) and (
            tenant is None or scope.tenant == tenant
        )

    def show(done: Any) -> None:
        line = f"{shown_name(str(done.scope))}: {done.outcome}: {shown_name(done.message)}"
        (err_console if as_json else console).print(line, markup=False, highlight=False)

    async def run() -> Any:
        async with runtime:
            store = runtime.calibration_store
            if not any(only(s) for s in store.scopes()):
                if collection is not None:  # it is probed: it must exist
                    await _require_named(runtime, collection, tenant)
                elif tenant is not None:  # a tenant alone names no scope to probe
                    _fail(
                        f"no calibration is stored for tenant {tenant!r}: nothing to probe;"
                        f" name a collection (--collection C --tenant {tenant}) to probe"
                        " a scope of its never probed"
                    )
            with _stage_progress() as tick:
                try:
                    return await reprobe_stored(
                        runtime.index,
                        runtime.embedder,
                        base,
                        runtime.calibration_store,
                        fraction=settings.calibration.reprobe_fraction,
                        only=only,
                        named=None if collection is None else CalibrationScope(collection, tenant),
                        progress=tick,
                        done=show,
                    )
                except asyncio.CancelledError:  # Ctrl-C: it exited 130 without a word
                    print_warning(
                        "interrupted: a scope named above is stored as it says; the one"
                        " being probed and the rest keep the calibration in force"
                    )
                    raise

    try:
        outcomes = _embedded(run())
    except OSError as exc:
        print_error(f"cannot read or write the calibration store: {exc}{service_hint(exc)}")
        raise typer.Exit(EXIT_FAILURE) from exc
    if as_json:
        rows = [
            {
                "collection": done.scope.collection,
                "tenant": done.scope.tenant,
                "outcome": done.outcome,
                "message": done.message,
                "chunks": done.chunks,
                "threshold_before": done.threshold_before,
                "threshold": done.threshold,
                "version": done.version,
            }
            for done in outcomes
        ]
        print(json.dumps({"base": base.version, "scopes": rows}, ensure_ascii=False))
    elif not outcomes:  # a --collection or --tenant matching nothing is refused above
        console.print("no calibration is stored per collection or tenant: nothing to probe")
    else:
        stored = sum(done.outcome == "stored" for done in outcomes)
        console.print(f"{stored} of {len(outcomes)} scopes probed again and stored")
    if any(done.outcome in _FAILED for done in outcomes):
        raise typer.Exit(EXIT_FAILURE)
