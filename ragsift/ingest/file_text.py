"""What a document file's reader gives ``ragsift ingest``: its text and title, or why not;
and the bounded read of one part of a zip package (.docx, .odt, .epub)."""

from __future__ import annotations

import zipfile
from typing import NamedTuple
from xml.etree import ElementTree as ET

__all__ = [
    "DC_TITLE",
    "MAX_PART_BYTES",
    "MAX_TITLE_CHARS",
    "FileText",
    "UnreadableFile",
    "metadata_title",
    "titled",
    "zip_part",
]

#: The Dublin Core title, which .docx, .odt and .epub metadata all declare.
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
MAX_TITLE_CHARS = 200

#: The most a package's part may unpack to: a larger one is a zip bomb, not a document.
MAX_PART_BYTES = 64 * 1024 * 1024


class FileText(NamedTuple):
    """A file's text (its paragraphs apart) and title (None: the file's name stands in)."""

    text: str
    title: str | None


def titled(text: str, declared: object = None) -> FileText:
    """``text`` with its title: the one its file declares (white space collapsed), else
    its first line with text; at most :data:`MAX_TITLE_CHARS` characters, None for none."""
    title = " ".join(str(declared).split()) if declared else ""
    if not title:
        title = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return FileText(text, title[:MAX_TITLE_CHARS] or None)


def metadata_title(part: bytes) -> str | None:
    """The ``dc:title`` a package's metadata part declares; None without one, or when
    the part does not parse (the title then comes from the text)."""
    if not part:
        return None
    try:
        found = ET.fromstring(part).find(f".//{DC_TITLE}")
    except ET.ParseError:
        return None
    return found.text if found is not None else None


class UnreadableFile(Exception):
    """A file whose text cannot be indexed; ``reason`` says why, for the skipped line."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def zip_part(package: zipfile.ZipFile, name: str, *, required: bool = True) -> bytes:
    """One part's bytes, refused when it would unpack past :data:`MAX_PART_BYTES`
    (b"" for a missing part that is not ``required``).

    Raises:
        KeyError: a required part is missing.
        ValueError: the part declares, or holds, more than the limit.
    """
    try:
        info = package.getinfo(name)
    except KeyError:
        if required:
            raise KeyError(f"no {name}") from None
        return b""
    if info.file_size > MAX_PART_BYTES:
        raise ValueError(f"{name} unpacks to {info.file_size} bytes (at most {MAX_PART_BYTES})")
    with package.open(info) as part:
        data = part.read(MAX_PART_BYTES + 1)
    if len(data) > MAX_PART_BYTES:  # the size the zip declared was not the size it holds
        raise ValueError(f"{name} unpacks past {MAX_PART_BYTES} bytes")
    return data
