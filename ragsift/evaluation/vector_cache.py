"""A labelled set's vectors kept between runs of ``eval`` and ``calibrate`` (opt-in).

Each run of ``ragsift eval`` or ``ragsift calibrate`` on a labelled set indexes its
corpus afresh and embeds every document and question: with the default ONNX
embedder on two cores, ~25 documents a second, so a 30,000-document BEIR folder
took 1,125 s a run. ``--vector-cache DIR`` keeps the vectors in ``DIR``, one
SQLite file per embedder, and a later run embeds only what it has not seen: the
same folder's second run took 28 s, and printed the same JSON.

What is kept: per text, the SHA-256 of its UTF-8 bytes and its vector; never the
text. Vectors of a corpus still say something about it, so nothing is kept
unless asked for. A file is trusted only while a fixed set of
:data:`CANARIES` embeds to the vectors stored with it (an upgraded model,
tokenizer or pooling under the same embedder id moves them, and the file is
emptied). A file that cannot be read or written costs the time it would have
saved, with a warning, and no more: the run embeds as it would without it.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np

from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.embedders.base import FloatMatrix, WrappedEmbedder, file_stem

__all__ = ["CANARIES", "CachedVectors", "with_vector_cache"]

log = logging.getLogger(__name__)

#: Embedded on opening a file and compared with the copies stored in it.
CANARIES: Final = (
    "What is the capital of France?",
    "The warranty covers defects in materials and workmanship for two years.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "How many days do I have to return a device?",
)
#: Largest difference of a canary from its stored copy (unit-norm rows; another
#: model or pooling moves them by tenths).
TOLERANCE: Final = 1e-4
#: Part of the file name: a file of another layout is never read as this one.
FORMAT: Final = "v1"
#: Rows looked up or written per SQL statement (SQLite's variable limit is 32,766).
_CHUNK: Final = 900


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class CachedVectors(WrappedEmbedder):
    """``inner``, answering texts it has embedded before from ``path`` (module doc).

    Not thread-safe: one run embeds one batch at a time.
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        super().__init__(inner)
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._opened = False
        self.hits = 0
        self.misses = 0

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        db = await self._open()
        if db is None or not texts:
            return await self.inner.embed(texts)
        keys = [_key(t) for t in texts]
        found = self._lookup(db, sorted(set(keys)))
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            fresh = np.asarray(await self.inner.embed([t for _, t in missing]), dtype=np.float32)
            new = {k: v for (k, _), v in zip(missing, fresh, strict=True)}
            self._store(db, new)
            found.update(new)
        embedded = {k for k, _ in missing}
        now = sum(k in embedded for k in keys)  # a text asked twice counts twice
        self.misses += now
        self.hits += len(keys) - now
        return np.stack([found[k] for k in keys])

    def close(self) -> None:
        """Close the file (a later call opens it again)."""
        if self._db is not None:
            self._db.close()
        self._db, self._opened = None, False

    async def _open(self) -> sqlite3.Connection | None:
        if self._opened:
            return self._db
        self._opened = True
        canaries = np.asarray(await self.inner.embed(list(CANARIES)), dtype=np.float32)
        db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30.0)
            db.execute("PRAGMA journal_mode=WAL")  # two runs may share a file
            with db:
                db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, v BLOB)")
                db.execute("CREATE TABLE IF NOT EXISTS canaries (i INTEGER PRIMARY KEY, v BLOB)")
            stored = db.execute("SELECT v FROM canaries ORDER BY i").fetchall()
            if not self._matches(stored, canaries):
                if stored:
                    log.warning(
                        "vector cache %s no longer matches %s: emptied", self.path, self.embedder_id
                    )
                with db:
                    db.execute("DELETE FROM vectors")
                    db.execute("DELETE FROM canaries")
                    db.executemany(
                        "INSERT INTO canaries (i, v) VALUES (?, ?)",
                        [(i, v.tobytes()) for i, v in enumerate(canaries)],
                    )
        except (sqlite3.Error, OSError) as exc:
            log.warning("vector cache %s unusable (%s): embedding everything", self.path, exc)
            if db is not None:
                db.close()
            return None
        self._db = db
        return db

    def _matches(self, stored: list[tuple[bytes]], canaries: FloatMatrix) -> bool:
        rows = [row for (v,) in stored if (row := self._row(v)) is not None]
        if len(rows) != len(CANARIES):
            return False
        return float(np.max(np.abs(np.stack(rows) - canaries))) <= TOLERANCE

    def _row(self, blob: object) -> FloatMatrix | None:
        """A stored vector, or None where the bytes are not one of this embedder's."""
        if not isinstance(blob, bytes) or len(blob) != 4 * self.dim:
            return None
        row = np.frombuffer(blob, dtype=np.float32)
        return row if np.isfinite(row).all() else None

    def _lookup(self, db: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, FloatMatrix]:
        found: dict[bytes, FloatMatrix] = {}
        try:
            for start in range(0, len(keys), _CHUNK):
                part = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(part))
                for key, blob in db.execute(
                    f"SELECT key, v FROM vectors WHERE key IN ({marks})",  # only ? marks
                    part,
                ):
                    row = self._row(blob)
                    if row is not None:
                        found[bytes(key)] = row
        except sqlite3.Error as exc:
            self._give_up(exc)
            return {}
        return found

    def _store(self, db: sqlite3.Connection, rows: dict[bytes, FloatMatrix]) -> None:
        blobs = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in rows.items()]
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO vectors (key, v) VALUES (?, ?)", blobs)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def _give_up(self, exc: Exception) -> None:
        log.warning("vector cache %s failed (%s): embedding everything", self.path, exc)
        self.close()
        self._opened = True  # stays off for this run


def with_vector_cache(embedder: Embedder, directory: Path | None) -> Embedder:
    """``embedder`` with its vectors kept in ``directory`` (None: as it is)."""
    if directory is None:
        return embedder
    name = file_stem(embedder.embedder_id) + f".{FORMAT}.sqlite3"
    return CachedVectors(embedder, directory.expanduser() / name)
