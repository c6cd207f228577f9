"""The streaming runtime on Kafka: ``topics``, ``worker``, ``submit`` and ``tail``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ragsift.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    _check_names,
    _fail,
    _kafka,
    _settings,
    console,
    err_console,
    print_error,
    print_warning,
)
from ragsift.cli.publish import report_refused, send_events
from ragsift.cli.submit_files import submit_files
from ragsift.errors import RagsiftError
from ragsift.settings import Settings

__all__ = ["submit", "tail", "topics", "worker"]


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
        from ragsift.streams.admin import prepare_topics

        created, shortfalls = _kafka(settings, prepare_topics(settings.kafka))
        console.print(f"created {len(created)} topics: {', '.join(created) or '-'}")
        for note in shortfalls:
            print_warning(note)
    table = Table("topic", "contract", "key", "cleanup", "retention (days)", "what")
    for spec in TOPICS.values():
        days = "-" if spec.retention_ms is None else f"{spec.retention_ms / 86_400_000:g}"
        table.add_row(
            spec.name(prefix),
            spec.model.__name__,
            spec.key_name,
            spec.cleanup_policy,
            days,
            spec.description,
        )
    console.print(table)


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
    runtime: Annotated[
        str | None,
        typer.Option(
            help="plain (aiokafka clients in a batch loop) or faust (needed for exactly_once);"
            " default RAGSIFT_WORKER_RUNTIME. One consumer group runs one runtime at a time."
        ),
    ] = None,
) -> None:
    """Run streaming workers that consume from Kafka: retrieval answers queries, indexer
    indexes documents, audit writes the audit trail, decision and report turn results
    into decisions and reports."""
    from ragsift.streams.assembly import WORKER_NAMES, assemble

    bad = [n for n in names if n not in WORKER_NAMES]
    if bad:
        print_error(f"unknown worker {bad}; choose from {WORKER_NAMES}")
        raise typer.Exit(2)
    from ragsift.streams.plain import LOG_LEVELS

    if loglevel.lower() not in LOG_LEVELS:  # the plain runtime read one it did not know as info
        _fail(f"--loglevel must be one of {', '.join(LOG_LEVELS)}, got {loglevel!r}")
    settings = _settings()
    chosen = runtime or settings.worker.runtime
    if chosen not in ("plain", "faust"):
        print_error(f"unknown runtime {chosen!r}; choose plain or faust")
        raise typer.Exit(2)
    try:
        parts = assemble(
            names,  # type: ignore[arg-type]  # names checked above
            settings,
            audit_dir=audit_dir,
        )
        if chosen == "plain":
            from ragsift.streams.plain import PlainWorker

            plain = PlainWorker(parts, settings, web_port=web_port, web_host=web_host)
        else:
            from ragsift.streams.worker import faust_worker

            faust_app = faust_worker(parts, settings, web_port=web_port, web_host=web_host)
    except RagsiftError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from exc
    from ragsift.streams.admin import prepare_topics

    if settings.cache.enabled and {"retrieval", "indexer"} & set(names):
        _warn_unless_redis(settings)
    created, shortfalls = _kafka(settings, prepare_topics(settings.kafka))
    if created:
        err_console.print(f"created topics: {', '.join(created)}")
    for note in shortfalls:
        print_warning(note)
    if chosen == "plain":
        from ragsift.streams.plain import run_plain_worker

        try:
            run_plain_worker(plain, loglevel)
        except RagsiftError as exc:
            print_error(str(exc))
            raise typer.Exit(1) from exc
        return
    from faust.worker import Worker

    Worker(faust_app, loglevel=loglevel).execute_from_commandline()


def submit(
    source: Annotated[
        str,
        typer.Argument(
            help="A JSONL file of events, or - for stdin; with --files, a document file or folder."
        ),
    ],
    topic: Annotated[str, typer.Option(help="Logical topic to publish to.")] = "queries",
    raw: Annotated[
        bool, typer.Option("--raw", help="Send lines as they are, without validating them.")
    ] = False,
    files: Annotated[
        bool,
        typer.Option(
            "--files",
            help="Publish the documents under SOURCE (.txt/.md/.html/.pdf/.docx/.odt/.epub/"
            ".jsonl, read as `ragsift ingest` reads them) to the documents topic, each an upsert of"
            " --tenant's --collection. A file published again is the same event.",
        ),
    ] = False,
    tenant: Annotated[
        str | None, typer.Option("--tenant", "-t", help="With --files: whose documents.")
    ] = None,
    collection: Annotated[
        str, typer.Option("--collection", "-c", help="With --files: the collection.")
    ] = "default",
    source_type: Annotated[
        str,
        typer.Option(help="With --files: where the documents come from, as for ingest."),
    ] = "unknown",
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="With --files: then publish a delete (a tombstone) for each of --tenant's"
            " documents of --collection that the documents topic holds and the folder SOURCE"
            " no longer does (files deleted or renamed since they were published). A file"
            " passed over this time (unreadable, empty) or rejected keeps its document; a"
            " folder or JSONL file that cannot be read stops the prune (no tombstones).",
        ),
    ] = False,
) -> None:
    """Publish events (one JSON object per line) to a ragsift topic on Kafka, or with
    --files a folder of documents to the documents topic (--prune: and deletes for those
    no longer in it). Every event is checked first; each rejected one is named, and
    makes the exit status 2."""
    import sys

    from ragsift.streams.codec import EventCodec
    from ragsift.streams.topics import TOPICS

    if files:
        if topic not in ("queries", "documents"):  # "queries" is the default, not a choice
            print_error(f"--files publishes to the documents topic, not {topic!r}")
            raise typer.Exit(2)
        topic = "documents"
    if topic not in TOPICS:
        print_error(f"unknown topic {topic!r}; known: {sorted(TOPICS)}")
        raise typer.Exit(2)
    settings = _settings()
    spec = TOPICS[topic]
    codec = EventCodec(spec.model)
    if files:
        if tenant is None:
            print_error("--files needs --tenant: whose documents they are")
            raise typer.Exit(2)
        _check_names(tenant=tenant, collection=collection)  # once, not per document
        submit_files(settings, Path(source), tenant, collection, source_type, prune=prune)
        return
    if prune:
        print_error("--prune goes with --files: it compares a folder with the documents topic")
        raise typer.Exit(2)
    if source != "-" and not Path(source).is_file():
        print_error(f"no such file: {source}")
        raise typer.Exit(2)
    # Bytes, cut at line ends only: a line that is not UTF-8 is rejected by the codec
    # like any other bad line, and U+2028 inside a JSON string does not cut it.
    lines = (sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()).splitlines()

    # Every line is checked before connecting: a bad file is refused without a broker.
    events: list[tuple[bytes | None, bytes | None]] = []
    linenos: list[int] = []
    rejected = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        payload = line.strip()
        key = b""
        if not raw:
            try:
                event = codec.decode(payload)
            except RagsiftError as exc:
                err_console.print(Text.assemble(f"line {lineno}: ", ("rejected ", "red"), str(exc)))
                rejected += 1
                continue
            key = spec.key_of(event).encode()
            payload = codec.encode(event)
        events.append((key or None, payload))
        linenos.append(lineno)

    name = spec.name(settings.kafka.topic_prefix)
    refused = _kafka(settings, send_events(settings, name, events)) if events else []
    report_refused(refused, lambda i: f"line {linenos[i]}", name)
    lost = f"; not written {len(refused)}" if refused else ""
    console.print(f"sent {len(events) - len(refused)} events to {name}; rejected {rejected}{lost}")
    if refused:
        raise typer.Exit(EXIT_FAILURE)
    if rejected:
        raise typer.Exit(EXIT_USAGE)


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
        print_error(f"unknown topic {topic!r}; known: {sorted(TOPICS)}")
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
