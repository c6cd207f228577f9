"""The embedded runtime, no servers needed: ``demo``, ``ingest`` and ``ask``."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ragsift.cli.common import (
    ADVISORY_LOGGER,
    EXIT_FAILURE,
    EXIT_USAGE,
    Collection,
    DataDir,
    Tenant,
    _check_names,
    _data_dir,
    _data_dir_settings,
    _embedded,
    _fail,
    _quiet,
    _runtime,
    console,
    err_console,
    plain_console,
    print_error,
    print_warning,
    read_documents,
)
from ragsift.cli.demo_folder import not_the_demos
from ragsift.cli.ingest_warnings import (
    warn_after_ingest,
    warn_interrupted,
    warn_probing_interrupted,
)
from ragsift.cli.progress import _stage_progress
from ragsift.cli.prune import kept_ids, prune_blocked, refuse_prune_of_file, show_pruned
from ragsift.retrieval.errors import CollectionLimitError
from ragsift.schemas.base import MAX_K

__all__ = ["ask", "demo", "ingest"]


async def _require_documents(runtime: Any, tenant: str, collection: str) -> None:
    """Refuse, in the user's words, a collection that does not exist or a tenant with no
    documents in it: a search there could only ever find nothing."""
    from ragsift.retrieval.edge import MAX_TENANTS_IN_INFO
    from ragsift.retrieval.errors import (
        CollectionNotFoundError,
        missing_collection,
        no_documents,
    )

    qdrant = runtime.settings.qdrant
    where = f"in {runtime.data_dir}" if qdrant.mode == "edge" else f"on Qdrant at {qdrant.url}"
    try:
        info = await runtime.index.collection_info(collection)
    except CollectionNotFoundError:
        _fail(
            f"{missing_collection(collection)} {where}; index documents into it with"
            f" `ragsift ingest PATH --tenant {tenant} --collection {collection}`"
        )
    tenants = info.tenants
    # A facet capped at MAX_TENANTS_IN_INFO may leave out a tenant that has documents.
    if tenants is not None and len(tenants) < MAX_TENANTS_IN_INFO and tenant not in tenants:
        _fail(
            f"{no_documents(tenant, collection)} {where};"
            f" index some with `ragsift ingest PATH --tenant {tenant}`"
        )


def demo(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data-dir",
            parser=_data_dir,
            help="Where the demo writes its shard, audit trail and results; deleted first"
            " (the demo starts clean), so one holding anything else is refused.",
        ),
    ] = Path(".ragsift/demo"),
) -> None:
    """Ingest a sample handbook and play scripted queries on the embedded runtime."""
    import shutil

    from ragsift.cli.render import demo_table
    from ragsift.ingest.loaders import iter_documents
    from ragsift.ingest.sample import DEMO_ASK, DEMO_QUERIES, write_sample_corpus
    from ragsift.runtime_store import STORE_FILE
    from ragsift.schemas import QueryEvent

    if data_dir.exists():
        if (problem := not_the_demos(data_dir)) is not None:
            _fail(
                f"--data-dir {data_dir} {problem}; the demo deletes its folder to start from a"
                " clean shard: give it a new or empty one (default .ragsift/demo)"
            )
        shutil.rmtree(data_dir)  # the demo always starts from a clean shard
    try:
        corpus = write_sample_corpus(data_dir / "corpus")
    except OSError as exc:  # a parent that is a file, no permission
        _fail(f"--data-dir {data_dir}: cannot write there ({exc.strerror or exc})")
    console.print(f"wrote a sample handbook of {len(corpus)} documents to {data_dir / 'corpus'}")
    settings, runtime = _runtime(data_dir)

    async def run() -> list[tuple[str, Any, int]]:
        async with runtime:
            report = await runtime.ingest("demo", iter_documents(data_dir / "corpus"))
            console.print(
                f"indexed {report.documents} documents as {report.chunks} chunks with"
                f" {runtime.embedder.embedder_id} into Qdrant Edge"
            )
            if settings.calibration.reprobe_after_ingest:  # as `ragsift ingest` does
                done = await _reprobe(runtime, settings, "demo", "default")
                _show_reprobe(done, "RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST=false")
            queries = [
                QueryEvent(query_id=f"demo-{i}", tenant_id="demo", query=q.text)
                for i, q in enumerate(DEMO_QUERIES)
            ]
            results = await runtime.ask(queries)
            audit = runtime.audit.read_all()
        per_query: dict[str, int] = {}
        for row in audit:
            subject = str(row.get("subject"))
            per_query[subject] = per_query.get(subject, 0) + 1
        return [
            (q.kind, r, per_query.get(query.query_id, 0))
            for q, query, r in zip(DEMO_QUERIES, queries, results, strict=True)
        ]

    # C3's per-query warning is for a service's logs; here the table shows each advisory
    with _quiet(ADVISORY_LOGGER):
        rows = _embedded(run())
    wide = plain_console(width=max(console.width, 150))  # room even when piped
    wide.print(demo_table(rows))
    results = data_dir / "results.jsonl"
    with results.open("w", encoding="utf-8") as handle:
        for _, result, _ in rows:
            handle.write(result.model_dump_json() + "\n")
    console.print(f"audit trail (CloudEvents, JSONL): {data_dir / 'audit' / 'audit.jsonl'}")
    console.print(
        f"results (one JSON line per query): {results}; kept for ragsift assess in"
        f" {data_dir / STORE_FILE}  ·  try: ragsift ask --data-dir"
        f" {shlex.quote(str(data_dir))} --tenant demo {shlex.quote(DEMO_ASK)}"
    )
    console.print(f"then: ragsift assess --data-dir {shlex.quote(str(data_dir))} demo-0")


def ingest(
    path: Annotated[
        Path,
        typer.Argument(
            help="A .txt/.md/.html/.pdf/.docx/.odt/.epub/.jsonl file or a folder of them"
            " (HTML: the text a reader sees; PDF: its text layer; text: UTF-8, UTF-16 by"
            " its mark, else Windows-1252). A folder's links to files, hidden files and"
            " folders, and the data directory are passed over."
        ),
    ],
    tenant: Tenant,
    collection: Collection = "default",
    source_type: Annotated[
        str,
        typer.Option(
            help="Where the documents come from, which weighs how far they are trusted:"
            " government, regulatory, market_data, third_party, internal or unknown."
        ),
    ] = "unknown",
    probe: Annotated[
        bool | None,
        typer.Option(
            "--probe/--no-probe",
            help="Then re-certify the tenant's answer threshold on this collection with the"
            " bundled probes (questions it should not answer; ADR 014) when it has no"
            " calibration of its own yet or its chunk count moved by more than"
            " RAGSIFT_CALIBRATION_REPROBE_FRACTION (0.2). Default:"
            " RAGSIFT_CALIBRATION_REPROBE_AFTER_INGEST (on).",
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Then remove the tenant's other documents of this collection: those not"
            " under the folder PATH now (files deleted or renamed since they were ingested)."
            " A file or JSONL line passed over this time (unreadable, empty) keeps what was"
            " indexed of it; a folder or JSONL file that cannot be read stops the prune"
            " (nothing removed).",
        ),
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Chunk, embed and index documents into the embedded Qdrant Edge shard, then probe
    the collection to re-certify the answer threshold there (--no-probe: don't), and
    estimate how often a question on its subjects whose answer it lacks would still be
    answered (docs/confidence.md, section 12).

    Warns when most of the text looks non-English: ragsift reads English (section
    13). A new collection past RAGSIFT_QDRANT_MAX_COLLECTIONS (1000) is refused, exit 2."""
    _check_names(tenant=tenant, collection=collection)  # before anything is written
    _data_dir_settings(data_dir)  # before a large folder is read
    if prune:
        refuse_prune_of_file(path, tenant, collection)
    skipped: list[tuple[Path, str]] = []
    docs = read_documents(path, source_type, skipped, data_dir)
    if not docs:
        print_error(
            f"nothing to index under {path}:"
            " no .txt/.md/.html/.pdf/.docx/.odt/.epub/.jsonl document with text in it"
        )
        raise typer.Exit(2)
    settings, runtime = _runtime(data_dir, answers=False)
    probing = settings.calibration.reprobe_after_ingest if probe is None else probe

    async def run() -> Any:
        async with runtime:
            with _stage_progress(transient=False) as tick:
                try:
                    report = await runtime.ingest(
                        tenant,
                        docs,
                        collection=collection,
                        progress=lambda done, total: tick("indexing chunks", done, total),
                    )
                except asyncio.CancelledError:  # Ctrl-C: asyncio.run cancels, then re-raises
                    warn_interrupted()
                    raise
                except CollectionLimitError as exc:  # a new collection past the cap
                    _fail(str(exc))
            same = f"; {report.unchanged} unchanged, not embedded again" if report.unchanged else ""
            console.print(
                f"indexed {report.documents} documents as {report.chunks} chunks for tenant"
                f" {tenant!r} in collection {collection!r}{same}"
            )
            languages = settings.confidence.language_checks == "on"
            texts = [d.text for d in docs] if languages else []
            warn_after_ingest(report, texts, tenant, collection)
            if prune and not prune_blocked(path, skipped):
                keep = kept_ids((d.doc_id for d in docs), path, skipped)
                show_pruned(await runtime.prune(tenant, keep, collection=collection), path)
            if probing:
                try:
                    done = await _reprobe(runtime, settings, tenant, collection)
                except asyncio.CancelledError:  # Ctrl-C while probing: it exited silently
                    warn_probing_interrupted(tenant, collection, data_dir)
                    raise
                _show_reprobe(done, "`--no-probe`")

    _embedded(run())


async def _reprobe(runtime: Any, settings: Any, tenant: str, collection: str) -> Any:
    """Re-probe the scope just ingested into (None: the scorer is not the calibrated one)."""
    from ragsift.evaluation.reprobe import reprobe_after_ingest

    base = runtime.pipeline.engines.calibration
    if base is None:
        return None
    with _stage_progress() as tick:
        return await reprobe_after_ingest(
            runtime.index,
            runtime.embedder,
            base,
            runtime.calibration_store,
            collection=collection,
            tenant=tenant,
            fraction=settings.calibration.reprobe_fraction,
            progress=tick,
        )


def _show_reprobe(done: Any, skip: str) -> None:
    """What probing the ingested scope did, and what it does not cover; ``skip``: how
    to skip it."""
    if done is None:
        console.print("probes: skipped (RAGSIFT_CONFIDENCE_SCORER is not calibrated)")
        return
    where = f"calibration for {done.scope}"
    if done.outcome == "stored":
        console.print(f"{where}: re-certified on the bundled probes, {done.message}")
        if done.remap:
            console.print(f"  {done.remap}")
        console.print(f"  version {done.version}; {skip} skips this step")
    elif done.outcome == "infeasible":
        err_console.print(Text.assemble(("warning: ", "yellow"), f"{where}: {done.message}"))
    else:
        console.print(f"{where}: not re-probed: {done.message}")
    if done.holes is not None:  # what it answers of questions whose answer the scope lacks
        console.print(f"  not covered by the probes: {done.holes.describe()}")


def ask(
    query: Annotated[str, typer.Argument(help="The question.")],
    tenant: Tenant,
    collection: Collection = "default",
    k: Annotated[
        int | None,
        typer.Option(
            help=f"How many passages to retrieve, 1 to {MAX_K}"
            " (default: RAGSIFT_CONFIDENCE_DEFAULT_K, 8)."
        ),
    ] = None,
    mode: Annotated[
        str,
        typer.Option(
            help="Search by meaning and words (hybrid), meaning only (dense) or words only"
            " (keyword)."
        ),
    ] = "hybrid",
    selection: Annotated[
        str | None,
        typer.Option(
            help="Which passages to keep: those above a score bar (threshold, the default),"
            " as many as it takes to be confident (adaptive), or the best few (top_k)."
        ),
    ] = None,
    task: Annotated[
        str | None,
        typer.Option(
            help="How much context the task needs (implies --selection adaptive): debugging,"
            " code_review, architecture, explanation, testing, devops, ml_engineering, general."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    data_dir: DataDir = None,
    collections: Annotated[
        str | None,
        typer.Option(
            help="More collections to search, comma-separated: one confidence for the merged hits."
        ),
    ] = None,
) -> None:
    """Ask one question of the documents indexed by `ragsift ingest` and print the
    confidence, the answer or refusal, and the context kept and dropped.

    Exit status: 0 answered or refused; 1 retrieval failed; 2 the question was
    rejected (too long, --k too large...) or the data directory, collection or tenant
    has no documents.
    """
    import uuid

    from pydantic import ValidationError

    from ragsift.cli.render import print_answer_extras, print_result
    from ragsift.schemas import DeadLetter, QueryEvent

    try:
        event = QueryEvent.model_validate(
            {
                "query_id": f"ask-{uuid.uuid4().hex[:12]}",
                "tenant_id": tenant,
                "query": query,
                "collection": collection,
                "k": k,
                "mode": mode,
                "selection": selection,
                "task_type": task,
                "collections": [c.strip() for c in collections.split(",")] if collections else [],
            }
        )
    except ValidationError as exc:
        from ragsift.errors import describe_validation_error

        _fail(describe_validation_error(exc))
    _, runtime = _runtime(data_dir, existing=True)

    async def run() -> Any:
        async with runtime:
            await _require_documents(runtime, tenant, collection)
            return (await runtime.answer([event]))[0]

    # a dead letter is reported below, once; the advisory flag is on the printed report
    with _quiet("ragsift.streams.routing"), _quiet(ADVISORY_LOGGER):
        outcome = _embedded(run())
    result = getattr(outcome, "result", outcome)  # a StoredAnswer, or the DeadLetter
    # What the query's other handlers could not do (the feedback store remembering the
    # result, a report) was dead-lettered under the quiet logger: said once each, else
    # a later `ragsift feedback` found "no scored result" without a word why.
    for letter in runtime.bus.published["deadletter"]:
        if isinstance(letter, DeadLetter) and letter.worker != "retrieval":  # not the query's
            print_warning(f"{letter.worker} could not handle it ({letter.stage}): {letter.error}")
    if isinstance(result, DeadLetter):
        stage = result.stage
        _fail(
            f"query rejected at {stage}: {result.error}",
            EXIT_USAGE if stage in ("decode", "validate") else EXIT_FAILURE,
        )
    if as_json:
        console.print_json(result.model_dump_json())
    else:
        print_result(console, result)
        print_answer_extras(console, outcome, data_dir)
    if result.outcome == "error":
        raise typer.Exit(EXIT_FAILURE)
