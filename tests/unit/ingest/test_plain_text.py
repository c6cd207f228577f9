"""Text files as their writers meant them, bytes that are no text passed over, and a
folder's links not followed out of it.

Before: every .txt/.md was read as UTF-8 with U+FFFD for what failed, so a file saved
as UTF-16 was indexed with a NUL between letters, a Windows-1252 "café" as "caf\ufffd",
3 MB of random bytes as 2,998 chunks of noise; and a link to /etc/passwd in a folder
of documents indexed the password file.
"""

from __future__ import annotations

import codecs
import os
import random
from pathlib import Path

import numpy as np
import pytest

from ragsift.errors import InvalidEventError
from ragsift.ingest.file_text import UnreadableFile
from ragsift.ingest.folders import BROKEN_LINK, LINKED_FOLDER, NOT_A_FILE
from ragsift.ingest.loaders import DATA_DIR, HIDDEN, LINK_IN, LINK_OUT, iter_documents
from ragsift.ingest.plain_text import NOT_TEXT, SNIFF_BYTES, plain_text

TEXT = "Le café ouvre à 9 h.\nRefunds take 14 days — “always”.\n"


@pytest.mark.parametrize(
    "data",
    [
        TEXT.encode("utf-8"),
        codecs.BOM_UTF8 + TEXT.encode("utf-8"),
        TEXT.encode("utf-16"),  # with its mark, in the machine's order
        codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
        TEXT.encode("utf-32"),
        TEXT.encode("cp1252"),  # a legacy Windows file: not UTF-8
    ],
    ids=["utf-8", "utf-8 with a mark", "utf-16", "utf-16 big-endian", "utf-32", "windows-1252"],
)
def test_a_text_reads_as_its_writer_saved_it(data: bytes) -> None:
    assert plain_text(data) == TEXT


def test_a_utf8_file_with_a_damaged_byte_stays_utf8() -> None:
    data = ("é" * 50).encode("utf-8") + b"\xff" + b" fin"
    assert plain_text(data) == "é" * 50 + "\ufffd fin"


def test_colour_codes_in_a_log_are_text() -> None:
    line = "\x1b[32mINFO\x1b[0m the job finished in 3 s\n"
    assert plain_text((line * 100).encode()) == line * 100


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (np.random.default_rng(3).bytes(100_000), "NUL byte"),
        (b"a" * (SNIFF_BYTES - 1) + b"\x00", "NUL byte"),
        (bytes(range(1, 32)) * 40, "control characters"),
        (np.random.default_rng(4).integers(1, 256, 50_000, dtype=np.uint8).tobytes(), "control"),
    ],
    ids=["random bytes", "a NUL late in the sniff", "controls", "random bytes without a NUL"],
)
def test_bytes_that_are_no_text_are_refused_and_say_why(data: bytes, why: str) -> None:
    with pytest.raises(UnreadableFile, match=why) as refused:
        plain_text(data)
    assert refused.value.reason == NOT_TEXT


def test_a_nul_after_the_sniffed_bytes_is_a_control_character_among_text() -> None:
    data = b"a" * SNIFF_BYTES + b"\x00" + b"b" * 100
    assert plain_text(data).startswith("a" * SNIFF_BYTES)


def test_the_loader_passes_over_a_binary_txt_and_reads_the_rest(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_bytes(np.random.default_rng(5).bytes(20_000))
    (tmp_path / "notes.md").write_bytes(TEXT.encode("utf-16"))
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped))
    assert [d.text for d in docs] == [TEXT]
    assert skipped == [(tmp_path / "blob.txt", NOT_TEXT)]


def test_a_folder_s_links_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("The office is in Berlin.\n")
    os.symlink(outside, docs / "passwd.txt")
    os.symlink(docs / "a.md", docs / "again.md")
    os.symlink(tmp_path, docs / "up")  # a link to a folder: never walked
    skipped: list[tuple[Path, str]] = []
    found = list(iter_documents(docs, skipped=skipped))
    assert [d.source for d in found] == ["a.md"]
    assert sorted(skipped) == sorted(
        [
            (docs / "passwd.txt", LINK_OUT),
            (docs / "again.md", LINK_IN),
            (docs / "up", LINKED_FOLDER),  # was passed over without a word
        ]
    )
    # A link named on the command line is the user's choice: it is read.
    assert [d.text for d in iter_documents(docs / "passwd.txt")] == [outside.read_text()]


def test_broken_links_pipes_and_sockets_are_named_not_dropped(tmp_path: Path) -> None:
    # All three were passed over in silence: not counted in the skipped line.
    (tmp_path / "a.md").write_text("The office is in Berlin.\n")
    os.symlink(tmp_path / "gone.md", tmp_path / "broken.md")
    os.mkfifo(tmp_path / "pipe.md")
    skipped: list[tuple[Path, str]] = []
    assert [d.source for d in iter_documents(tmp_path, skipped=skipped)] == ["a.md"]
    assert sorted(skipped) == [
        (tmp_path / "broken.md", BROKEN_LINK),
        (tmp_path / "pipe.md", NOT_A_FILE),
    ]
    # Named on the command line, a pipe is refused: it read as an unlistable folder.
    with pytest.raises(InvalidEventError, match=r"not a file or a folder: .*pipe\.md"):
        list(iter_documents(tmp_path / "pipe.md"))


def test_hidden_files_and_folders_and_the_data_directory_are_passed_over(tmp_path: Path) -> None:
    # `ragsift ingest .` twice in a folder read its own .ragsift/audit/audit.jsonl the
    # second time (and refused the ingest over it); .git was walked file by file.
    (tmp_path / "a.md").write_text("The office opens at 9am.\n")
    (tmp_path / ".ragsift" / "audit").mkdir(parents=True)
    (tmp_path / ".ragsift" / "audit" / "audit.jsonl").write_text('{"type": "RAG_REFUSAL"}\n')
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "README.md").write_text("not a document\n")
    (tmp_path / ".notes.md").write_text("a hidden file\n")
    (tmp_path / "store" / "audit").mkdir(parents=True)  # a data directory not hidden
    (tmp_path / "store" / "audit" / "audit.jsonl").write_text('{"type": "RAG_REFUSAL"}\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("Parking is behind building C.\n")
    skipped: list[tuple[Path, str]] = []
    docs = list(iter_documents(tmp_path, skipped=skipped, exclude=[tmp_path / "store"]))
    assert [d.source for d in docs] == ["a.md", "sub/b.md"]
    assert sorted(skipped) == sorted(
        [
            (tmp_path / ".ragsift", HIDDEN),
            (tmp_path / ".git", HIDDEN),
            (tmp_path / ".notes.md", HIDDEN),
            (tmp_path / "store", DATA_DIR),
        ]
    )
    # A hidden folder named as the path is read: it is what was asked for.
    assert [d.source for d in iter_documents(tmp_path / ".git")] == ["README.md"]


@pytest.mark.parametrize(
    ("mark", "body"),
    [
        (codecs.BOM_UTF16_LE, random.Random(7).randbytes(20_000)),  # noise behind a mark
        (codecs.BOM_UTF16_LE, b"\x00\xd8" * 3),  # nothing but lone surrogates
        (codecs.BOM_UTF16_BE, random.Random(8).randbytes(4_000)),
    ],
)
def test_bytes_behind_a_utf16_mark_that_do_not_decode_are_no_text(mark: bytes, body: bytes) -> None:
    # Indexed as 11 chunks of CJK-looking noise before: the mark skipped every check.
    with pytest.raises(UnreadableFile, match="after its byte order mark"):
        plain_text(mark + body)


def test_utf16_text_with_one_damaged_unit_or_its_own_replacement_characters_is_text() -> None:
    damaged = ("x" * 500).encode("utf-16-le") + b"\x00\xd8" + ("y" * 500).encode("utf-16-le")
    assert plain_text(codecs.BOM_UTF16_LE + damaged).count("\ufffd") == 1
    own = ("a\ufffd" * 100).encode("utf-16-le")  # U+FFFD written by the text's author
    assert plain_text(codecs.BOM_UTF16_LE + own) == "a\ufffd" * 100
