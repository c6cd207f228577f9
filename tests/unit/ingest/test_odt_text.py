"""OpenDocument text read by its body's headings, paragraphs and table rows; the files
that cannot be are passed over."""

from __future__ import annotations

import contextlib
import io
import zipfile
from pathlib import Path

import pytest

from ragsift.ingest.file_text import UnreadableFile
from ragsift.ingest.loaders import iter_documents
from ragsift.ingest.odt_text import UNREADABLE_ODT, odt_text
from tests.factories import make_odt

POLICY = make_odt(
    '<text:h text:outline-level="1">Remote work policy</text:h>'
    "<text:p>Staff may work <text:span>from home</text:span><text:tab/>two days"
    '<text:s/>a<text:s text:c="3"/>week.<text:note><text:note-body><text:p>A footnote.'
    "</text:p></text:note-body></text:note></text:p>"
    "<text:p>Line one<text:line-break/>line\n   two<office:annotation><text:p>A comment."
    "</text:p></office:annotation></text:p>"
    "<text:tracked-changes><text:changed-region><text:deletion><text:p>Deleted words."
    "</text:p></text:deletion></text:changed-region></text:tracked-changes>"
    "<table:table><table:table-row><table:table-cell><text:p>Role</text:p></table:table-cell>"
    "<table:table-cell><text:p>Days</text:p></table:table-cell></table:table-row>"
    "<table:table-row><table:table-cell><text:p>Engineer</text:p></table:table-cell>"
    "<table:table-cell><text:p>2</text:p></table:table-cell></table:table-row></table:table>"
    "<text:list><text:list-item><text:p>A listed point.</text:p></text:list-item></text:list>",
    title="Remote &amp; hybrid work",
)


def test_a_document_reads_as_its_paragraphs_rows_and_title() -> None:
    text, title = odt_text(POLICY)
    assert text == (
        "Remote work policy\n\n"
        "Staff may work from home two days a   week.\n\n"
        "Line one\nline two\n\n"
        "Role Days\n\n"
        "Engineer 2\n\n"
        "A listed point."
    )  # no note, comment or deleted text
    assert title == "Remote & hybrid work"
    assert odt_text(make_odt("<text:p>First line</text:p>")).title == "First line"


def _zip(parts: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        for name, text in parts.items():
            package.writestr(name, text)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"PK\x03\x04 not a zip", "BadZipFile"),
        (make_odt("<text:p>x</text:p>").replace(b"content.xml", b"contenX.xml"), "no content"),
        (make_odt("<text:p>unclosed"), "ParseError"),
        # a content part with no body (a styles-only file): not a text document
        (
            _zip(
                {
                    "content.xml": "<office:document-content xmlns:office="
                    '"urn:oasis:names:tc:opendocument:xmlns:office:1.0"/>'
                }
            ),
            "no office:body",
        ),
        # elements nested past any document's: refused, never a crash
        (make_odt("<text:span>" * 5_000 + "deep" + "</text:span>" * 5_000), "Recursion"),
    ],
)
def test_what_is_not_a_readable_document_is_passed_over(data: bytes, why: str) -> None:
    with pytest.raises(UnreadableFile) as caught:
        odt_text(data)
    assert caught.value.reason == UNREADABLE_ODT
    assert why in str(caught.value)


def test_a_hostile_space_count_is_bounded() -> None:
    text = odt_text(
        make_odt('<text:p>a<text:s text:c="999999999"/>b<text:s text:c="x"/>c</text:p>')
    )
    assert text.text == "a" + " " * 80 + "b c"


def test_damaged_bytes_never_raise_anything_but_unreadable() -> None:
    for i in range(0, len(POLICY), 3):
        for value in (0x00, 0xFF, POLICY[i] ^ 0x55):
            damaged = POLICY[:i] + bytes([value]) + POLICY[i + 1 :]
            with contextlib.suppress(UnreadableFile):
                odt_text(damaged)


def test_the_loader_indexes_odt_files(tmp_path: Path) -> None:
    (tmp_path / "policy.ODT").write_bytes(POLICY)
    (tmp_path / "broken.odt").write_bytes(b"PK\x03\x04 not really")
    (tmp_path / "blank.odt").write_bytes(make_odt("<text:p>  </text:p>"))
    hollow = _zip({"mimetype": "application/vnd.oasis.opendocument.text"})
    (tmp_path / "hollow.odt").write_bytes(hollow)
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped))
    assert [(d.doc_id, d.title) for d in docs] == [("policy.ODT", "Remote & hybrid work")]
    assert sorted((p.name, why) for p, why in skipped) == [
        ("blank.odt", "empty"),
        ("broken.odt", UNREADABLE_ODT),
        ("hollow.odt", UNREADABLE_ODT),
    ]
