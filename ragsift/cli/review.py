"""Looking back at a past embedded answer: ``assess`` it (or score given chunks) and
label it with ``feedback``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ragsift.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    Collection,
    DataDir,
    _run,
    _runtime,
    _settings,
    console,
    err_console,
    print_error,
)
from ragsift.errors import RagsiftError

__all__ = ["assess", "feedback"]


def assess(
    query_id: Annotated[
        str | None, typer.Argument(help="A past query's id (ask and demo print it).")
    ] = None,
    query: Annotated[
        str | None, typer.Option("--query", help="Score the chunks given by --chunks for this.")
    ] = None,
    chunks: Annotated[
        str | None, typer.Option("--chunks", help="Comma-separated chunk ids (with --query).")
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", "-t", help="Tenant of the query or chunks (needed with --query)."),
    ] = None,
    collection: Collection = "default",
    data_dir: DataDir = None,
) -> None:
    """Show a past query's confidence breakdown, report and advice, or score given chunks."""
    if (query_id is None) == (query is None):
        print_error("give a QUERY_ID, or --query with --chunks")
        raise typer.Exit(2)
    if query is not None:
        _assess_chunks(query, chunks, tenant, collection, data_dir)
        return
    from ragsift.cli.render import print_assessment
    from ragsift.runtime_store import STORE_FILE, ResultStore

    settings = _settings()
    path = (data_dir or settings.data_dir) / STORE_FILE
    if not path.is_file():
        print_error(
            f"no results stored under {path.parent}:"
            " run `ragsift ask` or `ragsift demo` there first"
        )
        raise typer.Exit(EXIT_USAGE)
    try:
        store = ResultStore(path, max_results=settings.runtime.store_max_results)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    try:
        found = store.get(str(query_id), tenant)
    finally:
        store.close()
    if found is None:
        print_error(f"no stored result for query id {query_id!r}")
        raise typer.Exit(EXIT_USAGE)
    print_assessment(console, found)


def _assess_chunks(
    query: str, chunks: str | None, tenant: str | None, collection: str, data_dir: Path | None
) -> None:
    """``assess --query … --chunks …``: the pipeline's verdict on exactly those chunks."""
    import uuid

    from pydantic import ValidationError

    from ragsift.cli.render import print_assessment
    from ragsift.errors import describe_validation_error
    from ragsift.runtime_store import StoredAnswer
    from ragsift.schemas import QueryEvent

    ids = [c.strip() for c in (chunks or "").split(",") if c.strip()]
    if not ids or tenant is None:
        print_error("--query needs --chunks id1,id2,... and --tenant")
        raise typer.Exit(2)
    try:
        event = QueryEvent(
            query_id=f"assess-{uuid.uuid4().hex[:12]}",
            tenant_id=tenant,
            query=query,
            collection=collection,
        )
    except ValidationError as exc:
        print_error(describe_validation_error(exc))
        raise typer.Exit(2) from exc
    _, runtime = _runtime(data_dir)

    async def run() -> Any:
        async with runtime:
            return await runtime.assess_chunks(event, ids)

    try:
        assessed = _run(run())
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(1) from exc
    if not isinstance(assessed, StoredAnswer):
        print_error(f"rejected at {assessed.stage}: {assessed.error}")
        raise typer.Exit(1)
    found = {h.chunk_id for h in assessed.result.hits} | {
        d.chunk_id for d in assessed.result.dropped
    }
    missing = [c for c in ids if c not in found]
    if not found:
        # Nothing to assess (a typo, or another tenant's or collection's ids): an
        # assessment of no context would read as a verdict on these chunks.
        print_error(
            f"none of the chunks was found for tenant {tenant!r} in {collection!r}:"
            f" {', '.join(missing)}"
        )
        raise typer.Exit(EXIT_USAGE)
    print_assessment(console, assessed)
    if missing:
        err_console.print(
            Text.assemble(
                (f"not found for tenant {tenant!r} in {collection!r}:", "yellow"),
                f" {', '.join(missing)}",
            )
        )


def feedback(
    query_id: Annotated[str, typer.Argument(help="The query the label is about (from `ask`).")],
    relevant: Annotated[
        bool,
        typer.Option("--relevant", help="The result's kept context held the answer."),
    ] = False,
    not_relevant: Annotated[
        bool,
        typer.Option("--not-relevant", help="It did not (one of the two is needed)."),
    ] = False,
    tenant: Annotated[
        str | None,
        typer.Option(
            "--tenant",
            "-t",
            help="Tenant (default: the query's; name it when two tenants asked that query id).",
        ),
    ] = None,
    reported: Annotated[
        bool,
        typer.Option(
            "--reported",
            help="A user chose to give this label (a thumbs-down, a complaint): keep it,"
            " but never re-fit on it (docs/feedback.md).",
        ),
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Label a past embedded result; re-fit the tenant's calibration once enough labels exist.

    The label is kept under the data dir, keyed by tenant and query id (labelling
    again replaces it). With RAGSIFT_FEEDBACK_MIN_LABELS sampled labels for the tenant
    and collection (results picked for labelling without looking at how they turned out), a new
    calibration is fit and stored under <data dir>/calibrations. --reported labels
    are kept and counted, never fit on.
    """
    import uuid

    from pydantic import ValidationError

    from ragsift.confidence.refit import describe_refit
    from ragsift.embedded import embedded_feedback_loop
    from ragsift.errors import describe_validation_error
    from ragsift.observability.metrics import Metrics
    from ragsift.schemas import FeedbackEvent
    from ragsift.wiring import build_embedder
    from ragsift.workers.calibration import FeedbackRefused

    if relevant == not_relevant:  # both read as the last one given; neither as nothing
        said = "both given" if relevant else "neither given"
        print_error(f"say --relevant or --not-relevant: one of the two ({said})")
        raise typer.Exit(2)
    try:  # a query id or tenant no event may carry: said before anything else
        FeedbackEvent(
            event_id="cli-check", query_id=query_id, tenant_id=tenant or "t", relevant=relevant
        )
    except ValidationError as exc:
        print_error(describe_validation_error(exc))
        raise typer.Exit(2) from exc
    settings = _settings(data_dir)
    if not Path(settings.data_dir).exists():  # nothing was asked there: create nothing
        print_error(f"no data directory at {settings.data_dir}: no query was scored there")
        raise typer.Exit(2)
    try:
        loop = embedded_feedback_loop(
            settings, build_embedder(settings.embedder).embedder_id, Metrics()
        )
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    except OSError as exc:  # the data dir is a file, or cannot be written
        print_error(f"cannot use the data directory {settings.data_dir}: {exc.strerror or exc}")
        raise typer.Exit(2) from exc
    if loop is None:
        print_error("feedback re-fits need RAGSIFT_CONFIDENCE_SCORER=calibrated")
        raise typer.Exit(2)
    try:
        if tenant is None:  # the query's: one tenant's, or the user must say which
            owners = loop.store.owners(query_id)
            if len(owners) > 1:
                asked = ", ".join(owners)
                print_error(
                    f"query {query_id!r} was asked by tenants {asked}: name one with --tenant"
                )
                raise typer.Exit(2)
            tenant = owners[0] if owners else "unknown"
        record = loop.store.recall(query_id, tenant)
        before = loop.in_force(loop.scope_of(record)) if record else None
        event = FeedbackEvent(
            event_id=f"cli-{uuid.uuid4().hex[:12]}",
            query_id=query_id,
            tenant_id=tenant,
            relevant=relevant,
            sampled=not reported,
        )
        version = loop.apply(event, afresh=True)  # a process per label: due is not known
    except ValidationError as exc:  # a query id or tenant no event may carry
        print_error(describe_validation_error(exc))
        raise typer.Exit(2) from exc
    except FeedbackRefused as exc:  # an unknown query id, or another tenant's: bad input
        print_error(str(exc))
        raise typer.Exit(EXIT_USAGE) from exc
    except ValueError as exc:  # the input was checked above: the re-fit's own maths
        # (a row no result could have written is passed over as unreadable, and counted)
        print_error(
            f"labelling {query_id} failed on the feedback store's data or its re-fit, not"
            f" on the input: {exc}"
        )
        raise typer.Exit(EXIT_FAILURE) from exc
    except OSError as exc:  # the re-fit could not be written (the label is stored)
        # Before RagsiftError: Redis's calibration store fails with errors that are both.
        print_error(
            f"labelled {query_id}, but its re-fit could not be stored ({exc}); the label is"
            " kept, and the next label (this one again too) re-fits"
        )
        raise typer.Exit(1) from exc
    except RagsiftError as exc:  # the feedback store is held by another process, or damaged
        print_error(str(exc))
        raise typer.Exit(1) from exc
    assert record is not None  # apply refuses an unknown query
    scope = f"{record.tenant_id}/{record.collection}"
    try:
        held = loop.store.labels(loop.scope_of(record))
    except RagsiftError as exc:  # stored; only the count cannot be read now
        print_error(f"labelled {query_id}, but its labels cannot be counted now: {exc}")
        raise typer.Exit(1) from exc
    count = f"{len(held)} label{'' if len(held) == 1 else 's'}"
    if unsampled := sum(not s.sampled for s in held):
        count += f", {unsampled} of them reported (never fit on)"
    # How far the fit is, in the labels it reads: without this a user labelled on and
    # never learnt that a fit wants min_labels of them, nor that reports do not count.
    usable = len(loop.usable(held))
    if version is None and usable < loop.settings.min_labels:
        more = loop.settings.min_labels - usable
        count += f"; {more} more sampled label{'' if more == 1 else 's'} until a fit"
    same = {
        "unchanged": "; unchanged: it was labelled so already",
        "kept_sampled": "; not stored: the label sampler chose it, so its sampled label stays",
    }.get(loop.last_result, "")
    console.print(
        f"labelled {query_id} {'relevant' if relevant else 'not relevant'}"
        f"{' (reported)' if reported else ''} ({scope}: {count}{same})"
    )
    if version is None and (why := loop.refits.withheld(loop.scope_of(record))) is not None:
        console.print(f"re-fit of {scope} withheld: {why}", markup=False)
    if version is None and (why := loop.refits.postponed_why(loop.scope_of(record))):
        # Its labels cannot make one (e.g. every one "relevant"): said, or a user labelled
        # on past min_labels and never learnt why nothing changed.
        console.print(f"re-fit of {scope} postponed until other labels come: {why}", markup=False)
    if version is not None:
        after = loop.in_force(loop.scope_of(record))
        assert before is not None
        console.print(
            f"re-fit the calibration of {scope}: {version}; {describe_refit(before, after)}",
            markup=False,
        )
