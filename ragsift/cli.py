"""The ``ragsift`` command (Typer + Rich)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from ragsift import __version__
from ragsift.errors import RagsiftError
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
err_console = Console(stderr=True)


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


def _kafka(settings: Settings, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` against the cluster; a broker that cannot be reached is a one-line error."""
    from aiokafka.errors import KafkaError

    try:
        return asyncio.run(work)
    except KafkaError as exc:
        err_console.print(
            f"[red]error:[/red] Kafka at {settings.kafka.bootstrap_servers}"
            f" ({settings.kafka.security_protocol}) is not usable: {exc}"
        )
        raise typer.Exit(1) from exc


@app.command()
def version() -> None:
    """Print ragsift's version."""
    console.print(__version__)


@app.command("settings")
def show_settings() -> None:
    """Print the effective settings as JSON, secrets and credentials in URLs masked."""
    console.print_json(json.dumps(_settings().masked()))


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


def _runtime(data_dir: Path | None) -> tuple[Settings, Any]:
    from ragsift.embedded import EmbeddedRuntime

    settings = _settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    try:
        return settings, EmbeddedRuntime(settings)
    except RagsiftError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


DataDir = Annotated[
    Path | None, typer.Option("--data-dir", help="Embedded data directory (default .ragsift).")
]
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

    rows = asyncio.run(run())
    wide = Console(width=max(console.width, 150))  # the table needs room even when piped
    wide.print(demo_table(rows))
    console.print(f"audit trail (CloudEvents, JSONL): {data_dir / 'audit' / 'audit.jsonl'}")
    console.print(
        f"results: {data_dir / 'results.jsonl'}  ·  try: ragsift ask --data-dir"
        f' {data_dir} --tenant demo "{DEMO_ASK}"'
    )


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A .txt/.md/.jsonl file or a folder of them.")],
    tenant: Tenant,
    collection: Collection = "default",
    source_type: Annotated[
        str, typer.Option(help="C1 source type: government, regulatory, market_data, ...")
    ] = "unknown",
    data_dir: DataDir = None,
) -> None:
    """Chunk, embed and index documents into the embedded Qdrant Edge shard."""
    from rich.progress import Progress

    from ragsift.ingest.loaders import iter_documents

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

    report = asyncio.run(run())
    console.print(
        f"indexed {report.documents} documents as {report.chunks} chunks for tenant {tenant!r}"
        f" in collection {collection!r}"
    )


@app.command()
def ask(
    query: Annotated[str, typer.Argument(help="The question.")],
    tenant: Tenant,
    collection: Collection = "default",
    k: Annotated[int | None, typer.Option(help="Hits to fetch.")] = None,
    mode: Annotated[str, typer.Option(help="hybrid, dense or keyword.")] = "hybrid",
    selection: Annotated[str | None, typer.Option(help="threshold, adaptive or top_k.")] = None,
    task: Annotated[str | None, typer.Option(help="Adaptive task type (E2).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Ask one question on the embedded runtime and print the scored result."""
    import uuid

    from pydantic import ValidationError

    from ragsift.cli_render import print_result
    from ragsift.schemas import QueryEvent

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
            }
        )
    except ValidationError as exc:
        from ragsift.streams.codec import describe_validation_error

        err_console.print(f"[red]error:[/red] {describe_validation_error(exc)}")
        raise typer.Exit(2) from exc
    _, runtime = _runtime(data_dir)

    async def run() -> Any:
        async with runtime:
            return (await runtime.ask([event]))[0]

    result = asyncio.run(run())
    if as_json:
        console.print_json(result.model_dump_json())
    else:
        print_result(console, result)


@app.command()
def assess(
    query_id: Annotated[str, typer.Argument(help="A past query id (see results.jsonl).")],
    data_dir: DataDir = None,
) -> None:
    """B5: the confidence breakdown and recommendations of a past query."""
    from ragsift.cli_render import print_result

    _, runtime = _runtime(data_dir)
    result = runtime.find_result(query_id)
    asyncio.run(runtime.close())
    if result is None:
        err_console.print(f"[red]error:[/red] no stored result for query id {query_id!r}")
        raise typer.Exit(1)
    print_result(console, result)
    table = Table("signal", "value", title=f"breakdown ({result.breakdown.scorer})")
    for name, value in result.breakdown.signals.items():
        table.add_row(name, f"{value:.3f}")
    console.print(table)


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


def _retrieval_run(ds: Any, k: int, mode: str, reads: frozenset[str] = frozenset()) -> Any:
    """Retrieve every question; with ``reads`` (reader features), read the hits too."""

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
            run_retrieval(ds, embedder, k=k, mode=mode, progress=tick, reader=reader)
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
    """X7: ranking, calibration, answer rate and risk at the threshold: calibrated vs seeds."""
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
    run = _retrieval_run(ds, k, "hybrid", reads)
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


@app.command()
def worker(
    names: Annotated[
        list[str],
        typer.Argument(help="retrieval, indexer and/or audit (several share one process)."),
    ],
    web_port: Annotated[int, typer.Option(help="Port of /metrics, /healthz, /readyz.")] = 6066,
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
    """Run a streaming worker (a Faust app) consuming from Kafka."""
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

    created = asyncio.run(ensure_topics(settings.kafka))
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
    """Publish events (one JSON object per line) to a ragsift topic on Kafka."""
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

    async def run() -> tuple[int, int]:
        producer = clients.producer(settings.kafka, linger_ms=5)
        sent = rejected = 0
        try:
            await producer.start()
            for lineno, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                payload = line.strip().encode()
                key = b""
                if not raw:
                    try:
                        event = codec.decode(payload)
                    except RagsiftError as exc:
                        err_console.print(f"line {lineno}: [red]rejected[/red] {exc}")
                        rejected += 1
                        continue
                    key = str(getattr(event, spec.key, "")).encode()
                    payload = codec.encode(event)
                await producer.send(
                    spec.name(settings.kafka.topic_prefix), payload, key=key or None
                )
                sent += 1
            await producer.flush()
        finally:
            await producer.stop()
        return sent, rejected

    sent, rejected = _kafka(settings, run())
    console.print(
        f"sent {sent} events to {spec.name(settings.kafka.topic_prefix)}; rejected {rejected}"
    )
    if rejected:
        raise typer.Exit(1)


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
        int | None, typer.Option(help="Query API port [default: RAGSIFT_API_PORT or 8080].")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Interface for the query API [default: RAGSIFT_API_HOST or 127.0.0.1];"
            " pass 0.0.0.0 to expose it."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Port of /metrics, /healthz, /readyz [default: 9464]."),
    ] = None,
    metrics_host: Annotated[
        str | None,
        typer.Option(help="Interface of /metrics, /healthz, /readyz [default: 127.0.0.1]."),
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
    """Serve the HTTP API: POST /v1/query, GET /v1/queries/{id} (API key or JWT needed);
    /healthz, /readyz, /metrics on a separate port."""
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
    query_api = QueryApi(settings.kafka, auth=auth, settings=settings.api, limits=settings.limits)

    async def serve() -> None:
        await ensure_topics(settings.kafka)
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
        typer.Option("--scope", help="query, read or admin (repeatable) [default: query, read]."),
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
