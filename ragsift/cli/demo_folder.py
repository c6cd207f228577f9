"""Whether ``ragsift demo`` may delete its folder: only what an earlier demo wrote.

The demo starts from a clean shard by deleting its data dir. ``--data-dir .``, or a
demo folder a user then ingested their own collection or tenant into, was deleted
whole before; so was one a running console was serving (its queries then failed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

__all__ = ["not_the_demos"]


def not_the_demos(folder: Path) -> str | None:
    """Why ``demo`` must not delete ``folder``, or None: an empty folder, or one an earlier
    demo wrote (its ``corpus`` holds sample handbook pages only). ``--data-dir .`` or a
    data dir holding a user's own collections was deleted whole before."""
    from ragsift.ingest.sample import SAMPLE_DOCUMENTS

    if not folder.is_dir():
        return "is not a folder"
    if not any(folder.iterdir()):
        return None
    corpus = folder / "corpus"
    pages = {p.name for p in corpus.iterdir()} if corpus.is_dir() else set()
    if not pages or not pages <= set(SAMPLE_DOCUMENTS):
        return "holds files an earlier `ragsift demo` did not write"
    return _not_the_demos_index(folder / "qdrant")


#: The collections of the demo's shard folder (each also has its sidecar file).
_DEMO_SHARD = {"default"}


def _not_the_demos_index(shards: Path) -> str | None:
    """Why the index under a demo's folder is not the demo's alone, or None. A user's
    collection ingested into it, or a tenant of theirs in its collection, was deleted
    with it; a console still serving it answered 500 from then on."""
    from ragsift.errors import RagsiftError
    from ragsift.retrieval.edge import SIDECAR_SUFFIX, EdgeIndex

    if not shards.is_dir():
        return None
    names = {p.name.removesuffix(SIDECAR_SUFFIX) for p in shards.iterdir()}
    others = sorted({n for n in names if not n.startswith(".")} - _DEMO_SHARD)  # dotfiles: locks
    if others:
        return f"holds collections an earlier `ragsift demo` did not write ({', '.join(others)})"
    if not (shards / "default").is_dir():
        return None

    async def tenants() -> set[str]:
        index = EdgeIndex(shards)
        try:
            info = await index.collection_info("default")
        finally:
            await index.close()
        return set(info.tenants or {})

    try:
        found = asyncio.run(tenants())
    except RagsiftError as exc:  # held by a console, an ingest...; or damaged
        return f"has an index that cannot be opened now ({exc})"
    if strangers := sorted(found - {"demo"}):
        return f"indexes tenants an earlier `ragsift demo` did not ({', '.join(strangers)})"
    return None
