"""Word documents read by their body's paragraphs; the ones that cannot be are passed over."""

from __future__ import annotations

import contextlib
import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsift.ingest import file_text as file_module
from ragsift.ingest.docx_text import UNREADABLE_DOCX, docx_text
from ragsift.ingest.file_text import UnreadableFile
from ragsift.ingest.loaders import iter_documents
from tests.factories import W, make_docx
from tests.factories import docx_paragraph as p

POLICY = make_docx(
    p("<w:t>Remote work policy</w:t>")
    + p("<w:t>Staff may work </w:t>", "<w:t>from home</w:t>", "<w:tab/><w:t>two days a week.</w:t>")
    + p("<w:t>Line one</w:t><w:br/><w:t>line two</w:t>")
    + p("<w:delText>deleted words</w:delText><w:instrText>PAGE</w:instrText><w:t>Kept.</w:t>")
    + "<w:tbl><w:tr><w:tc>"
    + p("<w:t>Role</w:t>")
    + "</w:tc><w:tc>"
    + p("<w:t>Days</w:t>")
    + "</w:tc></w:tr><w:tr><w:tc>"
    + p("<w:t>Engineer</w:t>")
    + "</w:tc><w:tc>"
    + p("<w:t>2</w:t>")
    + "</w:tc></w:tr></w:tbl>"
    + p("<w:t>After the table.</w:t>"),
    title="Remote &amp; hybrid work",
)


def test_paragraphs_runs_tables_and_the_title() -> None:
    text, title = docx_text(POLICY)
    assert title == "Remote & hybrid work"
    assert text.split("\n\n") == [
        "Remote work policy",
        "Staff may work from home two days a week.",
        "Line one\nline two",
        "Kept.",
        "Role Days",
        "Engineer 2",
        "After the table.",
    ]
    # without a declared title: the first line
    assert docx_text(make_docx(p("<w:t>First line</w:t>")))[1] == "First line"
    assert docx_text(make_docx(""))[1] is None


def test_a_nested_table_is_read_once() -> None:
    inner = "<w:tbl><w:tr><w:tc>" + p("<w:t>inner</w:t>") + "</w:tc></w:tr></w:tbl>"
    outer = "<w:tbl><w:tr><w:tc>" + p("<w:t>outer</w:t>") + inner + "</w:tc></w:tr></w:tbl>"
    assert docx_text(make_docx(outer)).text == "outer inner"


BOMB = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'
        for i in range(1, 10)
    )
    + f']><w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>'
    + "</w:body></w:document>"
)


@pytest.mark.parametrize(
    "data",
    [
        b"not a zip at all",
        b"",
        POLICY[: len(POLICY) // 2],  # cut short
        make_docx("").replace(b"word/document.xml", b"word/elsewhere.xml"),  # no body
    ],
)
def test_a_docx_that_cannot_be_read_says_why(data: bytes) -> None:
    with pytest.raises(UnreadableFile) as raised:
        docx_text(data)
    assert raised.value.reason == UNREADABLE_DOCX


def test_xml_that_does_not_parse_or_expands_without_end_is_refused() -> None:
    broken = io.BytesIO()
    with zipfile.ZipFile(broken, "w") as package:
        package.writestr("word/document.xml", "<w:document><unclosed>")
    with pytest.raises(UnreadableFile):
        docx_text(broken.getvalue())
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w") as package:
        package.writestr("word/document.xml", BOMB)
    with pytest.raises(UnreadableFile):  # expat refuses the amplification
        docx_text(bomb.getvalue())


def test_a_part_past_the_limit_is_not_unpacked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_module, "MAX_PART_BYTES", 1_000)
    big = make_docx(p("<w:t>" + "x" * 5_000 + "</w:t>"))
    with pytest.raises(UnreadableFile, match="unpacks to"):
        docx_text(big)


def test_the_loader_indexes_docx_files(tmp_path: Path) -> None:
    (tmp_path / "policy.DOCX").write_bytes(POLICY)
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really")
    (tmp_path / "blank.docx").write_bytes(make_docx(p("<w:t>  </w:t>")))
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped))
    assert [(d.doc_id, d.title) for d in docs] == [("policy.DOCX", "Remote & hybrid work")]
    assert "two days a week" in docs[0].text
    assert sorted(skipped) == [
        (tmp_path / "blank.docx", "empty"),
        (tmp_path / "broken.docx", UNREADABLE_DOCX),
    ]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=len(POLICY)))
def test_damaged_bytes_read_or_are_refused_never_crash(noise: bytes, at: int) -> None:
    """Bytes spliced into a real .docx: text, or UnreadableFile."""
    reason = None
    try:
        text, title = docx_text(POLICY[:at] + noise + POLICY[at:])
    except UnreadableFile as exc:
        reason = exc.reason
    else:
        assert title is None or len(title) <= 200
        assert text == text.strip()
    assert reason in (None, UNREADABLE_DOCX)


@pytest.mark.parametrize("value", [0x00, 0xFF, 0x55])
def test_every_damaged_byte_reads_or_is_refused(value: int) -> None:
    """Each byte of a real .docx overwritten in turn: a corrupt deflate stream raised
    zlib.error, an unknown compression method NotImplementedError, a cut EOFError."""
    for at in range(0, len(POLICY), 3):
        damaged = bytearray(POLICY)
        damaged[at] = value
        with contextlib.suppress(UnreadableFile):
            docx_text(bytes(damaged))
