"""``--prune``, shared by ``ingest`` (the embedded index) and ``submit --files`` (the
documents topic): which documents a folder keeps, and the line saying what went."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import typer

from ragsift.cli.common import EXIT_USAGE, console, print_error, print_warning

__all__ = ["kept_ids", "prune_blocked", "refuse_prune_of_file", "show_pruned"]

#: Removed document ids named in the ``pruned`` line; the rest are counted.
PRUNED_SHOWN = 5


def refuse_prune_of_file(path: Path, tenant: str, collection: str) -> None:
    """Exit 2 for ``--prune`` with one file: every other document would go."""
    if path.is_file():
        print_error(
            f"--prune needs a folder: with the one file {path} it would remove every other"
            f" document of tenant {tenant!r} in collection {collection!r}"
        )
        raise typer.Exit(EXIT_USAGE)


def prune_blocked(path: Path, skipped: Iterable[tuple[Path, str]]) -> bool:
    """Whether ``--prune`` must remove nothing: a folder under ``path`` could not be
    listed, or a JSONL file under it could not be read, so the documents indexed from
    them cannot be told from removed ones (it once removed them all: a JSONL line's
    document is named by the id inside it). Says so."""
    from ragsift.ingest.folders import CANNOT_READ, UNREADABLE_FOLDER

    skipped = list(skipped)
    unread = [str(folder) for folder, why in skipped if why == UNREADABLE_FOLDER]
    lines = [
        str(file)
        for file, why in skipped
        if file.suffix.lower() == ".jsonl" and why.startswith(CANNOT_READ)
    ]
    for count, what, names in ((len(unread), "folder", unread), (len(lines), "JSONL file", lines)):
        if count:
            shown = ", ".join(names[:PRUNED_SHOWN])
            print_warning(
                f"--prune removed nothing: {count} {what}(s) under {path} could not be"
                f" read ({shown}), and the documents indexed from them cannot be told from"
                " removed ones"
            )
    return bool(unread or lines)


def kept_ids(read: Iterable[str], path: Path, skipped: Iterable[tuple[Path, str]]) -> set[str]:
    """The documents ``--prune`` keeps: those ``read`` under the folder ``path`` now, and
    those passed over this time (a file unreadable or empty, a JSONL line with no text),
    whose indexed versions stay."""
    from ragsift.ingest.loaders import empty_line_doc_ids, file_doc_id

    skipped = list(skipped)
    files = {file_doc_id(f, path) for f, _ in skipped if f.exists()}
    return set(read) | files | empty_line_doc_ids(skipped, path)


def show_pruned(removed: list[str], path: Path) -> None:
    """One line naming the documents ``--prune`` removed (the first few, then a count)."""
    if not removed:
        console.print(f"pruned nothing: every document of the collection is under {path}")
        return
    shown = ", ".join(removed[:PRUNED_SHOWN])
    more = f" and {len(removed) - PRUNED_SHOWN} more" if len(removed) > PRUNED_SHOWN else ""
    console.print(f"pruned {len(removed)} documents no longer under {path}: {shown}{more}")
