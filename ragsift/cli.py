"""The ``ragsift`` command (Typer + Rich)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ragsift import __version__
from ragsift.errors import RagsiftError
from ragsift.schemas.base import MAX_K
from ragsift.settings import Settings

__all__ = ["app", "main"]

T = TypeVar("T")

app = typer.Typer(
    name="ragsift",
    help="Streaming retrieval for RAG with calibrated confidence.",
    no_args_is_help=True,
    add_completion=False,
)
schemas_app = typer.Typer(help="Event contracts (JSON Schema).", no_args_is_help=True)
app.add_typer(schemas_app, name="schemas")
k8s_app = typer.Typer(
    help="Kubernetes manifests generated from ragsift's tables.", no_args_is_help=True
)
app.add_typer(k8s_app, name="k8s")
audit_app = typer.Typer(help="The audit trail: check its hash chain.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
console = Console()
# soft_wrap: an error is one line however narrow the terminal (or a pipe's 80 columns)
err_console = Console(stderr=True, soft_wrap=True)

#: exit status of input the command refuses (bad option, unknown collection or tenant)
EXIT_USAGE = 2
#: exit status of a service that cannot be reached or a query that failed
EXIT_FAILURE = 1


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` as one plain line (no markup, no traceback) and exit."""
    err_console.print(Text.assemble(("error: ", "red"), message))
    raise typer.Exit(code)


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


#: the report builder's C3 "advisory only" warning: the CLI shows the flag itself
ADVISORY_LOGGER = "ragsift.report.builder"


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Silence a logger's warnings and errors while the command reports the error itself."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _kafka(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` against the cluster; a broker that cannot be reached is a one-line error."""
    from aiokafka.errors import KafkaError

    try:
        with _quiet("aiokafka"):
            return asyncio.run(work)
    except KafkaError as exc:
        reason = " ".join(str(exc).split())  # aiokafka's text has newlines
        if not reason.startswith(type(exc).__name__):
            reason = f"{type(exc).__name__}: {reason}"
        _fail(
            f"Kafka at {settings.kafka.bootstrap_servers} ({settings.kafka.security_protocol})"
            f" is not usable ({reason}); start the brokers or set RAGSIFT_KAFKA_BOOTSTRAP_SERVERS",
            EXIT_FAILURE,
        )


@app.command()
def version() -> None:
    """Print ragsift's version."""
    console.print(__version__)


def _applied_confidence(settings: Settings) -> dict[str, Any]:
    """The confidence values queries are judged by, those the calibration sets marked so.

    A calibrated scorer replaces the configured hit threshold with the artifact's
    (unless RAGSIFT_CONFIDENCE_SIMILARITY_THRESHOLD is set), answers from one
    document, and answers at the artifact's conformal threshold (EngineSet).
    """
    from ragsift.retrieval.engines import EngineSet
    from ragsift.wiring import build_embedder

    try:
        engines = EngineSet(settings.confidence, build_embedder(settings.embedder).embedder_id)
    except (RagsiftError, OSError) as exc:
        # The settings are still worth showing: they are how one finds what is wrong.
        err_console.print(
            Text.assemble(
                ("warning: ", "yellow"), f"cannot tell the confidence values in effect: {exc}"
            )
        )
        return {"applied": f"unknown: {exc}"}
    base, calibration = engines.base, engines.calibration
    if settings.confidence.scorer != "calibrated" or calibration is None:
        return {
            "min_documents": base.min_documents,
            "answer_threshold": engines.engine("threshold", "hybrid").answer_threshold,
        }
    source = f"calibration {calibration.version} ({calibration.embedder_id})"
    threshold: Any = base.similarity_threshold
    if base.similarity_threshold != settings.confidence.similarity_threshold:
        threshold = {"value": threshold, "from": source}
    return {
        "similarity_threshold": threshold,
        "min_documents": {"value": base.min_documents, "from": "calibrated scorer"},
        "answer_threshold": {
            "value": engines.engine("threshold", "hybrid").answer_threshold,
            "from": f"{source}, conformal at risk <= {calibration.conformal.alpha}",
        },
        "calibration_version": calibration.version,
    }


@app.command("settings")
def show_settings() -> None:
    """Print the settings in effect as JSON: secrets masked, and the confidence values a
    calibration sets shown as applied, marked with where they come from."""
    settings = _settings()
    shown = settings.masked()
    shown["confidence"].update(_applied_confidence(settings))
    console.print_json(json.dumps(shown))


@app.command()
def topics(
    create: Annotated[
        bool, typer.Option("--create", help="Create the missing topics on the Kafka cluster.")
    ] = False,
) -> None:
    """List every topic ragsift reads or writes, with key and retention."""
    from ragsift.streams.topics import TOPICS

    settings = _settings()
    prefix = settings.kafka.topic_prefix
    if create:
        from ragsift.streams.admin import ensure_topics

        created = _kafka(settings, ensure_topics(settings.kafka))
        console.print(f"created {len(created)} topics: {', '.join(created) or '-'}")
    table = Table("topic", "contract", "key", "cleanup", "retention (days)", "what")
    for spec in TOPICS.values():
        days = "-" if spec.retention_ms is None else f"{spec.retention_ms / 86_400_000:g}"
        table.add_row(
            spec.name(prefix),
            spec.model.__name__,
            spec.key,
            spec.cleanup_policy,
            days,
            spec.description,
        )
    console.print(table)


@schemas_app.command("export")
def schemas_export(
    out: Annotated[
        Path | None, typer.Option(help="Directory to write to (default: ragsift/schemas/json).")
    ] = None,
) -> None:
    """Write the JSON Schema of every event contract."""
    from ragsift.schemas.registry import JSON_DIR, export_json_schemas

    for path in export_json_schemas(out or JSON_DIR):
        console.print(f"wrote {path}")


def _runtime(data_dir: Path | None, *, existing: bool = False) -> tuple[Settings, Any]:
    """The embedded runtime on ``data_dir``; ``existing``: a command that only reads
    refuses a data directory nothing was ingested into, and does not create it."""
    from ragsift.embedded import EmbeddedRuntime

    settings = _settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    local = settings.qdrant.mode == "edge"  # a Qdrant server holds its data elsewhere
    if existing and local and not Path(settings.data_dir).is_dir():
        _fail(
            f"no ragsift data in {settings.data_dir}: nothing has been indexed there; run"
            f" `ragsift ingest PATH --tenant T --data-dir {settings.data_dir}` first"
        )
    try:
        return settings, EmbeddedRuntime(settings)
    except RagsiftError as exc:
        _fail(str(exc))
    except OSError as exc:  # a file a setting names (a calibration artifact, a model) is missing
        _fail(f"{exc} (check the RAGSIFT_* settings that name files: `ragsift settings`)")


#: the setting that points at each backing service, named when it cannot be reached
SERVICE_SETTINGS = {
    "qdrant": "RAGSIFT_QDRANT_URL",
    "redis": "RAGSIFT_REDIS_URL",
    "embedder": "RAGSIFT_EMBEDDER_BASE_URL",
    "reranker": "RAGSIFT_RERANKER_URL",
    "llm": "RAGSIFT_LLM_BASE_URL",
}


def _embedded(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on the embedded runtime; a service it cannot reach is a one-line error."""
    from ragsift.errors import ServiceUnavailableError

    try:
        return asyncio.run(work)
    except ServiceUnavailableError as exc:
        setting = SERVICE_SETTINGS.get(exc.service)
        _fail(f"{exc}" + (f"; start it or set {setting}" if setting else ""), EXIT_FAILURE)


DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Embedded data directory (default .ragsift).")
]


async def _require_documents(runtime: Any, tenant: str, collection: str) -> None:
    """Refuse, in the user's words, a collection that does not exist or a tenant with no
    documents in it: a search there could only ever find nothing."""
    from ragsift.retrieval.edge import MAX_TENANTS_IN_INFO
    from ragsift.retrieval.errors import CollectionNotFoundError

    qdrant = runtime.settings.qdrant
    where = f"in {runtime.data_dir}" if qdrant.mode == "edge" else f"on Qdrant at {qdrant.url}"
    try:
        info = await runtime.index.collection_info(collection)
    except CollectionNotFoundError:
        _fail(
            f"collection {collection!r} does not exist {where}; index documents into it with"
            f" `ragsift ingest PATH --tenant {tenant} --collection {collection}`"
        )
    tenants = info.tenants
    # A facet capped at MAX_TENANTS_IN_INFO may leave out a tenant that has documents.
    if tenants is not None and len(tenants) < MAX_TENANTS_IN_INFO and tenant not in tenants:
        _fail(
            f"tenant {tenant!r} has no documents in collection {collection!r} {where};"
            f" index some with `ragsift ingest PATH --tenant {tenant}`"
        )


Tenant = Annotated[str, typer.Option("--tenant", "-t", help="Tenant the documents belong to.")]
Collection = Annotated[str, typer.Option("--collection", "-c", help="Collection name.")]


@app.command()
def demo(
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where the demo writes its shard and audit file.")
    ] = Path(".ragsift/demo"),
) -> None:
    """Ingest a sample handbook and play scripted queries on the embedded runtime."""
    import shutil

    from ragsift.cli_render import demo_table
    from ragsift.ingest.loaders import iter_documents
    from ragsift.ingest.sample import DEMO_ASK, DEMO_QUERIES, write_sample_corpus
    from ragsift.runtime_store import STORE_FILE
    from ragsift.schemas import QueryEvent

    if data_dir.exists():
        shutil.rmtree(data_dir)  # the demo always starts from a clean shard
    corpus = write_sample_corpus(data_dir / "corpus")
    console.print(f"wrote a sample handbook of {len(corpus)} documents to {data_dir / 'corpus'}")
    _, runtime = _runtime(data_dir)

    async def run() -> list[tuple[str, Any, int]]:
        async with runtime:
            report = await runtime.ingest("demo", iter_documents(data_dir / "corpus"))
            console.print(
                f"indexed {report.documents} documents as {report.chunks} chunks with"
                f" {runtime.embedder.embedder_id} into Qdrant Edge"
            )
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
    wide = Console(width=max(console.width, 150))  # the table needs room even when piped
    wide.print(demo_table(rows))
    results = data_dir / "results.jsonl"
    with results.open("w", encoding="utf-8") as handle:
        for _, result, _ in rows:
            handle.write(result.model_dump_json() + "\n")
    console.print(f"audit trail (CloudEvents, JSONL): {data_dir / 'audit' / 'audit.jsonl'}")
    console.print(
        f"results (one JSON line per query): {results}; kept for ragsift assess in"
        f" {data_dir / STORE_FILE}  ·  try: ragsift ask --data-dir"
        f' {data_dir} --tenant demo "{DEMO_ASK}"'
    )
    console.print(f"then: ragsift assess --data-dir {data_dir} demo-0")


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A .txt/.md/.jsonl file or a folder of them.")],
    tenant: Tenant,
    collection: Collection = "default",
    source_type: Annotated[
        str,
        typer.Option(
            help="Where the documents come from, which weighs how far they are trusted:"
            " government, regulatory, market_data, third_party, internal or unknown."
        ),
    ] = "unknown",
    data_dir: DataDir = None,
) -> None:
    """Chunk, embed and index documents into the embedded Qdrant Edge shard."""
    from pydantic import TypeAdapter, ValidationError
    from rich.progress import Progress

    from ragsift.ingest.loaders import iter_documents
    from ragsift.schemas.base import CollectionName, TenantId
    from ragsift.streams.codec import describe_validation_error

    # The names `ask` and the workers accept, checked before anything is written.
    for field, adapter, value in (
        ("tenant", TypeAdapter(TenantId), tenant),
        ("collection", TypeAdapter(CollectionName), collection),
    ):
        try:
            adapter.validate_python(value)
        except ValidationError as exc:
            _fail(f"--{field}: {describe_validation_error(exc).removeprefix('<event>: ')}")
    try:
        docs = list(iter_documents(path, source_type=source_type))
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if not docs:
        err_console.print(f"[red]error:[/red] no .txt/.md/.jsonl documents under {path}")
        raise typer.Exit(2)
    _, runtime = _runtime(data_dir)

    async def run() -> Any:
        async with runtime:
            with Progress(console=err_console) as progress:
                task = progress.add_task("indexing", total=len(docs))
                return await runtime.ingest(
                    tenant,
                    docs,
                    collection=collection,
                    progress=lambda n: progress.update(task, completed=n),
                )

    report = _embedded(run())
    console.print(
        f"indexed {report.documents} documents as {report.chunks} chunks for tenant {tenant!r}"
        f" in collection {collection!r}"
    )


@app.command()
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
            help="With --selection adaptive, how much context the task needs: debugging,"
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

    from ragsift.cli_render import print_answer_extras, print_result
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
        from ragsift.streams.codec import describe_validation_error

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


@app.command()
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
        err_console.print("[red]error:[/red] give a QUERY_ID, or --query with --chunks")
        raise typer.Exit(2)
    if query is not None:
        _assess_chunks(query, chunks, tenant, collection, data_dir)
        return
    from ragsift.cli_render import print_assessment
    from ragsift.runtime_store import STORE_FILE, ResultStore

    settings = _settings()
    path = (data_dir or settings.data_dir) / STORE_FILE
    if not path.is_file():
        err_console.print(
            f"[red]error:[/red] no results stored under {path.parent}:"
            " run `ragsift ask` or `ragsift demo` there first"
        )
        raise typer.Exit(1)
    store = ResultStore(path, max_results=settings.runtime.store_max_results)
    try:
        found = store.get(str(query_id), tenant)
    finally:
        store.close()
    if found is None:
        err_console.print(f"[red]error:[/red] no stored result for query id {query_id!r}")
        raise typer.Exit(1)
    print_assessment(console, found)


def _assess_chunks(
    query: str, chunks: str | None, tenant: str | None, collection: str, data_dir: Path | None
) -> None:
    """``assess --query … --chunks …``: the pipeline's verdict on exactly those chunks."""
    import uuid

    from pydantic import ValidationError

    from ragsift.cli_render import print_assessment
    from ragsift.runtime_store import StoredAnswer
    from ragsift.schemas import QueryEvent
    from ragsift.streams.codec import describe_validation_error

    ids = [c.strip() for c in (chunks or "").split(",") if c.strip()]
    if not ids or tenant is None:
        err_console.print("[red]error:[/red] --query needs --chunks id1,id2,... and --tenant")
        raise typer.Exit(2)
    try:
        event = QueryEvent(
            query_id=f"assess-{uuid.uuid4().hex[:12]}",
            tenant_id=tenant,
            query=query,
            collection=collection,
        )
    except ValidationError as exc:
        err_console.print(f"[red]error:[/red] {describe_validation_error(exc)}")
        raise typer.Exit(2) from exc
    _, runtime = _runtime(data_dir)

    async def run() -> Any:
        async with runtime:
            return await runtime.assess_chunks(event, ids)

    try:
        assessed = asyncio.run(run())
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    if not isinstance(assessed, StoredAnswer):
        err_console.print(f"[red]error:[/red] rejected at {assessed.stage}: {assessed.error}")
        raise typer.Exit(1)
    found = {h.chunk_id for h in assessed.result.hits} | {
        d.chunk_id for d in assessed.result.dropped
    }
    missing = [c for c in ids if c not in found]
    print_assessment(console, assessed)
    if missing:
        err_console.print(
            f"[yellow]not found for tenant {tenant!r} in {collection!r}:[/yellow]"
            f" {', '.join(missing)}"
        )


SQUAD_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "squad2"


def _load_dataset(
    dataset: str | None,
    labelled: Path | None,
    out_of_scope: Path | None,
    *,
    split: str,
    pool: str,
    half: int | None,
) -> Any:
    """The labelled set named on the command line (SQuAD files or a BEIR folder), or exit 2."""
    from ragsift.evaluation import is_beir_folder, load_beir, load_squad, select_half

    beir: Path | None = None
    if dataset is not None:
        if dataset == "squad2":
            base = Path(os.environ.get("RAGSIFT_SQUAD2_DIR", SQUAD_DIR))
            labelled, out_of_scope = base / "dev-v2.0.json", base / "test-v2.0.json"
        elif is_beir_folder(Path(dataset)):
            beir = Path(dataset)
        else:
            err_console.print(
                f"[red]error:[/red] --dataset {dataset!r} is neither squad2 nor a BEIR folder"
                " (a folder with corpus.jsonl, queries.jsonl and qrels/)"
            )
            raise typer.Exit(2)
    if beir is None and labelled is None:
        err_console.print("[red]error:[/red] give --dataset squad2|BEIR_FOLDER or --labelled FILE")
        raise typer.Exit(2)
    for path in (labelled, out_of_scope):
        if path is not None and not path.is_file():
            err_console.print(f"[red]error:[/red] no such file: {path}")
            raise typer.Exit(2)
    if pool not in ("auto", "corpus", "qrels", "candidates"):
        err_console.print("[red]error:[/red] --pool must be auto, corpus, qrels or candidates")
        raise typer.Exit(2)
    try:
        if beir is not None:
            ds = load_beir(beir, split=split, out_of_scope=out_of_scope, pool=pool)  # type: ignore[arg-type]  # checked above
        else:
            assert labelled is not None
            ds = load_squad(labelled, out_of_scope)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if half is not None:
        if half not in (1, 2):
            err_console.print(f"[red]error:[/red] --half must be 1 or 2, got {half}")
            raise typer.Exit(2)
        ds = select_half(ds, 1 if half == 1 else 2)
    return ds


def _with_pseudo_queries(ds: Any, pseudo_queries: Path | None, corpus: Path | None) -> Any:
    """``eval --pseudo-queries/--corpus``: a collection's held-out test questions as in-scope."""
    from ragsift.evaluation.dataset import with_pseudo_queries
    from ragsift.ingest.loaders import iter_documents

    if pseudo_queries is None:
        err_console.print("[red]error:[/red] --corpus needs --pseudo-queries")
        raise typer.Exit(2)
    try:
        extra = list(iter_documents(corpus)) if corpus is not None else []
        return with_pseudo_queries(ds, pseudo_queries, extra)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


@contextmanager
def _stage_progress() -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(stage, done, total)`` callback drawing one bar per stage on stderr."""
    from rich.progress import Progress

    with Progress(console=err_console, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def tick(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        yield tick


def _retrieval_run(
    ds: Any, k: int, mode: str, reads: frozenset[str] = frozenset(), correction: Any = None
) -> Any:
    """Retrieve every question; with ``reads`` (reader features), read the hits too;
    with ``correction`` (B10), retry the weak or split ones once."""

    from ragsift.evaluation import run_retrieval
    from ragsift.retrieval.bm25 import Bm25Encoder
    from ragsift.retrieval.reader import Reader
    from ragsift.wiring import build_embedder

    settings = _settings()
    embedder = build_embedder(settings.embedder)
    reader = (
        Reader(
            embedder,
            encoder=Bm25Encoder() if "term_coverage" in reads else None,
            sentences="sentence_match" in reads,
            top_n=settings.confidence.reader_top_n,
        )
        if reads
        else None
    )
    counts = ds.counts()
    pooled = sum(q.candidates is not None for q in ds.queries)
    err_console.print(
        f"{ds.name}: {counts['documents']} documents, {counts.get('in_scope', 0)} in-scope,"
        f" {counts.get('near_miss', 0)} near-miss, {counts.get('out_of_scope', 0)} out-of-scope"
        f" questions{f' ({pooled} searched in their own pools)' if pooled else ''};"
        f" embedder {embedder.embedder_id}"
    )
    with _stage_progress() as tick:
        return asyncio.run(
            run_retrieval(
                ds, embedder, k=k, mode=mode, progress=tick, reader=reader, corrective=correction
            )
        )


def _reader_features(settings: Any) -> frozenset[str]:
    """The reader signals a calibration fits when RAGSIFT_CONFIDENCE_READER_SIGNALS=on."""
    from ragsift.evaluation.scoring import READER_SIGNAL_FEATURES

    on = settings.confidence.reader_signals == "on"
    return frozenset(READER_SIGNAL_FEATURES) if on else frozenset()


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


@app.command()
def feedback(
    query_id: Annotated[str, typer.Argument(help="The query the label is about (from `ask`).")],
    relevant: Annotated[
        bool,
        typer.Option(
            "--relevant/--not-relevant",
            help="Whether the result's kept context held the answer.",
        ),
    ],
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="Tenant (default: the query's).")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Label a past embedded result; re-fit the tenant's calibration once enough labels exist.

    The label is kept under the data dir, keyed by query id (labelling again replaces
    it). With RAGSIFT_FEEDBACK_MIN_LABELS labels for the tenant and collection, a new
    calibration is fit and stored under <data dir>/calibrations.
    """
    import uuid

    from ragsift.embedded import embedded_feedback_loop
    from ragsift.observability.metrics import Metrics
    from ragsift.schemas import FeedbackEvent
    from ragsift.wiring import build_embedder
    from ragsift.workers.calibration import FeedbackRefused

    settings = _settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    try:
        loop = embedded_feedback_loop(
            settings, build_embedder(settings.embedder).embedder_id, Metrics()
        )
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if loop is None:
        err_console.print(
            "[red]error:[/red] feedback re-fits need RAGSIFT_CONFIDENCE_SCORER=calibrated"
        )
        raise typer.Exit(2)
    record = loop.store.recall(query_id)
    try:
        event = FeedbackEvent(
            event_id=f"cli-{uuid.uuid4().hex[:12]}",
            query_id=query_id,
            tenant_id=tenant or (record.tenant_id if record else "unknown"),
            relevant=relevant,
        )
        version = loop.apply(event)
    except (FeedbackRefused, ValueError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    assert record is not None  # apply refuses an unknown query
    scope = f"{record.tenant_id}/{record.collection}"
    labels = len(loop.store.labels(loop.scope_of(record)))
    console.print(
        f"labelled {query_id} {'relevant' if relevant else 'not relevant'}"
        f" ({scope}: {labels} labels)"
    )
    if version is not None:
        console.print(f"re-fit the calibration of {scope}: {version}")


@app.command()
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
    alpha: Annotated[
        float, typer.Option(help="Target risk: answered-without-relevant-context rate.")
    ] = 0.1,
    k: Annotated[int, typer.Option(help="Hits retrieved per question.")] = 8,
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
            help="With --collection: write the test questions kept out of the fit here"
            " (JSONL, for `ragsift eval --pseudo-queries`).",
        ),
    ] = None,
) -> None:
    """Fit the confidence calibration: from a labelled set, or from one of your collections.

    With --collection, ragsift adapts its shipped calibration to your documents
    without labels: it makes test questions from your chunks, adds general
    questions your documents cannot answer, and re-fits the confidence scale and
    the answer threshold to how your collection scores them. The result is stored
    under the data dir (calibrations/) and used for that collection's queries
    (that tenant's, with --tenant) from then on; run it again after large ingests.
    When no threshold keeps the risk on those test questions, nothing is stored
    and the shipped calibration stays (docs/confidence.md, section 11).

    With --dataset/--labelled it fits from labelled questions: without --half on
    half the articles (the other half is what `ragsift eval` reports on); with
    --half on every article of that half. With RAGSIFT_CONFIDENCE_READER_SIGNALS=on
    the hits are read and the model also fits sentence_match and term_coverage.
    """
    if collection is not None:
        _self_calibrate(collection, tenant, data_dir, out, held_out, alpha, k)
        return
    if out is None:
        err_console.print("[red]error:[/red] give --out FILE (or --collection to self-calibrate)")
        raise typer.Exit(2)
    from ragsift.confidence import save_calibration
    from ragsift.confidence.features import DEFAULT_FEATURES
    from ragsift.evaluation import fit_from_run
    from ragsift.evaluation.scoring import FIT_FRACTION, READER_SIGNAL_FEATURES

    ds = _load_dataset(dataset, labelled, out_of_scope, split=split, pool=pool, half=half)
    reads = _reader_features(_settings())
    run = _retrieval_run(ds, k, "hybrid", reads)
    artifact, _ = fit_from_run(
        run,
        alpha=alpha,
        fit_fraction=1.0 if half else FIT_FRACTION,
        features=DEFAULT_FEATURES + READER_SIGNAL_FEATURES if reads else DEFAULT_FEATURES,
    )
    save_calibration(artifact, out)
    conformal = artifact.conformal
    console.print(
        f"wrote {out}: version {artifact.version} for {artifact.embedder_id}/{artifact.metric};"
        f" conformal answer threshold {conformal.threshold:.3f} for risk <= {alpha}"
        f" (upper bound {conformal.risk_upper_bound}, coverage {conformal.coverage},"
        f" feasible {conformal.feasible})"
    )


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

    from ragsift.confidence import ConfidenceError, save_calibration
    from ragsift.confidence.registry import CalibrationScope
    from ragsift.evaluation.selfcal import self_calibrate
    from ragsift.retrieval.errors import CollectionNotFoundError

    _, runtime = _runtime(data_dir)
    base = runtime.pipeline.engines.calibration
    if base is None:
        err_console.print(
            "[red]error:[/red] self-calibration adjusts the calibrated scorer; set"
            " RAGSIFT_CONFIDENCE_SCORER=calibrated"
        )
        raise typer.Exit(2)
    if base.conformal.alpha != alpha:
        base = base.model_copy(
            update={"conformal": base.conformal.model_copy(update={"alpha": alpha})}
        )

    async def run() -> Any:
        async with runtime:
            with _stage_progress() as tick:
                return await self_calibrate(
                    runtime.index,
                    runtime.embedder,
                    base,
                    collection=collection,
                    tenant=tenant,
                    k=k,
                    progress=tick,
                )

    try:
        result = asyncio.run(run())
    except CollectionNotFoundError as exc:
        err_console.print(f"[red]error:[/red] no collection {collection!r} in this data dir: {exc}")
        raise typer.Exit(2) from exc
    except (RagsiftError, ConfidenceError) as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    artifact = result.artifact
    scope = CalibrationScope(collection, tenant)
    if not artifact.conformal.feasible:
        # Storing it would refuse every query of the collection; the shipped one stays.
        err_console.print(
            f"[red]error:[/red] no answer threshold of {scope} held risk <= {alpha} on its"
            f" {artifact.conformal.n_calibration} held-out test questions (their source chunk"
            " was often not the top hit); nothing stored, the shipped calibration stays in use"
        )
        raise typer.Exit(1)
    if out is not None:
        save_calibration(artifact, out)
        where = str(out)
    else:
        store = runtime.calibration_store
        assert store is not None  # the embedded runtime always has one
        store.put(scope, artifact)
        where = f"the calibration store for {scope}"
    if held_out is not None:
        with held_out.open("w", encoding="utf-8") as handle:
            for q in result.held_out:
                row = {"text": q.text, "tenant_id": q.tenant_id, "doc_id": q.doc_id}
                handle.write(json.dumps(row) + "\n")
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


def _fmt(value: float | None) -> str:
    return "—" if value is None or value != value else f"{value:.3f}"  # NaN != NaN


@app.command("eval")
def evaluate(
    dataset: Dataset = None,
    labelled: Labelled = None,
    out_of_scope: OutOfScope = None,
    split: Split = "test",
    pool: PoolOption = "auto",
    half: Half = None,
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
    k: Annotated[int, typer.Option(help="Hits retrieved per question.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure the confidence scores on a labelled dataset: ranking, calibration, answer
    rate and risk at the answer threshold, the calibrated scorer against the simple rules.

    With RAGSIFT_CORRECTIVE_ENABLED=1 and --artifact: corrective retrieval (docs/corrective.md)."""
    import numpy as np

    from ragsift.confidence import ConfidenceError, load_calibration
    from ragsift.confidence.features import DEFAULT_FEATURES, READER_FEATURES
    from ragsift.evaluation import evaluate_scorers, fit_from_run
    from ragsift.evaluation.scoring import READER_SIGNAL_FEATURES

    ds = _load_dataset(dataset, labelled, out_of_scope, split=split, pool=pool, half=half)
    if pseudo_queries is not None or corpus is not None:
        ds = _with_pseudo_queries(ds, pseudo_queries, corpus)
    if max_out_of_scope is not None:
        from ragsift.evaluation.dataset import limit_out_of_scope

        try:
            ds = limit_out_of_scope(ds, max_out_of_scope)
        except RagsiftError as exc:
            err_console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
    settings = _settings()
    artifact = None
    if artifact_path is not None:
        from ragsift.wiring import build_embedder

        try:
            artifact = load_calibration(
                artifact_path,
                embedder_id=build_embedder(settings.embedder).embedder_id,
                metric="cosine",
            )
        except (OSError, ConfidenceError) as exc:
            err_console.print(f"[red]error:[/red] {artifact_path}: {exc}")
            raise typer.Exit(2) from exc
    if artifact is None:
        reads = _reader_features(settings)
        features = DEFAULT_FEATURES + READER_SIGNAL_FEATURES if reads else DEFAULT_FEATURES
    else:
        reads = READER_FEATURES.intersection(artifact.features)
    correction = _eval_correction(settings, artifact)
    run = _retrieval_run(ds, k, "hybrid", reads, correction)
    if artifact is None:
        artifact, fit = fit_from_run(run, features=features)
        evaluated = ~fit
        how = "refit on half (fit on half the articles, reported on the other half)"
    else:
        evaluated = np.ones(len(run.queries), dtype=bool)
        how = (
            f"applied artifact {artifact_path} ({artifact.version}, fit on {artifact.data.source})"
        )
    result = evaluate_scorers(run, artifact, evaluated, near_miss_negatives=near_miss_negatives)
    if per_query is not None:
        with per_query.open("w", encoding="utf-8") as handle:
            for row in result.per_query(run):
                handle.write(json.dumps(row) + "\n")
    in_scope = np.array([q.kind == "in_scope" for q in run.queries])
    summary = {
        "dataset": run.dataset.name,
        "embedder_id": run.embedder_id,
        "mode": run.mode,
        "k": run.k,
        "calibration": how,
        "calibration_version": artifact.version,
        "near_miss_negatives": near_miss_negatives,
        "reader_signals": sorted(reads),
        "counts": run.dataset.counts(),
        "evaluated_queries": int(evaluated.sum()),
        "recall_at_k": float((run.relevant_rank()[in_scope] > 0).mean())
        if in_scope.any()
        else None,
        "scorers": [r.to_dict() for r in result.reports],
    }
    if correction is not None:  # B10: RAGSIFT_CORRECTIVE_ENABLED=1
        kinds = [q.kind for q, e in zip(run.queries, evaluated, strict=True) if e]
        calibrated = result.scores["calibrated"][1]
        summary["corrective"] = correction.summary(evaluated, result.labels, calibrated, kinds)
    if as_json:
        print(json.dumps(summary))
        return
    table = Table(
        "scorer",
        "AUROC",
        "ECE",
        "cov@p90",
        "cov@p95",
        "AURC",
        "answer rate",
        "risk",
        f"risk <= {artifact.conformal.alpha}",
        "refusal P",
        "refusal R",
        "near-miss refused",
        "near-miss AUROC",
        "rule",
        title=f"ragsift eval — {run.dataset.name}, {run.embedder_id}, {run.mode} k={run.k};"
        f" {how}; {int(evaluated.sum())} questions"
        f"{', near misses as negatives' if near_miss_negatives else ''}",
    )
    for r in result.reports:
        table.add_row(
            r.name,
            _fmt(r.auroc),
            _fmt(r.ece),
            _fmt(r.coverage_at_p90),
            _fmt(r.coverage_at_p95),
            _fmt(r.aurc),
            f"{_fmt(r.answer_rate)} ({r.answered})",
            _fmt(r.risk),
            r.target,
            _fmt(r.refusal_precision),
            _fmt(r.refusal_recall),
            _fmt(r.near_miss_refusal_rate),
            _fmt(r.near_miss_auroc),
            r.rule,
        )
    Console(width=max(console.width, 200)).print(table)
    if summary["recall_at_k"] is not None:
        console.print(f"recall@{run.k} of in-scope questions: {summary['recall_at_k']:.3f}")
    if correction is not None:
        console.print(f"corrective retrieval: {json.dumps(summary['corrective'])}")


def _eval_correction(settings: Settings, artifact: Any) -> Any:
    """B10 in eval when RAGSIFT_CORRECTIVE_ENABLED is set; it needs the artifact it is
    judged by, so only with --artifact."""
    if not settings.corrective.enabled:
        return None
    if artifact is None:
        err_console.print(
            "[red]error:[/red] RAGSIFT_CORRECTIVE_ENABLED=1 in eval needs --artifact: the"
            " retry is kept or not by that artifact's confidence"
        )
        raise typer.Exit(2)
    from ragsift.evaluation.corrective import EvalCorrection

    try:
        return EvalCorrection(
            settings.corrective, artifact, artifact.embedder_id, max_k=settings.limits.max_k
        )
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


def _warn_unless_redis(settings: Settings) -> None:
    """One line when the result cache's Redis does not answer: workers run without it
    (every query bypasses the cache) and use it again once it is back."""
    from ragsift.errors import ServiceUnavailableError
    from ragsift.retrieval.redis_cache import RedisCache

    async def probe() -> None:
        cache = RedisCache(settings.redis)
        try:
            await cache.get("ragsift-cli-probe")
        finally:
            await cache.close()

    try:
        asyncio.run(probe())
    except ServiceUnavailableError as exc:
        url = settings.masked()["redis"]["url"]
        err_console.print(
            Text.assemble(
                ("warning: ", "yellow"),
                f"Redis at {url} is not usable ({exc}); results are not cached until it"
                " answers; start it or set RAGSIFT_REDIS_URL",
            )
        )


@app.command()
def worker(
    names: Annotated[
        list[str],
        typer.Argument(
            help="Which workers to run: retrieval, indexer, audit, decision, report and/or"
            " calibration (re-fits tenants' calibrations from feedback); several share one"
            " process."
        ),
    ],
    web_port: Annotated[
        int, typer.Option(help="Port of /metrics, /healthz, /readyz.", min=1, max=65_535)
    ] = 6066,
    web_host: Annotated[
        str | None,
        typer.Option(
            help="Interface of those pages (default RAGSIFT_WORKER_WEB_HOST, 127.0.0.1);"
            " 0.0.0.0 in containers."
        ),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="crit, error, warn, info or debug.")] = "info",
    audit_dir: Annotated[
        Path | None, typer.Option(help="Audit sink folder (default <data dir>/audit).")
    ] = None,
) -> None:
    """Run streaming workers that consume from Kafka: retrieval answers queries, indexer
    indexes documents, audit writes the audit trail, decision and report turn results
    into decisions and reports."""
    from faust.worker import Worker

    from ragsift.workers.service import WORKER_NAMES, build_worker

    bad = [n for n in names if n not in WORKER_NAMES]
    if bad:
        err_console.print(f"[red]error:[/red] unknown worker {bad}; choose from {WORKER_NAMES}")
        raise typer.Exit(2)
    settings = _settings()
    try:
        faust_app, _ = build_worker(
            names,  # type: ignore[arg-type]  # names checked above
            settings,
            web_port=web_port,
            web_host=web_host,
            audit_dir=audit_dir,
        )
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    from ragsift.streams.admin import ensure_topics

    if settings.cache.enabled and {"retrieval", "indexer"} & set(names):
        _warn_unless_redis(settings)
    created = _kafka(settings, ensure_topics(settings.kafka))
    if created:
        err_console.print(f"created topics: {', '.join(created)}")
    Worker(faust_app, loglevel=loglevel).execute_from_commandline()


@app.command()
def submit(
    source: Annotated[str, typer.Argument(help="A JSONL file of query events, or - for stdin.")],
    topic: Annotated[str, typer.Option(help="Logical topic to publish to.")] = "queries",
    raw: Annotated[
        bool, typer.Option("--raw", help="Send lines as they are, without validating them.")
    ] = False,
) -> None:
    """Publish events (one JSON object per line) to a ragsift topic on Kafka. Every line
    is checked first; each rejected one is named, and makes the exit status 2."""
    import sys

    from ragsift.streams import clients
    from ragsift.streams.codec import EventCodec
    from ragsift.streams.topics import TOPICS

    if topic not in TOPICS:
        err_console.print(f"[red]error:[/red] unknown topic {topic!r}; known: {sorted(TOPICS)}")
        raise typer.Exit(2)
    settings = _settings()
    spec = TOPICS[topic]
    codec = EventCodec(spec.model)
    if source != "-" and not Path(source).is_file():
        err_console.print(f"[red]error:[/red] no such file: {source}")
        raise typer.Exit(2)
    lines = (
        sys.stdin.read().splitlines()
        if source == "-"
        else Path(source).read_text(encoding="utf-8").splitlines()
    )

    # Every line is checked before connecting: a bad file is refused without a broker.
    events: list[tuple[bytes | None, bytes]] = []
    rejected = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        payload = line.strip().encode()
        key = b""
        if not raw:
            try:
                event = codec.decode(payload)
            except RagsiftError as exc:
                err_console.print(Text.assemble(f"line {lineno}: ", ("rejected ", "red"), str(exc)))
                rejected += 1
                continue
            key = str(getattr(event, spec.key, "")).encode()
            payload = codec.encode(event)
        events.append((key or None, payload))

    async def run() -> int:
        producer = clients.producer(settings.kafka, linger_ms=5)
        try:
            await producer.start()
            for key, payload in events:
                await producer.send(spec.name(settings.kafka.topic_prefix), payload, key=key)
            await producer.flush()
        finally:
            await producer.stop()
        return len(events)

    sent = _kafka(settings, run()) if events else 0
    console.print(
        f"sent {sent} events to {spec.name(settings.kafka.topic_prefix)}; rejected {rejected}"
    )
    if rejected:
        raise typer.Exit(EXIT_USAGE)


@app.command()
def tail(
    topic: Annotated[str, typer.Argument(help="Logical topic: retrievals, audit, deadletter...")],
    from_beginning: Annotated[bool, typer.Option(help="Start at the oldest event.")] = False,
    limit: Annotated[int | None, typer.Option(help="Stop after this many events.")] = None,
    idle_timeout: Annotated[
        float | None, typer.Option(help="Stop after this many seconds without an event.")
    ] = None,
) -> None:
    """Print a topic's events, pretty-printed, as they arrive."""
    import time

    from ragsift.streams import clients
    from ragsift.streams.topics import TOPICS

    if topic not in TOPICS:
        err_console.print(f"[red]error:[/red] unknown topic {topic!r}; known: {sorted(TOPICS)}")
        raise typer.Exit(2)
    settings = _settings()
    name = TOPICS[topic].name(settings.kafka.topic_prefix)

    async def run() -> int:
        consumer = clients.consumer(
            settings.kafka,
            name,
            auto_offset_reset="earliest" if from_beginning else "latest",
        )
        shown = 0
        last = time.monotonic()
        try:
            await consumer.start()
            while limit is None or shown < limit:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, records in batches.items():
                    for record in records:
                        console.rule(f"{tp.topic}[{tp.partition}]@{record.offset}")
                        try:
                            console.print_json((record.value or b"null").decode())
                        except (UnicodeDecodeError, ValueError):
                            console.print(repr(record.value))
                        shown += 1
                        last = time.monotonic()
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    break
        finally:
            await consumer.stop()
        return shown

    shown = _kafka(settings, run())
    err_console.print(f"{shown} events from {name}")


#: hosts an unauthenticated development API may bind to: this machine only
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


@app.command()
def api(
    port: Annotated[
        int | None, typer.Option(help="Query API port (default: RAGSIFT_API_PORT or 8080).")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Interface for the query API (default: RAGSIFT_API_HOST or 127.0.0.1);"
            " pass 0.0.0.0 to expose it."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Port of /metrics, /healthz, /readyz (default: 9464)."),
    ] = None,
    metrics_host: Annotated[
        str | None,
        typer.Option(help="Interface of /metrics, /healthz, /readyz (default: 127.0.0.1)."),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Development only: accept every request without a credential"
            " (refused unless --host is a loopback address).",
        ),
    ] = False,
) -> None:
    """Serve the HTTP API: POST /v1/query, GET /v1/queries/{id} (API key or JWT needed),
    the web console at /console; /healthz, /readyz, /metrics on a separate port."""
    import signal

    from aiohttp import web

    from ragsift.api import Authenticator, QueryApi, create_admin_app, create_web_app
    from ragsift.streams.admin import ensure_topics

    settings = _settings()
    host = host or settings.api.host
    port = port or settings.api.port
    metrics_host = metrics_host or settings.api.metrics_host
    metrics_port = metrics_port or settings.api.metrics_port
    if insecure_no_auth and host not in LOOPBACK_HOSTS:
        err_console.print(
            f"[red]error:[/red] --insecure-no-auth is only allowed on a loopback --host, got {host}"
        )
        raise typer.Exit(2)
    if port == metrics_port and host == metrics_host:
        err_console.print("[red]error:[/red] the query API and metrics need different ports")
        raise typer.Exit(2)
    try:
        auth = Authenticator.from_settings(settings.api, insecure=insecure_no_auth)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if insecure_no_auth:
        err_console.print("[yellow]warning:[/yellow] --insecure-no-auth: anyone on this host")
    query_api = QueryApi(
        settings.kafka,
        auth=auth,
        settings=settings.api,
        limits=settings.limits,
        shared=_shared_results(settings),
        hub=_console_hub(settings),
    )

    _kafka(settings, ensure_topics(settings.kafka))  # unreachable brokers: one line, exit 1

    async def serve() -> None:
        runners = [
            web.AppRunner(create_web_app(query_api)),
            web.AppRunner(create_admin_app(query_api)),
        ]
        for runner, (bind, bind_port) in zip(
            runners, [(host, port), (metrics_host, metrics_port)], strict=True
        ):
            await runner.setup()
            await web.TCPSite(runner, bind, bind_port).start()
        err_console.print(
            f"query API on http://{host}:{port}, metrics on http://{metrics_host}:{metrics_port}"
        )
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            for runner in reversed(runners):
                await runner.cleanup()

    asyncio.run(serve())


#: where ``ragsift console`` listens unless told otherwise
CONSOLE_DEFAULT_PORT = 8765


@app.command("console")
def serve_console(
    data_dir: DataDir = None,
    host: Annotated[
        str,
        typer.Option(
            help="Interface to listen on; off loopback, the API's keys or JWTs are required."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the console.")] = CONSOLE_DEFAULT_PORT,
) -> None:
    """Serve the web console on the embedded runtime: ask, and watch results live."""
    import signal

    from aiohttp import web

    from ragsift.api.auth import Authenticator
    from ragsift.console_server import create_console_app

    try:
        # credentials first: a console that may not start opens (and creates) nothing
        auth = Authenticator.from_settings(_settings().api, insecure=host in LOOPBACK_HOSTS)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    _, runtime = _runtime(data_dir)

    async def serve() -> None:
        runner = web.AppRunner(create_console_app(runtime, auth=auth))
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
            shown = f"[{host}]" if ":" in host else host
            err_console.print(
                f"console on http://{shown}:{port}/console (data dir {runtime.data_dir};"
                " Ctrl-C stops it)"
            )
            stop = asyncio.Event()
            for signum in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(signum, stop.set)
            await stop.wait()
        finally:
            await runner.cleanup()
            await runtime.close()

    try:
        asyncio.run(serve())
    except OSError as exc:
        err_console.print(f"[red]error:[/red] cannot listen on {host}:{port}: {exc.strerror}")
        raise typer.Exit(1) from exc


def _shared_results(settings: Settings) -> Any:
    """Redis behind GET /v1/queries/{id} (None when RAGSIFT_API_RESULT_TTL_S=0)."""
    if settings.api.result_ttl_s == 0:
        return None
    import redis.asyncio as aioredis

    from ragsift.api.store import SharedResults

    redis = settings.redis
    client = aioredis.from_url(
        redis.url,
        password=redis.password.get_secret_value() if redis.password else None,
        socket_timeout=redis.socket_timeout_s,
        socket_connect_timeout=redis.socket_timeout_s,
    )
    return SharedResults(client, prefix=redis.key_prefix, ttl_s=settings.api.result_ttl_s)


def _console_hub(settings: Settings) -> Any:
    """The web console's hub (None when RAGSIFT_API_CONSOLE=false)."""
    if not settings.api.console:
        return None
    from ragsift.api.console import ConsoleHub

    return ConsoleHub(
        backlog=settings.runtime.console_backlog,
        max_tenants=settings.worker.metrics_max_tenants,
    )


keys_app = typer.Typer(
    help="API keys for `ragsift api`: create (shown once), list, revoke.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")


def _key_store() -> Any:
    from ragsift.api.auth import KeyStore

    return KeyStore(_settings().api.keys_file)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[
        list[str], typer.Option("--tenant", help="A tenant the key may act for (repeatable).")
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="query, read or admin; repeatable (default: query and read)."),
    ] = None,
    label: Annotated[str, typer.Option(help="A note: who or what holds the key.")] = "",
) -> None:
    """Create a key; it is printed once and only its sha256 is stored."""
    store = _key_store()
    try:
        key, record = store.create(tenant, scope or ["query", "read"], label)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    err_console.print(
        f"key {record.key_id} for {', '.join(record.tenants)} ({', '.join(record.scopes)})"
        f" stored in {store.path}; copy it now, it is not shown again:"
    )
    print(key)


@keys_app.command("list")
def keys_list() -> None:
    """Every key's id, tenants, scopes and state (never the key)."""
    table = Table("id", "tenants", "scopes", "label", "created", "revoked")
    for r in _key_store().records():
        table.add_row(
            r.key_id,
            ",".join(r.tenants),
            ",".join(r.scopes),
            r.label,
            r.created_at,
            r.revoked_at or "",
        )
    console.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The id shown by `keys list`.")],
) -> None:
    """Revoke a key: a running API refuses it from its next request."""
    try:
        record = _key_store().revoke(key_id)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"revoked {record.key_id} at {record.revoked_at}")


@k8s_app.command("topics")
def k8s_topics(
    out: Annotated[Path, typer.Option("--out", help="YAML file to write.")] = Path(
        "k8s/base/kafka-topics.yaml"
    ),
    prefix: Annotated[str, typer.Option(help="Topic name prefix.")] = "ragsift",
    partitions: Annotated[int, typer.Option(help="Partitions per topic.")] = 8,
    replicas: Annotated[int, typer.Option(help="Replication factor.")] = 3,
    cluster: Annotated[str, typer.Option(help="Strimzi Kafka cluster name.")] = "ragsift-kafka",
) -> None:
    """Write Strimzi KafkaTopic resources from the topic registry."""
    from ragsift.deploy_manifests import write_strimzi_topics

    path = write_strimzi_topics(
        out, prefix=prefix, partitions=partitions, replicas=replicas, cluster=cluster
    )
    console.print(f"wrote {path}")


@audit_app.command("verify")
def audit_verify(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Audit files in chain order, or a sink folder (its rotated files, then"
            " audit.jsonl).",
            exists=True,
        ),
    ],
    key_env: Annotated[
        str,
        typer.Option(help="Environment variable holding the HMAC key; unset: HMACs not checked."),
    ] = "RAGSIFT_AUDIT_HMAC_KEY",
    anchor: Annotated[
        str | None,
        typer.Option(help="A head hash recorded elsewhere; the chain must contain it."),
    ] = None,
    from_genesis: Annotated[
        bool, typer.Option(help="The files must hold the chain from its first row.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Walk the hash chain; name the first broken row and exit 1, or print a summary."""
    from ragsift.audit import GENESIS, AuditFileSink, verify_chain
    from ragsift.audit.verify import describe

    files: list[Path] = []
    for path in paths:
        files.extend(AuditFileSink.chain_files(path) if path.is_dir() else [path])
    secret = os.environ.get(key_env)
    key = secret.encode() if secret else None
    report = verify_chain(files, key=key, anchor=anchor, from_genesis=from_genesis)
    if as_json:
        console.print_json(json.dumps(describe(report)))
    elif report.problem is not None:
        err_console.print(f"[red]chain broken[/red] at {report.problem}")
    else:
        console.print(
            f"chain intact: {report.rows} rows in {len(files)} file(s), seq"
            f" {report.first_seq}..{report.last_seq}, {report.first_time} .. {report.last_time}"
        )
        console.print(f"head: {report.head}")
        if report.unchained:
            console.print(f"{report.unchained} leading rows predate the chain (not covered)")
        if report.starts_after not in (None, GENESIS):
            console.print(f"starts after {report.starts_after}: earlier rows are in other files")
        if report.macs_checked:
            console.print(f"HMAC checked with the key in {key_env}")
        elif report.macs_present:
            console.print(f"[yellow]HMACs present but not checked: {key_env} is unset[/yellow]")
    if report.problem is not None:
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``ragsift`` console script."""
    app()
