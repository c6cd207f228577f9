"""``ragsift submit PATH --files``: documents published to the documents topic as
upserts, and with ``--prune`` deletes for the documents no longer under the folder.

The streaming runtime's index follows the compacted documents topic, so the topic
is what ``--prune`` compares the folder with (:mod:`ragsift.streams.live_documents`):
a document whose last record there is an upsert and whose file is gone gets a
tombstone, which the indexer applies as a delete and compaction then drops.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.text import Text

from ragsift.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    _kafka,
    console,
    err_console,
    print_error,
    read_documents,
)
from ragsift.cli.progress import _stage_progress
from ragsift.cli.prune import kept_ids, prune_blocked, refuse_prune_of_file, show_pruned
from ragsift.cli.publish import Event, report_refused, send_events
from ragsift.settings import Settings

__all__ = ["document_events", "submit_files"]


def submit_files(
    settings: Settings,
    path: Path,
    tenant: str,
    collection: str,
    source_type: str,
    *,
    prune: bool = False,
) -> None:
    """Publish the documents under ``path``; with ``prune``, then a tombstone for each of
    the tenant's documents of the collection that the topic holds and the folder no
    longer does. Exit 2 when a document was rejected (after publishing the others)."""
    from ragsift.streams.topics import TOPICS

    if prune:
        refuse_prune_of_file(path, tenant, collection)
    name = TOPICS["documents"].name(settings.kafka.topic_prefix)
    skipped: list[tuple[Path, str]] = []
    events, sources, kept, rejected = document_events(
        path, tenant, collection, source_type, skipped
    )
    stale: list[str] = []
    prune = prune and not prune_blocked(path, skipped)
    if prune:  # read before anything is sent: a failed read publishes nothing
        live = _kafka(settings, _live(settings, name, tenant, collection))
        stale = sorted(live - kept_ids(kept, path, skipped))
    tombstones: list[Event] = [(f"{tenant}/{collection}/{d}".encode(), None) for d in stale]
    sending = [*events, *tombstones]
    refused = _kafka(settings, send_events(settings, name, sending)) if sending else []
    labels = [*sources, *(f"delete of {d}" for d in stale)]
    report_refused(refused, labels.__getitem__, name)
    unwritten = {r.index for r in refused}
    written = sum(i not in unwritten for i in range(len(events)))
    lost = f"; not written {len(refused)}" if refused else ""
    console.print(f"sent {written} events to {name}; rejected {rejected}{lost}")
    if prune:
        show_pruned([d for i, d in enumerate(stale, len(events)) if i not in unwritten], path)
    if refused:
        raise typer.Exit(EXIT_FAILURE)
    if rejected:
        raise typer.Exit(EXIT_USAGE)


async def _live(settings: Settings, name: str, tenant: str, collection: str) -> set[str]:
    from ragsift.streams.live_documents import TopicReadTimeout, live_documents

    with _stage_progress() as tick:
        try:
            return await live_documents(
                settings.kafka,
                name,
                tenant,
                collection,
                progress=lambda done, total: tick("reading the documents topic", done, total),
            )
        except TopicReadTimeout as exc:
            print_error(f"--prune could not read what the topic holds: {exc}; nothing was sent")
            raise typer.Exit(1) from exc


def document_events(
    path: Path,
    tenant: str,
    collection: str,
    source_type: str,
    skipped: list[tuple[Path, str]] | None = None,
) -> tuple[list[Event], list[str], list[str], int]:
    """The documents under ``path`` as keyed, encoded upserts, and where each came from;
    the ids of every document read, those rejected included (``--prune`` keeps them);
    and how many were rejected (each named on stderr: invalid, or larger as an event
    than a consumer reads). The event id is derived from the tenant, collection,
    document and text, so publishing a file again is the same event."""
    import hashlib

    from pydantic import ValidationError

    from ragsift.errors import describe_validation_error
    from ragsift.schemas import DocumentEvent
    from ragsift.streams.codec import MAX_PAYLOAD_BYTES, EventCodec
    from ragsift.streams.topics import TOPICS

    documents = read_documents(path, source_type, skipped)
    spec, codec = TOPICS["documents"], EventCodec(DocumentEvent)
    events: list[Event] = []
    sources: list[str] = []
    rejected = 0
    for doc in documents:
        where = doc.source or doc.doc_id
        digest = hashlib.sha256(
            "\0".join((tenant, collection, doc.doc_id, doc.text)).encode("utf-8", "replace")
        ).hexdigest()[:32]
        try:
            event = DocumentEvent(
                event_id=f"doc-{digest}",
                tenant_id=tenant,
                collection=collection,
                doc_id=doc.doc_id,
                text=doc.text,
                title=doc.title,
                source=doc.source,
                source_type=doc.source_type,
                metadata=doc.metadata,
            )
        except ValidationError as exc:
            err_console.print(
                Text.assemble(f"{where}: ", ("rejected ", "red"), describe_validation_error(exc))
            )
            rejected += 1
            continue
        payload = codec.encode(event)
        if len(payload) > MAX_PAYLOAD_BYTES:  # the indexer's codec would dead-letter it
            err_console.print(
                Text.assemble(
                    f"{where}: ",
                    ("rejected ", "red"),
                    f"{len(payload)} bytes as an event, over the {MAX_PAYLOAD_BYTES} a worker"
                    " reads: split the file",
                )
            )
            rejected += 1
            continue
        events.append((spec.key_of(event).encode(), payload))
        sources.append(where)
    if not events and not rejected:
        print_error(f"nothing to publish under {path}: no document with text in it")
        raise typer.Exit(EXIT_USAGE)
    return events, sources, [d.doc_id for d in documents], rejected
