"""The text layer of a PDF, as ``ragsift ingest`` indexes it (pypdf, pure Python).

Pages are read in order and kept apart as paragraphs; a word hyphenated across a
line end is joined again. The title is the document's own (its information
dictionary), else its first line. A PDF is passed over, with why, when it has a
password (``encrypted``), when its text cannot be read (``unreadable PDF``: a
damaged file, or one pypdf does not parse), or when it holds no text at all
(``no text layer``: a scan, which would need OCR first).
"""

from __future__ import annotations

import io
import logging
import re

from ragsift.ingest.file_text import FileText, UnreadableFile, titled

__all__ = [
    "ENCRYPTED",
    "NO_TEXT",
    "PDF_SUFFIX",
    "PLURALS",
    "UNREADABLE",
    "pdf_text",
]

PDF_SUFFIX = ".pdf"
#: Why a PDF is passed over (``ragsift ingest``'s ``skipped`` line).
ENCRYPTED = "encrypted PDF"
UNREADABLE = "unreadable PDF"
NO_TEXT = "PDF with no text layer"
#: The reasons above, counted more than once.
PLURALS = {
    ENCRYPTED: "encrypted PDFs",
    UNREADABLE: "unreadable PDFs",
    NO_TEXT: "PDFs with no text layer",
}

# A word broken across a line end by a hyphen: both halves lower case.
_HYPHENATED = re.compile(r"(?<=[a-z])-\n(?=[a-z])")


def pdf_text(data: bytes) -> FileText:
    """The text layer of the PDF ``data``.

    Raises:
        UnreadableFile: a password, a file pypdf cannot parse, or no text on any page.
    """
    from pypdf import PdfReader

    # pypdf logs each repair of a damaged file; the skipped line says what matters
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile(ENCRYPTED, "it needs a password")
        pages = [page.extract_text() or "" for page in reader.pages]
        info = reader.metadata
        declared = info.title if info is not None else None
    except UnreadableFile:
        raise
    except Exception as exc:  # a third-party parser on untrusted bytes: any failure is one
        raise UnreadableFile(UNREADABLE, f"{type(exc).__name__}: {exc}") from exc
    text = "\n\n".join(_HYPHENATED.sub("", page).strip() for page in pages if page.strip())
    if not text:
        raise UnreadableFile(NO_TEXT, "no page holds text (a scan needs OCR first)")
    return titled(text, declared)
