"""``ragsift ingest --prune``: the collection holds what is under the folder now.

Before: the embedded runtime had no way to delete a document. A policy file deleted or
renamed in the folder stayed in the index for good, and answers kept citing it.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.settings import EmbedderSettings, Settings
from tests.unit.cli.conftest import Invoke


def _documents(data: Path, tenant: str) -> dict[str, int]:
    async def listed() -> dict[str, int]:
        settings = Settings(data_dir=data, embedder=EmbedderSettings(kind="hashing"))
        async with EmbeddedRuntime(settings) as runtime:
            return await runtime.index.documents("default", tenant)

    return asyncio.run(listed())


def _ingest(cli: Invoke, docs: Path, tenant: str, *more: str) -> str:
    done = cli(["ingest", str(docs), "-t", tenant, "--data-dir", "data", "--no-probe", *more])
    assert done.exit_code == 0, done.output
    return str(done.stdout)


def test_prune_removes_what_left_the_folder_and_only_that(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "old").mkdir(parents=True)
    (docs / "hours.md").write_text("The office opens at 9am.\n")
    (docs / "old" / "returns-2023.md").write_text("Returns are accepted within 30 days.\n")
    (docs / "leave.md").write_text("Staff get 25 days of annual leave.\n")
    _ingest(cli, docs, "acme")
    _ingest(cli, docs, "globex")  # another tenant's same documents stay whatever acme does
    data = tmp_path / "data"
    assert set(_documents(data, "acme")) == {"hours.md", "old-returns-2023.md", "leave.md"}

    (docs / "old" / "returns-2023.md").unlink()
    # A file that cannot be read this time is passed over, and keeps its indexed version.
    (docs / "leave.md").write_bytes(b"\x00\x01binary now")
    assert "pruned" not in _ingest(cli, docs, "acme")  # without --prune nothing goes
    assert "old-returns-2023.md" in _documents(data, "acme")

    out = _ingest(cli, docs, "acme", "--prune")
    assert f"pruned 1 documents no longer under {docs}: old-returns-2023.md" in out
    assert set(_documents(data, "acme")) == {"hours.md", "leave.md"}
    assert set(_documents(data, "globex")) == {"hours.md", "old-returns-2023.md", "leave.md"}
    asked = cli(["ask", "How many days to return an item?", "-t", "acme", "--data-dir", "data"])
    assert "returns-2023" not in asked.output

    again = _ingest(cli, docs, "acme", "--prune")
    assert f"pruned nothing: every document of the collection is under {docs}" in again
    # Nothing changed: nothing embedded again (the binary leave.md is passed over).
    assert "indexed 0 documents as 0 chunks" in again
    assert "1 unchanged, not embedded again" in again


def test_a_jsonl_line_passed_over_keeps_its_document_under_prune(
    cli: Invoke, tmp_path: Path
) -> None:
    """As an empty file keeps its indexed version, so does a JSONL row whose text is
    blank this time, by the id the row names (or its line's, when it names none)."""
    docs = tmp_path / "docs"
    docs.mkdir()

    def rows(*texts: str) -> None:
        lines = [
            {"id": "hours", "text": texts[0]},
            {"text": texts[1]},
            {"id": "gym", "text": "Floor 3."},
        ]
        (docs / "faq.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), "utf-8")

    rows("The office opens at 9am.", "Parking is behind building C.")
    _ingest(cli, docs, "acme")
    data = tmp_path / "data"
    assert set(_documents(data, "acme")) == {"hours", "faq-2", "gym"}
    rows(" ", "")
    out = _ingest(cli, docs, "acme", "--prune")
    assert f"pruned nothing: every document of the collection is under {docs}" in out
    assert set(_documents(data, "acme")) == {"hours", "faq-2", "gym"}


def test_an_empty_folder_prunes_nothing(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Parking is behind building C.\n")
    _ingest(cli, docs, "acme")
    (docs / "a.md").unlink()
    refused = cli(["ingest", str(docs), "-t", "acme", "--data-dir", "data", "--prune"])
    assert refused.exit_code == 2  # nothing to index: refused before anything is removed
    assert set(_documents(tmp_path / "data", "acme")) == {"a.md"}


def _two_documents(cli: Invoke, tmp_path: Path) -> Path:
    """A folder of a.md and b.md, ingested for tenant acme."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Parking is behind building C.\n")
    (docs / "b.md").write_text("The gym is on floor 3.\n")
    _ingest(cli, docs, "acme")
    return docs


def test_prune_refuses_one_file(cli: Invoke, tmp_path: Path) -> None:
    docs = _two_documents(cli, tmp_path)
    refused = cli(["ingest", str(docs / "a.md"), "-t", "acme", "--data-dir", "data", "--prune"])
    assert refused.exit_code == 2
    assert "--prune needs a folder" in refused.output
    assert set(_documents(tmp_path / "data", "acme")) == {"a.md", "b.md"}


def test_documents_lists_what_a_tenant_has_indexed(cli: Invoke, tmp_path: Path) -> None:
    _two_documents(cli, tmp_path)
    listed = cli(["documents", "-t", "acme", "--data-dir", "data"])
    assert listed.exit_code == 0, listed.output
    assert "tenant 'acme', collection 'default': 2 documents, 2 chunks" in listed.stdout
    as_json = cli(["documents", "-t", "acme", "--data-dir", "data", "--json"])
    assert json.loads(as_json.stdout) == {"a.md": 1, "b.md": 1}
    nobody = cli(["documents", "-t", "nobody", "--data-dir", "data"])
    assert nobody.exit_code == 2
    assert "tenant 'nobody' has no documents" in nobody.output


def test_an_unreadable_folder_is_named_and_prune_then_removes_nothing(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.walk passed a folder it could not list over without a word, and --prune then
    # removed every document indexed from it.
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "hours.md").write_text("The office opens at 9am.\n")
    (docs / "sub" / "moles.md").write_text("Moles dig tunnels in the garden.\n")
    (docs / "gone.md").write_text("This one leaves the folder.\n")
    _ingest(cli, docs, "acme")
    (docs / "gone.md").unlink()
    scandir = os.scandir

    def locked(path: str | os.PathLike[str] = ".") -> object:
        if Path(path) == docs / "sub":  # as without read permission (root has it anyway)
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", locked)
    done = cli(["ingest", str(docs), "-t", "acme", "--data-dir", "data", "--no-probe", "--prune"])
    assert done.exit_code == 0, done.output
    assert "folder that cannot be read" in done.output
    assert "--prune removed nothing: 1 folder(s) under" in done.output
    assert "pruned" not in done.stdout
    assert set(_documents(tmp_path / "data", "acme")) == {"hours.md", "sub-moles.md", "gone.md"}


def test_a_file_that_cannot_be_read_is_named_not_a_traceback(cli: Invoke, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "hours.md").write_text("The office opens at 9am.\n")
    (docs / "mem.txt").symlink_to("/proc/self/mem")  # reading it is an I/O error
    out = cli(["ingest", str(docs / "mem.txt"), "-t", "acme", "--data-dir", "data", "--no-probe"])
    # It was an OSError traceback; now the skip is named, and nothing left to index is
    # the usual one-line error.
    assert out.exit_code == 2, out.output
    assert "1 cannot be read (Input/output error)" in out.output
    assert "error: nothing to index" in out.output
    assert "Traceback" not in out.output


def test_an_unreadable_jsonl_file_keeps_its_documents_under_prune(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its lines' documents are named by the ids the lines give, which cannot be known
    # without reading it: --prune removed them all, as if the file had been deleted.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "hours.md").write_text("The office opens at 9am.\n")
    rows = [{"id": "gym", "text": "The gym is on floor 3."}, {"text": "Parking is out back."}]
    (docs / "faq.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    (docs / "gone.md").write_text("This one leaves the folder.\n")
    _ingest(cli, docs, "acme")
    (docs / "gone.md").unlink()
    opened = Path.open

    def locked(self: Path, *args: object, **kwargs: object) -> object:
        if self == docs / "faq.jsonl":  # as without read permission (root has it anyway)
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", locked)
    done = cli(["ingest", str(docs), "-t", "acme", "--data-dir", "data", "--no-probe", "--prune"])
    assert done.exit_code == 0, done.output
    assert "cannot be read (Permission denied)" in done.output
    assert "--prune removed nothing: 1 JSONL file(s) under" in done.output
    assert "pruned" not in done.stdout
    assert set(_documents(tmp_path / "data", "acme")) == {"hours.md", "gym", "faq-2", "gone.md"}
