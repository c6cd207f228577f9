"""EPUB books read page by page in reading order; the ones that cannot be are passed over."""

from __future__ import annotations

import contextlib
import io
import zipfile
from pathlib import Path

import pytest

from ragsift.ingest import epub_text as epub_module
from ragsift.ingest.epub_text import ENCRYPTED_EPUB, UNREADABLE_EPUB, epub_text
from ragsift.ingest.file_text import UnreadableFile
from ragsift.ingest.loaders import iter_documents
from tests.factories import make_epub

PAGES = {
    "nav.xhtml": '<nav epub:type="toc"><ol><li>Chapter one</li><li>Chapter two</li></ol></nav>',
    "ch%202.xhtml": "<h1>Chapter two</h1><p>Pumps need a C wire.</p>",
    "ch1.xhtml": "<h1>Chapter one</h1><p>Install the base plate.</p><script>x()</script>",
}
BOOK = make_epub(
    PAGES, ["nav.xhtml", "ch1.xhtml", "ch%202.xhtml"], title="Orbit  manual", nav="nav.xhtml"
)
ENCRYPTION = (
    '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"'
    ' xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
    '<enc:CipherData><enc:CipherReference URI="{}"/></enc:CipherData>'
    "</enc:EncryptedData></encryption>"
)


def test_a_book_reads_its_spine_in_order_without_its_navigation() -> None:
    text, title = epub_text(BOOK)
    # spine order, not the manifest's; an escaped href (%20) found; the nav page and
    # the spine's stylesheet read as nothing, the script left out as on any page
    assert text == ("Chapter one\n\nInstall the base plate.\n\nChapter two\n\nPumps need a C wire.")
    assert title == "Orbit manual"
    untitled = make_epub({"a.xhtml": "<p>First line</p><p>Second</p>"}, ["a.xhtml"])
    assert epub_text(untitled).title == "First line"


def test_an_encrypted_spine_is_passed_over_and_an_obfuscated_font_is_not() -> None:
    locked = make_epub(
        PAGES,
        ["ch1.xhtml"],
        extra={"META-INF/encryption.xml": ENCRYPTION.format("OEBPS/ch1.xhtml").encode()},
    )
    with pytest.raises(UnreadableFile, match=r"OEBPS/ch1\.xhtml is encrypted") as caught:
        epub_text(locked)
    assert caught.value.reason == ENCRYPTED_EPUB
    font = make_epub(
        PAGES,
        ["ch1.xhtml"],
        extra={"META-INF/encryption.xml": ENCRYPTION.format("OEBPS/font.otf").encode()},
    )
    assert epub_text(font).text == "Chapter one\n\nInstall the base plate."


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"PK\x03\x04 not a zip", "BadZipFile"),
        (
            make_epub(PAGES, ["ch1.xhtml"], extra={}).replace(b"container.xml", b"containeX.xml"),
            "no META-INF/container.xml",
        ),
        (
            make_epub(PAGES, ["ch1.xhtml"], extra={"META-INF/encryption.xml": b"<not xml"}),
            "ParseError",
        ),
    ],
)
def test_what_is_not_a_readable_book_is_passed_over(data: bytes, why: str) -> None:
    with pytest.raises(UnreadableFile, match=why) as caught:
        epub_text(data)
    assert caught.value.reason == UNREADABLE_EPUB


def test_a_spine_document_missing_from_the_zip_is_unreadable() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(BOOK)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename != "OEBPS/ch1.xhtml":
                dst.writestr(info, src.read(info))
    with pytest.raises(UnreadableFile, match=r"no OEBPS/ch1\.xhtml"):
        epub_text(out.getvalue())


def test_a_book_past_its_limit_is_not_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(epub_module, "MAX_BOOK_BYTES", 600)
    big = make_epub({f"{i}.xhtml": "<p>" + "x" * 200 + "</p>" for i in range(3)}, ["0.xhtml"])
    assert epub_text(big).text  # one page is under it
    bigger = make_epub(
        {f"{i}.xhtml": "<p>" + "x" * 200 + "</p>" for i in range(3)}, ["0.xhtml", "1.xhtml"]
    )
    with pytest.raises(UnreadableFile, match="unpack past 600 bytes"):
        epub_text(bigger)


def test_damaged_bytes_never_raise_anything_but_unreadable() -> None:
    # Every third byte of a real book overwritten three ways: the reader either reads
    # it or passes it over; a narrower except let zlib.error and EOFError through.
    for i in range(0, len(BOOK), 3):
        for value in (0x00, 0xFF, BOOK[i] ^ 0x55):
            damaged = BOOK[:i] + bytes([value]) + BOOK[i + 1 :]
            with contextlib.suppress(UnreadableFile):
                epub_text(damaged)


def test_the_loader_indexes_epub_files_and_counts_the_ones_it_passes_over(
    tmp_path: Path,
) -> None:
    (tmp_path / "manual.EPUB").write_bytes(BOOK)
    (tmp_path / "broken.epub").write_bytes(b"PK\x03\x04 no")
    locked = make_epub(
        PAGES,
        ["ch1.xhtml"],
        extra={"META-INF/encryption.xml": ENCRYPTION.format("OEBPS/ch1.xhtml").encode()},
    )
    (tmp_path / "locked.epub").write_bytes(locked)
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped))
    assert [(d.doc_id, d.title) for d in docs] == [("manual.EPUB", "Orbit manual")]
    assert "Pumps need a C wire." in docs[0].text
    assert sorted((p.name, why) for p, why in skipped) == [
        ("broken.epub", UNREADABLE_EPUB),
        ("locked.epub", ENCRYPTED_EPUB),
    ]
