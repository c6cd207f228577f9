"""``ragsift documents``: what a tenant has indexed in a collection of the embedded runtime."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from ragsift.cli.common import (
    Collection,
    DataDir,
    Tenant,
    _check_names,
    _embedded,
    _fail,
    _runtime,
    console,
)
from ragsift.cli.embedded import _require_documents


def documents(
    tenant: Tenant,
    collection: Collection = "default",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {document id: chunks} as JSON.")
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """List a tenant's documents in a collection, each with its chunks: what `ingest`
    wrote, and what `ingest --prune` would keep or remove."""
    _check_names(tenant=tenant, collection=collection)
    _, runtime = _runtime(data_dir, existing=True, answers=False)

    async def run() -> dict[str, int]:
        async with runtime:
            await _require_documents(runtime, tenant, collection)
            listed: dict[str, int] = await runtime.index.documents(collection, tenant)
            return listed

    try:
        listed = _embedded(run())
    except ValueError as exc:  # more documents than one facet lists whole
        _fail(str(exc))
    if as_json:
        console.print_json(json.dumps(listed, sort_keys=True))
        return
    chunks = sum(listed.values())
    console.print(
        f"tenant {tenant!r}, collection {collection!r}: {len(listed)} documents, {chunks} chunks"
    )
    table = Table("document", "chunks")
    for doc_id, count in sorted(listed.items()):
        table.add_row(doc_id, str(count))
    console.print(table)
