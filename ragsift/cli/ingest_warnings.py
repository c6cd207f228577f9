"""What ``ragsift ingest`` warns about beyond its counts: a document that replaced one
of its id indexed from another file, text that is mostly not English, and an ingest
stopped midway."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragsift.cli.common import print_warning
from ragsift.ingest.language_watch import language_warning
from ragsift.retrieval.language import language_shares

if TYPE_CHECKING:
    from ragsift.ingest.indexer import IngestReport

__all__ = [
    "warn_after_ingest",
    "warn_interrupted",
    "warn_language",
    "warn_other_sources",
    "warn_probing_interrupted",
]


def warn_after_ingest(
    report: IngestReport, texts: Iterable[str], tenant: str, collection: str
) -> None:
    """What an ingest that completed warns about: documents that replaced others of
    their id (:func:`warn_other_sources`), then text that is mostly not English."""
    warn_other_sources(report.other_sources)
    warn_language(texts, tenant, collection)


def warn_language(texts: Iterable[str], tenant: str, collection: str) -> None:
    """One warning when most of the text ingested looks non-English: its share, its
    main language, and that the confidences will not mean what they say."""
    message = language_warning(language_shares(texts), tenant, collection)
    if message is not None:
        print_warning(message)


def warn_other_sources(replaced: Sequence[tuple[str, str, str]], shown: int = 5) -> None:
    """One warning line per document that replaced one of its id from another source
    (two files that map to one document id across ingests), the first ``shown``."""
    for doc_id, before, now in replaced[:shown]:
        print_warning(
            f"{now!r} replaced document {doc_id!r}, indexed before from {before!r}: a"
            " document's id is its path under the folder ingested (a JSONL line's: its"
            " 'id' or 'doc_id'), made safe; rename one, or give it another id, to keep both"
        )
    if len(replaced) > shown:
        print_warning(f"... and {len(replaced) - shown} more documents like it")


def warn_interrupted() -> None:
    """Ctrl-C during an ingest: what was written stays, and how to complete it."""
    print_warning(
        "interrupted: a document being written may be indexed in part and is served so;"
        " run the same ingest again to complete it (documents indexed as they are now"
        " are skipped)"
    )


def warn_probing_interrupted(tenant: str, collection: str, data_dir: Path | None) -> None:
    """Ctrl-C while an ingest probes its scope: the documents are in, the calibration
    is not re-made, and how to make it."""
    where = "" if data_dir is None else f" --data-dir {shlex.quote(str(data_dir))}"
    print_warning(
        "interrupted while probing: the documents are indexed, but the calibration of"
        f" tenant {tenant!r} on collection {collection!r} is as it was; run `ragsift"
        f" calibrations reprobe --collection {shlex.quote(collection)} --tenant"
        f" {shlex.quote(tenant)}{where}` to probe it"
    )
