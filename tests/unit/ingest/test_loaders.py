"""Loading .txt/.md/.jsonl with clear errors for bad input (HTML: test_html_text.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragsift.errors import InvalidEventError
from ragsift.ingest.loaders import iter_documents, safe_doc_id
from ragsift.ingest.sample import sample_documents, write_sample_corpus


def test_folder_of_markdown_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a b.md").write_text("# Title A\n\nBody.", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "skip.doc").write_bytes(b"\xd0\xcf")
    (tmp_path / "rows.jsonl").write_text(
        '{"id": "r1", "text": "row one", "source_type": "government", "lang": "en"}\n\n'
        '{"text": "row two"}\n',
        encoding="utf-8",
    )
    docs = {d.doc_id: d for d in iter_documents(tmp_path)}
    assert set(docs) == {"notes.txt", "r1", "rows-3", "sub-a-b.md"}
    assert docs["sub-a-b.md"].title == "Title A"
    assert docs["r1"].source_type == "government"
    assert docs["r1"].metadata == {"lang": "en"}


def test_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"title": "no text"}\n', encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"bad\.jsonl:2: .*'text'"):
        list(iter_documents(bad))


def test_missing_path_and_unsupported_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidEventError, match="no such file"):
        list(iter_documents(tmp_path / "nope"))
    docx = tmp_path / "x.doc"
    docx.write_bytes(b"PK")
    with pytest.raises(InvalidEventError, match="unsupported file type"):
        list(iter_documents(docx))


def test_safe_doc_id() -> None:
    assert safe_doc_id("a b/c.md") == "a-b-c.md"  # ASCII names keep their old ids
    assert safe_doc_id("///").startswith("doc-")
    assert len(safe_doc_id("x" * 500)) == 128


def test_non_latin_titles_get_distinct_stable_ids() -> None:
    # Issue 13 #6: both used to become "doc", so one paragraph overwrote the other.
    titles = ["ᅭ", "ᄀ", "東京", "Москва", "Pokémon", "Pokemon\u0301", "x" * 500, "x" * 500 + "y"]
    ids = [safe_doc_id(t) for t in titles]
    assert len(set(ids)) == len(titles)
    assert ids == [safe_doc_id(t) for t in titles]  # stable: no randomness, no state
    assert ids[4].startswith("Pokemon-")  # a readable ASCII slug before the hash
    assert all(re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", i) for i in ids)
    assert safe_doc_id("\x00\n\u202e") != safe_doc_id("\x00\n")  # control characters


def test_two_documents_with_one_id_are_an_error_not_an_overwrite(tmp_path: Path) -> None:
    (tmp_path / "a b.md").write_text("first", encoding="utf-8")
    (tmp_path / "a-b.md").write_text("second", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"'a-b.md' is used twice .*overwrite"):
        list(iter_documents(tmp_path))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "r1", "text": "one"}\n{"id": "r1", "text": "two"}\n', "utf-8")
    with pytest.raises(InvalidEventError, match="'r1' is used twice"):
        list(iter_documents(rows))


def test_sample_corpus_round_trips_through_the_loader(tmp_path: Path) -> None:
    write_sample_corpus(tmp_path)
    loaded = {d.doc_id for d in iter_documents(tmp_path)}
    assert loaded == {f"{d.doc_id}.md" for d in sample_documents()}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok"}\n' + "[" * 100_000 + "]" * 100_000 + "\n", "deep.jsonl:2: not JSON"),
        (b'{"text": "caf\xe9"}\n', "not UTF-8 text"),
        ('{"text": "ok", "n": ' + "9" * 5000 + "}\n", "deep.jsonl:1: not JSON"),
    ],
)
def test_hostile_jsonl_is_one_clear_error(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    """A line nested past the parser's depth, or bytes that are not UTF-8: named, not a crash."""
    path = tmp_path / "deep.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidEventError, match=message):
        list(iter_documents(path))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        # Stored as a chunk's title, an object showed in citations as "{'x': 1}".
        ('{"id": "a", "text": "hi", "title": {"x": 1}}', r"rows.jsonl:1: 'title' must be a string"),
        ('{"id": "a", "text": "hi", "title": ["a"]}', "'title' must be a string"),
        # An object, a list or true named a document by its Python text ("True").
        ('{"id": {"n": 1}, "text": "hi"}', r"'id' must be a string or a number, got \{'n': 1\}"),
        ('{"doc_id": true, "text": "hi"}', "'doc_id' must be a string or a number, got True"),
        ('{"id": ["a"], "text": "hi"}', "'id' must be a string or a number"),
    ],
)
def test_a_jsonl_title_or_id_of_the_wrong_type_is_refused(
    tmp_path: Path, row: str, message: str
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(row + "\n", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=message):
        list(iter_documents(path))


def test_a_jsonl_id_may_be_a_number(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 7, "text": "a", "title": "T"}\n{"id": 2.5, "text": "b"}\n', "utf-8")
    assert [(d.doc_id, d.title) for d in iter_documents(path)] == [("7", "T"), ("2.5", None)]


def test_the_ids_of_blank_jsonl_lines_are_read_again_and_a_changed_file_keeps_none(
    tmp_path: Path,
) -> None:
    """`--prune` keeps a document whose JSONL line is blank this time, by the id the row
    names; a folder named with a colon is still split at the line number, and a file
    that changed or went since it was read keeps nothing (no error mid-prune)."""
    import json

    from ragsift.ingest.loaders import EMPTY_LINE, empty_line_doc_ids

    folder = tmp_path / "ex:port 10:30"
    folder.mkdir()
    rows = folder / "faq.jsonl"
    lines = [
        {"id": "hours", "text": " "},
        {"text": "kept"},
        {"text": ""},
        {"id": "ü\x1b", "text": ""},
    ]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")
    skipped: list[tuple[Path, str]] = []
    assert [d.doc_id for d in iter_documents(folder, skipped=skipped)] == ["faq-2"]
    assert [reason for _, reason in skipped] == [EMPTY_LINE] * 3
    assert empty_line_doc_ids(skipped, folder) == {"hours", "faq-3", safe_doc_id("ü\x1b")}
    assert empty_line_doc_ids([(folder / "faq.jsonl", "empty")], folder) == set()  # a file's skip
    rows.write_text("{not json\n", "utf-8")
    assert empty_line_doc_ids(skipped, folder) == set()
    rows.unlink()
    assert empty_line_doc_ids(skipped, folder) == set()


def test_jsonl_lines_without_an_id_are_named_by_their_path_from_the_folder(
    tmp_path: Path,
) -> None:
    """`a/faq.jsonl` and `b/faq.jsonl` both named their lines `faq-1`, `faq-2`: one ingest
    of the folder was refused, two ingests of the subfolders replaced each other's lines.
    A file in the folder itself, or ingested on its own, keeps the ids it had."""
    from ragsift.ingest.loaders import EMPTY_LINE, empty_line_doc_ids

    rows = '{"text": "first"}\n{"text": ""}\n{"text": "third"}\n'
    for sub in ("", "a", "b", "a/deep", "日本"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
        (tmp_path / sub / "faq.jsonl").write_text(rows, encoding="utf-8")
    skipped: list[tuple[Path, str]] = []
    ids = [d.doc_id for d in iter_documents(tmp_path, skipped=skipped)]
    assert ids == [
        "a-deep-faq-1", "a-deep-faq-3", "a-faq-1", "a-faq-3", "b-faq-1", "b-faq-3",
        "faq-1", "faq-3", safe_doc_id("日本/faq-1"), safe_doc_id("日本/faq-3"),
    ]  # fmt: skip
    assert len(set(ids)) == len(ids)
    assert [d.doc_id for d in iter_documents(tmp_path / "a" / "faq.jsonl")] == ["faq-1", "faq-3"]
    assert [d.doc_id for d in iter_documents(tmp_path / "a")][-2:] == ["faq-1", "faq-3"]
    # --prune keeps a blank line's document by the id it was indexed under
    assert {reason for _, reason in skipped} == {EMPTY_LINE}
    assert empty_line_doc_ids(skipped, tmp_path) == {
        "a-deep-faq-2", "a-faq-2", "b-faq-2", "faq-2", safe_doc_id("日本/faq-2")
    }  # fmt: skip


@pytest.mark.parametrize(
    ("value", "shown"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("1e999", "Infinity")],
)
@pytest.mark.parametrize("key", ["id", "doc_id"])
def test_a_jsonl_id_that_is_no_finite_number_is_an_error(
    tmp_path: Path, key: str, value: str, shown: str
) -> None:
    """Python's json reads NaN, Infinity and 1e999 as floats: every such line became
    document "nan" or "inf", and the second replaced the first."""
    path = tmp_path / "rows.jsonl"
    path.write_text(f'{{"id": "ok", "text": "a"}}\n{{"{key}": {value}, "text": "b"}}\n', "utf-8")
    with pytest.raises(
        InvalidEventError,
        match=rf"rows\.jsonl:2: '{key}' must be a string or a finite number, got {shown} ",
    ):
        list(iter_documents(path))


def test_every_bad_jsonl_line_is_named_in_one_refusal(tmp_path: Path) -> None:
    """Each run named the first bad line only: ten bad lines took ten runs to find."""
    rows = [
        '{"id": "ok", "text": "fine"}',
        "not json at all",
        '{"id": "no-text"}',
        '{"id": "a", "text": "hi", "source_type": "gossip"}',
        '{"id": "ok2", "text": "fine too"}',
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(InvalidEventError) as caught:
        list(iter_documents(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{path}: 3 bad lines, fix them all: ")
    for lineno, what in [(2, "not JSON"), (3, "'text'"), (4, "source_type")]:
        assert f"rows.jsonl:{lineno}: " in message
        assert what in message
    assert "rows.jsonl:1:" not in message
    assert "rows.jsonl:5:" not in message


def test_a_refusal_names_the_first_ten_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join("{oops\n" for _ in range(25)), encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"25 bad lines.*; and 15 more$") as caught:
        list(iter_documents(path))
    assert "rows.jsonl:10: not JSON" in str(caught.value)
    assert "rows.jsonl:11:" not in str(caught.value)


def test_a_jsonl_line_of_control_characters_is_passed_over_as_empty(tmp_path: Path) -> None:
    # Indexed as a document, where a .txt holding those bytes is passed over as not text.
    from ragsift.ingest.loaders import EMPTY_LINE

    path = tmp_path / "rows.jsonl"
    path.write_text(
        '{"id": "ctl", "text": "\\u0001\\u0002\\u0003 \\u007f"}\n'
        '{"id": "ok", "text": "caf\\u00e9 \\u0001 opens at nine"}\n',
        encoding="utf-8",
    )
    skipped: list[tuple[Path, str]] = []
    assert [d.doc_id for d in iter_documents(path, skipped=skipped)] == ["ok"]
    assert [reason for _, reason in skipped] == [EMPTY_LINE]
