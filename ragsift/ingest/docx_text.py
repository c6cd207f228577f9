"""The text of a Word document (.docx), as ``ragsift ingest`` indexes it (stdlib only).

A .docx is a zip of XML parts: the body is ``word/document.xml``, whose paragraphs
(``w:p``) hold runs of text (``w:t``), tabs and breaks. Each paragraph becomes a
paragraph of the text, and a table row's cells share a line, so the chunker cuts
where the document does. The title is the document's own (``docProps/core.xml``),
else its first line. Headers, footers, comments and tracked deletions are left out.

A file that is not a readable .docx (a damaged zip, no body, XML that does not
parse, a part that would unpack past :data:`MAX_PART_BYTES`) is passed over as
``unreadable DOCX``; one with no text as empty.
"""

from __future__ import annotations

import io
import zipfile
from xml.etree import ElementTree as ET

from ragsift.ingest.file_text import (
    MAX_PART_BYTES,
    FileText,
    UnreadableFile,
    metadata_title,
    titled,
    zip_part,
)

__all__ = ["DOCX_SUFFIX", "MAX_PART_BYTES", "UNREADABLE_DOCX", "docx_text"]

DOCX_SUFFIX = ".docx"
#: Why a .docx is passed over (``ragsift ingest``'s ``skipped`` line).
UNREADABLE_DOCX = "unreadable DOCX"

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
# Runs of text, and what stands for a tab or a line break inside a paragraph. Text
# deleted in tracked changes is ``w:delText`` and field codes ``w:instrText``: never read.
_TEXT, _TAB, _BREAKS = f"{_W}t", f"{_W}tab", (f"{_W}br", f"{_W}cr")


def docx_text(data: bytes) -> FileText:
    """The text of the .docx ``data``.

    Raises:
        UnreadableFile: not a zip, no ``word/document.xml``, a part too large to
            unpack, or XML that does not parse.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            body = ET.fromstring(zip_part(package, "word/document.xml"))
            core = zip_part(package, "docProps/core.xml", required=False)
    except Exception as exc:  # untrusted bytes: zlib.error, EOFError, NotImplementedError...
        raise UnreadableFile(UNREADABLE_DOCX, f"{type(exc).__name__}: {exc}") from exc
    cells = list(body.iter(f"{_W}tc"))
    in_tables = {id(p) for cell in cells for p in cell.iter(f"{_W}p")}
    nested = {id(row) for cell in cells for row in cell.iter(f"{_W}tr")}  # read with theirs
    lines: list[str] = []
    for element in body.iter():
        if element.tag == f"{_W}p" and id(element) not in in_tables:
            lines.append(_paragraph(element))
        elif element.tag == f"{_W}tr" and id(element) not in nested:
            row = [
                " ".join(_paragraph(p) for p in cell.iter(f"{_W}p")).strip()
                for cell in element.findall(f"{_W}tc")
            ]
            lines.append(" ".join(c for c in row if c))
    text = "\n\n".join(line.strip() for line in lines if line.strip())
    return titled(text, metadata_title(core))


def _paragraph(paragraph: ET.Element) -> str:
    """A paragraph's visible text: its runs, tabs as spaces, breaks as new lines."""
    out: list[str] = []
    for element in paragraph.iter():
        if element.tag == _TEXT:
            out.append(element.text or "")
        elif element.tag == _TAB:
            out.append(" ")
        elif element.tag in _BREAKS:
            out.append("\n")
    return "".join(out)
