"""The bundled probe bank's vectors, embedded once per embedder and kept.

Every probe of a collection (``ragsift ingest``, ``calibrate --collection``,
``calibrations reprobe``, the indexer's re-probes, ``eval --probes``) and every
``calibrate --dataset`` level pass embeds the same bundled questions: 3,480 of
them took 18 s with the default ONNX embedder on two cores, on each run. Here
they are embedded once per process and kept in a file per embedder under
``RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR`` (``~/.cache/ragsift/probe-vectors``;
empty: this process only).

Only the bank's own texts are kept, never a user's question or document. A
kept file is trusted only after :data:`CHECKED_ROWS` of its rows, spread over
it, are embedded afresh and match (an upgraded model, tokenizer or pooling
under the same id makes them differ, and the file is dropped). A file that
cannot be read or written costs the time it would have saved, and no more.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.embedders.base import FloatMatrix, WrappedEmbedder, file_stem

__all__ = ["BankVectors", "with_bank_vectors"]

log = logging.getLogger(__name__)

#: Rows of a kept file embedded again before it is trusted.
CHECKED_ROWS: Final = 16
#: Largest difference of a re-embedded row from its kept copy (unit-norm rows; a
#: different model or pooling moves them by tenths).
TOLERANCE: Final = 1e-4
#: Part of the file name: a file of another layout is never read as this one.
FORMAT: Final = "v1"

#: Per process: (directory, embedder class, embedder id) -> text -> vector.
_KEPT: dict[tuple[str, str, str], dict[str, npt.NDArray[np.float32]]] = {}


@functools.cache
def _bank_texts() -> frozenset[str]:
    from ragsift.evaluation.probes import bundled_probes

    return frozenset(p.text for p in bundled_probes())


def _file_name(embedder_id: str) -> str:
    return file_stem(embedder_id) + f".{FORMAT}.npz"


class BankVectors(WrappedEmbedder):
    """``inner``, with the bundled bank's texts answered from kept vectors.

    Any other text is embedded by ``inner`` as it would be; a batch mixing both
    embeds only what is not kept, in one call.
    """

    def __init__(self, inner: Embedder, directory: Path | None) -> None:
        super().__init__(inner)
        self.directory = directory
        self._bank = _bank_texts()
        key = (str(directory), type(inner).__qualname__, inner.embedder_id)
        self._kept = _KEPT.get(key)
        self._key = key

    @property
    def path(self) -> Path | None:
        """The file this embedder's bank vectors are kept in (None: this process only)."""
        return None if self.directory is None else self.directory / _file_name(self.embedder_id)

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        kept = await self._loaded()
        missing = sorted({t for t in texts if t not in kept})
        if not missing:
            return np.stack([kept[t] for t in texts]) if texts else await self.inner.embed([])
        fresh = np.asarray(await self.inner.embed(missing), dtype=np.float32)
        by_text = dict(zip(missing, fresh, strict=True))
        added = {t: v for t, v in by_text.items() if t in self._bank}
        if added:
            kept.update(added)
            self._save(kept)
        return np.stack([kept[t] if t in kept else by_text[t] for t in texts])

    async def keep(self, texts: Sequence[str]) -> None:
        """Embed the bank's texts among ``texts`` that are not kept yet, in one call, and
        write the file once (a run then embeds in batches without rewriting it each time)."""
        kept = await self._loaded()
        await self.embed(sorted({t for t in texts if t in self._bank and t not in kept}))

    async def _loaded(self) -> dict[str, npt.NDArray[np.float32]]:
        if self._kept is None:  # another wrapper of this process may have read it since
            self._kept = _KEPT.get(self._key)
        if self._kept is None:
            self._kept = _KEPT[self._key] = await self._read()
        return self._kept

    async def _read(self) -> dict[str, npt.NDArray[np.float32]]:
        path = self.path
        if path is None:
            return {}
        try:
            if not path.is_file():  # a name too long for the file system raises here
                return {}
            with np.load(path, allow_pickle=False) as data:
                texts = [str(t) for t in data["texts"]]
                vectors = np.asarray(data["vectors"], dtype=np.float32)
            if vectors.shape != (len(texts), self.dim):
                raise ValueError(f"vectors of shape {vectors.shape} for {len(texts)} texts")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.warning("probe vectors in %s are unreadable (%s): embedding the bank", path, exc)
            return {}
        kept = {t: v for t, v in zip(texts, vectors, strict=True) if t in self._bank}
        if not kept:
            return {}
        names = sorted(kept)
        checked = [names[i] for i in np.linspace(0, len(names) - 1, CHECKED_ROWS).astype(int)]
        again = np.asarray(await self.inner.embed(checked), dtype=np.float32)
        drift = float(np.max(np.abs(again - np.stack([kept[t] for t in checked]))))
        if drift > TOLERANCE:
            log.warning(
                "probe vectors in %s no longer match %s (off by %.3g): embedding the bank again",
                path,
                self.embedder_id,
                drift,
            )
            return {}
        return kept

    def _save(self, kept: dict[str, npt.NDArray[np.float32]]) -> None:
        path = self.path
        if path is None:
            return
        names = sorted(kept)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written aside and renamed: a reader (another process) never sees half a file.
            handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz")
            try:
                with os.fdopen(handle, "wb") as out:
                    vectors = np.stack([kept[t] for t in names])
                    np.savez(out, texts=np.asarray(names), vectors=vectors)
                os.replace(temporary, path)
            finally:
                Path(temporary).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot keep probe vectors in %s (%s): this process only", path, exc)


def with_bank_vectors(embedder: Embedder, directory: Path | str | None = "settings") -> BankVectors:
    """``embedder`` with the bank's vectors kept (``directory``: where; ``"settings"``:
    ``RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR``; None: this process only)."""
    if isinstance(embedder, BankVectors):
        return embedder
    if directory == "settings":
        from ragsift.settings import CalibrationSettings

        setting = CalibrationSettings().probe_vectors_dir.strip()
        directory = None if setting in ("", "off") else Path(setting).expanduser()
    return BankVectors(embedder, None if directory is None else Path(directory))
