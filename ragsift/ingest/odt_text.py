"""The text of an OpenDocument text file (.odt), as ``ragsift ingest`` indexes it
(stdlib only).

An .odt is a zip of XML parts: the body is ``content.xml``, whose headings
(``text:h``) and paragraphs (``text:p``) hold text, spans, runs of spaces
(``text:s``), tabs and line breaks. Each becomes a paragraph of the text, and a
table row's cells share a line, so the chunker cuts where the document does. The
title is the document's own (``meta.xml``), else its first line. Notes, comments
(``office:annotation``) and text kept only in tracked changes (deleted text) are
left out, as in a .docx.

A file that is not a readable .odt (a damaged zip, no body, XML that does not
parse, a part that would unpack past
:data:`~ragsift.ingest.file_text.MAX_PART_BYTES`) is passed over as
``unreadable ODT``; one with no text as empty.
"""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree import ElementTree as ET

from ragsift.ingest.file_text import FileText, UnreadableFile, metadata_title, titled, zip_part

__all__ = ["ODT_SUFFIX", "UNREADABLE_ODT", "odt_text"]

ODT_SUFFIX = ".odt"
#: Why an .odt is passed over (``ragsift ingest``'s ``skipped`` line).
UNREADABLE_ODT = "unreadable ODT"

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_BLOCKS = (f"{_TEXT}p", f"{_TEXT}h")
_WHITE = re.compile(r"[ \t\r\n]+")
#: Never text of the body: notes, comments, tracked changes (their deleted text).
_SKIPPED = frozenset(
    {f"{_TEXT}note", f"{_OFFICE}annotation", f"{_TEXT}tracked-changes", f"{_TEXT}change"}
)


def odt_text(data: bytes) -> FileText:
    """The text of the .odt ``data``.

    Raises:
        UnreadableFile: not a zip, no ``content.xml``, a part too large to unpack, or
            XML that does not parse.
    """
    lines: list[str] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            content = ET.fromstring(zip_part(package, "content.xml"))
            meta = zip_part(package, "meta.xml", required=False)
        body = content.find(f"{_OFFICE}body")
        if body is None:
            raise KeyError("content.xml has no office:body: not a text document")
        _collect(body, lines)  # RecursionError: elements nested past any document's
    except Exception as exc:  # untrusted bytes: zlib.error, EOFError, ParseError...
        raise UnreadableFile(UNREADABLE_ODT, f"{type(exc).__name__}: {exc}") from exc
    text = "\n\n".join(line.strip() for line in lines if line.strip())
    return titled(text, metadata_title(meta))


def _collect(element: ET.Element, lines: list[str]) -> None:
    """Append the paragraphs and table rows under ``element``, in document order."""
    for child in element:
        if child.tag in _SKIPPED:
            continue
        if child.tag in _BLOCKS:
            lines.append(_paragraph(child))
        elif child.tag == f"{_TABLE}table-row":
            cells = []
            for cell in child.iter(f"{_TABLE}table-cell"):
                cells.append(" ".join(_paragraph(p) for p in cell.iter() if p.tag in _BLOCKS))
            lines.append(" ".join(c.strip() for c in cells if c.strip()))
        else:
            _collect(child, lines)


def _paragraph(paragraph: ET.Element) -> str:
    """A paragraph's visible text: spans read through, runs of white space in the XML
    as one space (ODF collapses them), ``text:s`` as its count of spaces, tabs as a
    space, line breaks as new lines; notes and comments left out."""
    out: list[str] = [_WHITE.sub(" ", paragraph.text or "")]
    for child in paragraph:
        if child.tag not in _SKIPPED:
            if child.tag == f"{_TEXT}s":
                out.append(" " * _count(child.get(f"{_TEXT}c")))
            elif child.tag == f"{_TEXT}tab":
                out.append(" ")
            elif child.tag == f"{_TEXT}line-break":
                out.append("\n")
            else:
                out.append(_paragraph(child))
        out.append(_WHITE.sub(" ", child.tail or ""))
    return "".join(out)


def _count(value: str | None) -> int:
    """``text:c``: how many spaces a ``text:s`` stands for (1 when absent or odd; at most
    a line's worth, so a hostile count cannot make a huge string)."""
    try:
        return max(1, min(int(value or 1), 80))
    except ValueError:
        return 1
