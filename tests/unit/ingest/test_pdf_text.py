"""PDFs read by their text layer; the ones that cannot be are passed over with why."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pypdf import PdfReader, PdfWriter

from ragsift.ingest.file_text import UnreadableFile
from ragsift.ingest.loaders import iter_documents
from ragsift.ingest.pdf_text import ENCRYPTED, NO_TEXT, UNREADABLE, pdf_text
from tests.factories import make_pdf


def encrypted(data: bytes, *, user: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user, owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


MANUAL = make_pdf(
    [
        [
            "Orbit thermostat manual",
            "Returns are accepted for 30 days",
            "from the date of purchase.",
        ],
        ["The warranty covers defects in mate-", "rials for two years."],
    ],
    title="Orbit  manual",
)


def test_pages_read_in_order_as_paragraphs() -> None:
    text, title = pdf_text(MANUAL)
    assert title == "Orbit manual"
    first, second = text.split("\n\n")
    assert "Returns are accepted for 30 days" in first
    assert first.index("Orbit") < first.index("Returns")
    # a word broken at a line end by a hyphen is whole again
    assert "materials" in second
    # without a declared title: the first line
    assert (
        pdf_text(make_pdf([["  ", ""], ["First line here", "then more"]]))[1] == "First line here"
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (encrypted(MANUAL, user="secret"), ENCRYPTED),
        (make_pdf([[], []]), NO_TEXT),  # pages without text: a scan
        (b"%PDF-1.7\nnot really a PDF", UNREADABLE),
        (b"", UNREADABLE),
        (MANUAL[: len(MANUAL) // 2], UNREADABLE),  # cut short
    ],
)
def test_a_pdf_that_cannot_be_read_says_why(data: bytes, reason: str) -> None:
    with pytest.raises(UnreadableFile) as raised:
        pdf_text(data)
    assert raised.value.reason == reason


def test_an_owner_password_alone_does_not_stop_reading() -> None:
    assert "Returns are accepted" in pdf_text(encrypted(MANUAL, user="")).text


def test_the_loader_indexes_pdfs_and_counts_the_ones_it_cannot(tmp_path: Path) -> None:
    (tmp_path / "manual.PDF").write_bytes(MANUAL)
    (tmp_path / "locked.pdf").write_bytes(encrypted(MANUAL, user="secret"))
    (tmp_path / "scan.pdf").write_bytes(make_pdf([[]]))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n%%EOF")
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped))
    assert [(d.doc_id, d.title) for d in docs] == [("manual.PDF", "Orbit manual")]
    assert "two years" in docs[0].text
    assert sorted(skipped) == [
        (tmp_path / "broken.pdf", UNREADABLE),
        (tmp_path / "locked.pdf", ENCRYPTED),
        (tmp_path / "scan.pdf", NO_TEXT),
    ]
    # named on its own, an unreadable PDF is passed over the same way
    alone: list[tuple[Path, str]] = []
    assert list(iter_documents(tmp_path / "broken.pdf", skipped=alone)) == []
    assert alone == [(tmp_path / "broken.pdf", UNREADABLE)]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=len(MANUAL)))
def test_damaged_bytes_read_or_are_refused_never_crash(noise: bytes, at: int) -> None:
    """Bytes spliced into a real PDF: text, or UnreadableFile with a reason."""
    reason: str | None = None
    try:
        text, title = pdf_text(MANUAL[:at] + noise + MANUAL[at:])
    except UnreadableFile as exc:
        reason = exc.reason
    else:
        assert text.strip()
        assert title is None or len(title) <= 200
    assert reason in (None, UNREADABLE, NO_TEXT, ENCRYPTED)
