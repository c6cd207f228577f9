"""Model files checked against the digests ragsift pins (the embedder's, the reranker's)."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_sha256"]

_HASH_CHUNK = 1 << 20  # read a model of tens of MB a MiB at a time


def file_sha256(path: Path) -> str:
    """The file's sha256, hex."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
