"""The text of an EPUB book or manual, as ``ragsift ingest`` indexes it (stdlib only).

An EPUB is a zip: ``META-INF/container.xml`` names the package document (OPF), whose
manifest lists the content files and whose spine orders them. Each XHTML document
of the spine is read as ``ragsift ingest`` reads an HTML page
(:mod:`~ragsift.ingest.html_text`: its visible text, navigation and tables of contents
left out), in reading order, a paragraph apart; EPUB 3's navigation document is not
read, where a spine lists it. The title is the book's own
(``dc:title``), else its first line.

A file that is not a readable EPUB (a damaged zip, no container or package
document, XML that does not parse, a part past
:data:`~ragsift.ingest.file_text.MAX_PART_BYTES`, or all of them together past
:data:`MAX_BOOK_BYTES`) is passed over as ``unreadable EPUB``. One whose reading
order is encrypted (DRM: ``META-INF/encryption.xml`` lists a spine document) is
passed over as ``encrypted EPUB``: its bytes are ciphertext, not text. Fonts
obfuscated the standard way are listed there too, and are no reason to pass a book
over.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from urllib.parse import unquote
from xml.etree import ElementTree as ET

from ragsift.ingest.file_text import DC_TITLE, FileText, UnreadableFile, titled, zip_part
from ragsift.ingest.html_text import decode_html, html_text

__all__ = ["ENCRYPTED_EPUB", "EPUB_SUFFIX", "MAX_BOOK_BYTES", "UNREADABLE_EPUB", "epub_text"]

EPUB_SUFFIX = ".epub"
#: Why an EPUB is passed over (``ragsift ingest``'s ``skipped`` line).
UNREADABLE_EPUB = "unreadable EPUB"
ENCRYPTED_EPUB = "encrypted EPUB"
#: The most a book's spine documents may unpack to together.
MAX_BOOK_BYTES = 256 * 1024 * 1024

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
#: Spine documents read as pages; others in a spine (an image, say) have no text.
_PAGES = frozenset({"application/xhtml+xml", "text/html"})


def epub_text(data: bytes) -> FileText:
    """The text of the EPUB ``data``, its spine's documents in reading order.

    Raises:
        UnreadableFile: encrypted, or not a readable EPUB (why, in the detail).
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            spine, title = _package(package)
            locked = sorted(_encrypted(package) & set(spine))
            if locked:
                raise UnreadableFile(
                    ENCRYPTED_EPUB, f"{locked[0]} is encrypted (META-INF/encryption.xml)"
                )
            pages, total = [], 0
            for name in spine:
                part = zip_part(package, name)
                total += len(part)
                if total > MAX_BOOK_BYTES:
                    raise ValueError(f"its documents unpack past {MAX_BOOK_BYTES} bytes")
                text, _, redirect = html_text(decode_html(part))
                if text and not redirect:
                    pages.append(text)
    except UnreadableFile:
        raise
    except Exception as exc:  # untrusted bytes: zlib.error, EOFError, ParseError...
        raise UnreadableFile(UNREADABLE_EPUB, f"{type(exc).__name__}: {exc}") from exc
    return titled("\n\n".join(pages), title)


def _package(package: zipfile.ZipFile) -> tuple[list[str], str | None]:
    """The spine's page documents (zip names, in reading order) and the book's title."""
    container = ET.fromstring(zip_part(package, "META-INF/container.xml"))
    rootfile = container.find(f".//{_CONTAINER}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        raise KeyError("META-INF/container.xml names no package document")
    opf_path = rootfile.get("full-path", "")
    opf = ET.fromstring(zip_part(package, opf_path))
    base = posixpath.dirname(opf_path)
    items = {
        item.get("id"): item
        for item in opf.iter(f"{_OPF}item")
        if item.get("id") is not None and item.get("href")
    }
    spine = []
    for ref in opf.iter(f"{_OPF}itemref"):
        item = items.get(ref.get("idref"))
        if item is None or item.get("media-type") not in _PAGES:
            continue
        if "nav" in (item.get("properties") or "").split():
            continue  # EPUB 3's table of contents, a page of links: never the book's text
        name = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
        if name not in spine:
            spine.append(name)
    found = opf.find(f".//{DC_TITLE}")
    return spine, found.text if found is not None else None


def _encrypted(package: zipfile.ZipFile) -> set[str]:
    """The zip names ``META-INF/encryption.xml`` lists as encrypted (none without one)."""
    listing = zip_part(package, "META-INF/encryption.xml", required=False)
    if not listing:
        return set()
    return {
        posixpath.normpath(unquote(ref.get("URI", "")))
        for ref in ET.fromstring(listing).iter(f"{_ENC}CipherReference")
        if ref.get("URI")
    }
