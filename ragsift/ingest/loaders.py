"""Read .txt, .md and .jsonl files into source documents for ingestion."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsift.errors import InvalidEventError

__all__ = ["SUPPORTED_SUFFIXES", "SourceDocument", "iter_documents", "safe_doc_id"]

SUPPORTED_SUFFIXES = (".txt", ".md", ".jsonl")
_SOURCE_TYPES = {"government", "regulatory", "market_data", "third_party", "internal", "unknown"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document to index, before chunking."""

    doc_id: str
    text: str
    title: str | None = None
    source: str | None = None
    source_type: str = "unknown"
    metadata: dict[str, Any] = field(default_factory=dict)


def safe_doc_id(raw: str) -> str:
    """A document id in the contract's charset (letters, digits, ``_.:-``), max 128 chars."""
    cleaned = _UNSAFE.sub("-", raw).strip("-.:_") or "doc"
    return cleaned[:128]


def iter_documents(path: Path, *, source_type: str = "unknown") -> Iterator[SourceDocument]:
    """Documents under ``path`` (a file or a folder, searched recursively, sorted)."""
    if source_type not in _SOURCE_TYPES:
        raise InvalidEventError(
            f"source_type must be one of {sorted(_SOURCE_TYPES)}, got {source_type!r}"
        )
    if not path.exists():
        raise InvalidEventError(f"no such file or folder: {path}")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    base = path.parent if path.is_file() else path
    for file in files:
        if file.suffix.lower() not in SUPPORTED_SUFFIXES:
            if path.is_file():
                raise InvalidEventError(
                    f"{file}: unsupported file type {file.suffix!r};"
                    f" supported: {SUPPORTED_SUFFIXES}"
                )
            continue
        if file.suffix.lower() == ".jsonl":
            yield from _jsonl(file, source_type)
        else:
            text = file.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                rel = file.relative_to(base).as_posix()
                yield SourceDocument(
                    doc_id=safe_doc_id(rel),
                    text=text,
                    title=_title(text) or file.stem,
                    source=rel,
                    source_type=source_type,
                )


def _title(text: str) -> str | None:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.lstrip("#").strip()[:200] or None
    return None


def _jsonl(file: Path, default_type: str) -> Iterator[SourceDocument]:
    with file.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidEventError(f"{file}:{lineno}: not JSON ({exc.msg})") from exc
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise InvalidEventError(f"{file}:{lineno}: each line needs a string 'text' field")
            raw_id = row.get("doc_id") or row.get("id") or f"{file.stem}-{lineno}"
            stype = row.get("source_type", default_type)
            if stype not in _SOURCE_TYPES:
                raise InvalidEventError(
                    f"{file}:{lineno}: source_type must be one of {sorted(_SOURCE_TYPES)},"
                    f" got {stype!r}"
                )
            yield SourceDocument(
                doc_id=safe_doc_id(str(raw_id)),
                text=row["text"],
                title=row.get("title"),
                source=row.get("source") or f"{file.name}:{lineno}",
                source_type=stype,
                metadata={
                    k: v
                    for k, v in row.items()
                    if k not in {"text", "doc_id", "id", "title", "source", "source_type"}
                },
            )
