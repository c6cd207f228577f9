"""Read .txt, .md, .html, .pdf, .docx, .odt, .epub and .jsonl files into source documents."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsift.errors import InvalidEventError, shown_value
from ragsift.ingest.docx_text import DOCX_SUFFIX, docx_text
from ragsift.ingest.epub_text import EPUB_SUFFIX, epub_text
from ragsift.ingest.file_text import FileText, UnreadableFile
from ragsift.ingest.folders import (
    DATA_DIR,
    HIDDEN,
    LINK_IN,
    LINK_OUT,
    PLURALS,
    UNREADABLE_FOLDER,
    cannot_read,
    files_under,
    link_reason,
)
from ragsift.ingest.html_text import HTML_SUFFIXES, REDIRECT, decode_html, html_text
from ragsift.ingest.jsonl_lines import BadLines, json_line, jsonl_rows
from ragsift.ingest.odt_text import ODT_SUFFIX, odt_text
from ragsift.ingest.pdf_text import PDF_SUFFIX, pdf_text
from ragsift.ingest.plain_text import has_visible_text, plain_text
from ragsift.retrieval.records import metadata_error
from ragsift.schemas.payload import lone_surrogate

__all__ = [
    "DATA_DIR",
    "EMPTY_LINE",
    "HIDDEN",
    "LINK_IN",
    "LINK_OUT",
    "PLURALS",
    "SUPPORTED_SUFFIXES",
    "UNREADABLE_FOLDER",
    "SourceDocument",
    "check_unique_ids",
    "empty_line_doc_ids",
    "file_doc_id",
    "iter_documents",
    "json_line",
    "jsonl_rows",
    "safe_doc_id",
]

SUPPORTED_SUFFIXES = (
    ".txt", ".md", *HTML_SUFFIXES, PDF_SUFFIX, DOCX_SUFFIX, ODT_SUFFIX, EPUB_SUFFIX, ".jsonl"
)  # fmt: skip
#: Why a JSONL line was passed over (a file's reasons: ``empty``, ``unsupported type``).
EMPTY_LINE = "empty line"
_SOURCE_TYPES = {"government", "regulatory", "market_data", "third_party", "internal", "unknown"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
MAX_DOC_ID_CHARS = 128  # the event contract's limit on doc ids
# Hex digits of SHA-256 appended to an id that had to be rewritten: 48 bits, so two
# different titles of one corpus sharing a slug collide with odds ~n^2 / 2^49.
_DIGEST_CHARS = 12


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document to index, before chunking."""

    doc_id: str
    text: str
    title: str | None = None
    source: str | None = None
    source_type: str = "unknown"
    metadata: dict[str, Any] = field(default_factory=dict)

    def stored_metadata(self) -> dict[str, Any]:
        """What each of its chunks stores besides the index's own fields: its title
        (when it has one) and its metadata."""
        return {"title": self.title, **self.metadata} if self.title else dict(self.metadata)

    def problem(self) -> str | None:
        """Why its chunks cannot be stored, or None: text the embedder cannot encode, or
        metadata the index cannot keep (:func:`~ragsift.retrieval.records.metadata_error`).
        Checked before anything is written, so a bad document never costs the old
        version of itself or of the documents after it."""
        for name in ("text", "title", "source"):
            if not isinstance(getattr(self, name), str | None):
                return f"'{name}' must be a string, got {shown_value(getattr(self, name))}"
        surrogate = lone_surrogate([self.text, self.title, self.source])
        if surrogate is not None:
            return f"holds {surrogate}, a lone surrogate: not Unicode text"
        problem = metadata_error(self.stored_metadata())
        return None if problem is None else f"metadata {problem}"


def safe_doc_id(raw: str) -> str:
    """A stable document id in the contract's charset (letters, digits, ``_.:-``), max 128.

    An ASCII name keeps the slug it always had (unsafe runs become ``-``), so
    ids of documents already indexed do not change. Any other name — non-Latin
    or accented text, a name too long or with nothing left after cleaning —
    becomes a readable ASCII slug (accents folded) plus a short SHA-256 of the
    original, so two titles in Hangul no longer both become ``doc``. ASCII
    names can still share a slug (``a b`` and ``a-b``): :func:`check_unique_ids`
    makes that an error instead of an overwrite.
    """
    legacy = _UNSAFE.sub("-", raw).strip("-.:_")
    if raw.isascii() and legacy and len(legacy) <= MAX_DOC_ID_CHARS:
        return legacy
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    slug = _UNSAFE.sub("-", folded).strip("-.:_") or "doc"
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    return f"{slug[: MAX_DOC_ID_CHARS - _DIGEST_CHARS - 1]}-{digest}"


def check_unique_ids(documents: Iterable[SourceDocument]) -> list[SourceDocument]:
    """The documents as a list; raise if two share an id (one would overwrite the other).

    Raises:
        InvalidEventError: names the id and both sources.
    """
    seen: dict[str, SourceDocument] = {}
    out: list[SourceDocument] = []
    for doc in documents:
        first = seen.setdefault(doc.doc_id, doc)
        if first is not doc:
            raise _collision(first, doc)
        out.append(doc)
    return out


def iter_documents(
    path: Path,
    *,
    source_type: str = "unknown",
    skipped: list[tuple[Path, str]] | None = None,
    exclude: Iterable[Path] = (),
) -> Iterator[SourceDocument]:
    """Documents under ``path`` (a file or a folder, searched recursively, sorted).

    A folder's hidden files and folders (a name starting with ``.``: ``.git``, and
    ``.ragsift``, the data directory ``ingest .`` would otherwise read its own audit
    trail from) are passed over as :data:`HIDDEN`, and so is any folder in ``exclude``
    (the data directory wherever it is) as :data:`DATA_DIR`.

    A folder's files of another type, and files and JSONL lines with no text, are passed
    over, as are HTML redirect pages, text files whose bytes are no text, PDF, .docx,
    .odt and .epub files that cannot be read, and a folder's symbolic links to files
    (:data:`LINK_OUT`, :data:`LINK_IN`; a link given as ``path`` is read); with
    ``skipped``, each is appended to it with why (``unsupported type .doc``, ``empty``,
    ``redirect``, ``encrypted PDF``, ``not text``; a JSONL line as ``file:line``,
    :data:`EMPTY_LINE`).

    Raises:
        InvalidEventError: bad input, or two documents with one id (one would
            overwrite the other: rename a file or fix the JSONL ``id``).
    """
    seen: dict[str, SourceDocument] = {}
    passed = [] if skipped is None else skipped
    for doc in _iter_documents(path, source_type, passed, {p.resolve() for p in exclude}):
        first = seen.setdefault(doc.doc_id, doc)
        if first is not doc:
            raise _collision(first, doc)
        yield doc


def file_doc_id(file: Path, folder: Path) -> str:
    """The id of the document a ``file`` found under ``folder`` is indexed as: its path
    from the folder (for a file ingested on its own, its own folder), made safe."""
    return safe_doc_id(file.relative_to(folder).as_posix())


def _collision(first: SourceDocument, second: SourceDocument) -> InvalidEventError:
    return InvalidEventError(
        f"document id {second.doc_id!r} is used twice ({first.source or first.title!r}"
        f" and {second.source or second.title!r}); one would overwrite the other"
    )


def _iter_documents(
    path: Path, source_type: str, skipped: list[tuple[Path, str]], exclude: set[Path]
) -> Iterator[SourceDocument]:
    if source_type not in _SOURCE_TYPES:
        raise InvalidEventError(
            f"source_type must be one of {sorted(_SOURCE_TYPES)}, got {source_type!r}"
        )
    if not path.exists():
        raise InvalidEventError(f"no such file or folder: {path}")
    if not (path.is_file() or path.is_dir()):
        raise InvalidEventError(f"not a file or a folder: {path} (a pipe, socket or device)")
    files = [path] if path.is_file() else files_under(path, skipped, exclude)
    base = path.parent if path.is_file() else path
    root = path.resolve()
    for file in files:
        if file is not path and file.is_symlink():
            skipped.append((file, link_reason(file, root)))
            continue
        if file.suffix.lower() not in SUPPORTED_SUFFIXES:
            if path.is_file():
                raise InvalidEventError(
                    f"{file}: unsupported file type {file.suffix!r};"
                    f" supported: {SUPPORTED_SUFFIXES}"
                )
            skipped.append((file, f"unsupported type {file.suffix or '(none)'}"))
            continue
        if file.suffix.lower() == ".jsonl":
            try:
                yield from _jsonl(file, base, source_type, skipped)
            except OSError as exc:  # no permission, an I/O error
                skipped.append((file, cannot_read(exc)))
        else:
            try:
                text, title = _read_file(file)
            except UnreadableFile as passed:
                skipped.append((file, passed.reason))
                continue
            except OSError as exc:
                skipped.append((file, cannot_read(exc)))
                continue
            if not text.strip():
                skipped.append((file, "empty"))
            else:
                rel = file.relative_to(base).as_posix()
                yield SourceDocument(
                    doc_id=file_doc_id(file, base),
                    text=text,
                    title=title or _shown_name(Path(file.stem)),
                    source=_shown_name(Path(rel)),
                    source_type=source_type,
                )


def _read_file(file: Path) -> FileText:
    """A text, Markdown, HTML, PDF, Word, OpenDocument or EPUB file's text and title
    (None: the file names it).

    Raises:
        UnreadableFile: a redirect page, a text file whose bytes are no text, or a
            PDF, .docx, .odt or .epub that cannot be read (why).
    """
    suffix = file.suffix.lower()
    if suffix in HTML_SUFFIXES:
        text, title, redirect = html_text(decode_html(file.read_bytes()))
        if redirect:
            raise UnreadableFile(REDIRECT, "a page that sends the reader elsewhere")
        return FileText(text, title)
    if suffix == PDF_SUFFIX:
        return pdf_text(file.read_bytes())
    if suffix in _PACKAGES:
        return _PACKAGES[suffix](file.read_bytes())
    text = plain_text(file.read_bytes())
    return FileText(text, _title(text))


#: The zip-packaged formats, each read by its own reader.
_PACKAGES = {DOCX_SUFFIX: docx_text, ODT_SUFFIX: odt_text, EPUB_SUFFIX: epub_text}


def _shown_name(path: Path) -> str:
    """``path`` as text to store and show: a name that is not UTF-8 on disk (Python
    keeps its bytes as lone surrogates) gets U+FFFD for them, as file contents do."""
    return os.fsencode(path).decode("utf-8", errors="replace")


def _title(text: str) -> str | None:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.lstrip("#").strip()[:200] or None
    return None


def _jsonl(
    file: Path, base: Path, default_type: str, skipped: list[tuple[Path, str]]
) -> Iterator[SourceDocument]:
    """The file's documents, once every line is read: any bad line refuses the file,
    naming all of them (:class:`BadLines`)."""
    bad = BadLines(file)
    docs: list[SourceDocument] = []
    for lineno, row in jsonl_rows(file, bad):
        try:
            doc = _jsonl_doc(row, file, base, default_type, lineno)
        except InvalidEventError as exc:
            bad.add(str(exc))
            continue
        if doc is None:  # as an empty file: it would replace the document by nothing
            skipped.append((Path(f"{file}:{lineno}"), EMPTY_LINE))
        else:
            docs.append(doc)
    bad.check()
    yield from docs


def _jsonl_doc(
    row: Any, file: Path, base: Path, default_type: str, lineno: int
) -> SourceDocument | None:
    if not isinstance(row, dict) or not isinstance(row.get("text"), str):
        raise InvalidEventError(f"{file}:{lineno}: each line needs a string 'text' field")
    if not has_visible_text(row["text"]):
        return None
    stype = row.get("source_type", default_type)
    if not isinstance(stype, str) or stype not in _SOURCE_TYPES:
        raise InvalidEventError(
            f"{file}:{lineno}: source_type must be one of {sorted(_SOURCE_TYPES)}, got {stype!r}"
        )
    doc = SourceDocument(
        doc_id=_row_doc_id(row, file, base, lineno),
        text=row["text"],
        title=row.get("title"),
        source=row.get("source") or f"{_shown_name(file)}:{lineno}",
        source_type=stype,
        metadata={
            k: v
            for k, v in row.items()
            if k not in {"text", "doc_id", "id", "title", "source", "source_type"}
        },
    )
    problem = doc.problem()
    if problem is not None:
        raise InvalidEventError(f"{file}:{lineno}: {problem}")
    return doc


def _row_doc_id(row: dict[str, Any], file: Path, base: Path, lineno: int) -> str:
    """A JSONL line's document id: its ``doc_id`` or ``id``, else the ``file``'s path from
    the folder ingested (``base``), without the suffix, and the line: ``faq-3`` for ``faq.jsonl``
    (a file in the folder itself, or ingested on its own: the ids it always had),
    ``a-faq-3`` for ``a/faq.jsonl`` (the stem alone gave ``b/faq.jsonl``'s line 3 the
    same id)."""
    given = row.get("doc_id") or row.get("id")
    if not given:
        rel = file.relative_to(base)
        return safe_doc_id(f"{(rel.parent / rel.stem).as_posix()}-{lineno}")
    # A string or a number names a document; an object or a list (or true) read as
    # its Python text ("{'n': 1}", "True") named one by accident, and so did NaN,
    # Infinity and a number past the float range (1e999), which Python's json reads as
    # floats: every such line was document "nan" or "inf".
    name = "doc_id" if row.get("doc_id") else "id"
    if isinstance(given, bool) or not isinstance(given, str | int | float):
        raise InvalidEventError(
            f"{file}:{lineno}: '{name}' must be a string or a number, got {shown_value(given)}"
        )
    if isinstance(given, float) and not math.isfinite(given):
        raise InvalidEventError(
            f"{file}:{lineno}: '{name}' must be a string or a finite number, got"
            f" {json.dumps(given)} (NaN, Infinity or a number past the float range)"
        )
    return safe_doc_id(str(given))


def empty_line_doc_ids(skipped: Iterable[tuple[Path, str]], folder: Path) -> set[str]:
    """The documents whose JSONL lines were passed over as :data:`EMPTY_LINE` when
    ``folder`` was read, by id: as an empty file's, their indexed versions stay
    (``ingest --prune`` keeps them). Each file is read again once; one no longer
    readable keeps none."""
    wanted: dict[Path, set[int]] = {}
    for where, reason in skipped:
        if reason == EMPTY_LINE:
            name, _, number = str(where).rpartition(":")
            wanted.setdefault(Path(name), set()).add(int(number))
    ids: set[str] = set()
    for file, lines in wanted.items():
        try:
            for lineno, row in jsonl_rows(file):
                if lineno in lines and isinstance(row, dict):
                    ids.add(_row_doc_id(row, file, folder, lineno))
        except (InvalidEventError, OSError):  # changed since it was read: keep none of it
            continue
    return ids
