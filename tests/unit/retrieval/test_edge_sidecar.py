"""A collection's metadata file (``<name>.ragsift.json``, written by ragsift) damaged on
disk: one ConfigurationError naming the file, never a traceback of another kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsift.errors import ConfigurationError
from ragsift.retrieval.edge import SIDECAR_SUFFIX, EdgeIndex

DAMAGED = {
    "not JSON": b"{",
    "not UTF-8": b'{"dim": "\xff"}',  # raised UnicodeDecodeError
    "nested past the parser": b"[" * 100_000 + b"]" * 100_000,  # raised RecursionError
    "a list": b"[1, 2]",  # raised AttributeError
}


@pytest.mark.parametrize("body", DAMAGED.values(), ids=DAMAGED.keys())
def test_a_damaged_metadata_file_is_one_configuration_error(tmp_path: Path, body: bytes) -> None:
    index = EdgeIndex(tmp_path / "shards")
    (tmp_path / "shards").mkdir(exist_ok=True)
    sidecar = tmp_path / "shards" / f"docs{SIDECAR_SUFFIX}"
    sidecar.write_bytes(body)
    with pytest.raises(ConfigurationError, match="unreadable metadata file"):
        index._open("docs")


# -- the shard itself: held by another process, or damaged ---------------------------------


async def _indexed(tmp_path: Path) -> Path:
    from ragsift.ingest.indexer import Indexer
    from ragsift.ingest.loaders import SourceDocument
    from ragsift.retrieval.embedders import HashingEmbedder

    index = EdgeIndex(tmp_path / "shards")
    await Indexer(index, HashingEmbedder()).ingest(
        "t", "docs", [SourceDocument("a.md", "The warranty lasts two years.")]
    )
    await index.close()
    return tmp_path / "shards"


async def test_a_shard_another_index_holds_is_a_clear_unavailable_error(tmp_path: Path) -> None:
    # Two processes on one data dir (an ingest while `ask` runs) used to end in a traceback
    # of the binding's bare Exception: "Can't init WAL: Kind(WouldBlock)".
    from ragsift.errors import ServiceUnavailableError

    path = await _indexed(tmp_path)
    holder = EdgeIndex(path)
    holder._open("docs")  # the WAL's lock is per open file: a second index here conflicts
    try:
        with pytest.raises(ServiceUnavailableError, match="held by this process") as caught:
            EdgeIndex(path)._open("docs")
        assert caught.value.service == "qdrant-edge"
    finally:
        await holder.close()
    EdgeIndex(path)._open("docs")  # released: it opens


def _hold(path: str, held: Any, done: Any) -> None:
    index = EdgeIndex(path)
    index._open("docs")
    held.set()
    done.wait(60)


def _hold_as(path: str, command: list[str], held: Any, seconds: float) -> None:
    import sys
    import time

    sys.argv = command  # what the holder record names
    index = EdgeIndex(path)
    index._open("docs")
    held.set()
    time.sleep(seconds)  # then exits, letting the shard go


@pytest.mark.parametrize(
    ("command", "waited"), [(["ragsift", "ask"], True), (["ragsift", "console"], False)]
)
async def test_an_ask_holding_the_shard_is_waited_for_a_console_is_not(
    tmp_path: Path, command: list[str], waited: bool
) -> None:
    # Two `ragsift ask` at once on one collection: one of them failed (2 of 8 in a test).
    import multiprocessing

    from ragsift.errors import ServiceUnavailableError

    path = await _indexed(tmp_path)
    context = multiprocessing.get_context("spawn")
    held = context.Event()
    hold_s = 1.5 if waited else 60.0
    proc = context.Process(target=_hold_as, args=(str(path), command, held, hold_s))
    proc.start()
    try:
        assert held.wait(120)
        if waited:
            EdgeIndex(path)._open("docs")  # held when asked: it opens once the ask lets go
            proc.join(60)
        else:
            with pytest.raises(ServiceUnavailableError, match="held by `ragsift console`"):
                EdgeIndex(path)._open("docs")
            assert proc.is_alive()  # refused while it holds on: not waited out
    finally:
        proc.kill()
        proc.join(60)


async def test_the_error_names_the_process_that_holds_the_shard(tmp_path: Path) -> None:
    # "open in another process" left a user with a console in one terminal and an
    # ingest in another guessing which to stop.
    import multiprocessing

    from ragsift.errors import ServiceUnavailableError
    from ragsift.retrieval.edge_holder import describe_holder

    path = await _indexed(tmp_path)
    context = multiprocessing.get_context("spawn")
    held, done = context.Event(), context.Event()
    proc = context.Process(target=_hold, args=(str(path), held, done))
    proc.start()
    try:
        assert held.wait(120)
        with pytest.raises(ServiceUnavailableError) as caught:
            EdgeIndex(path)._open("docs")
        assert "held by `" in str(caught.value)
        assert f"(pid {proc.pid}, since " in str(caught.value)
    finally:
        done.set()
        proc.join(60)
    assert describe_holder(path, "docs") is None  # the record names a process now gone
    EdgeIndex(path)._open("docs")


@pytest.mark.parametrize("damaged", ["edge_config.json", "wal/open-1"])
async def test_a_damaged_shard_is_one_configuration_error_saying_what_to_do(
    tmp_path: Path, damaged: str
) -> None:
    path = await _indexed(tmp_path)
    target = path / "docs" / damaged
    target.write_bytes(b"garbage" * 1000)
    with pytest.raises(ConfigurationError, match="cannot open the index") as caught:
        EdgeIndex(path)._open("docs")
    assert "ingest again" in str(caught.value)


def _ensure(path: str, go: Any, out: Any) -> None:
    import asyncio

    async def run() -> str:
        index = EdgeIndex(path)
        try:
            await index.ensure_collection("fresh", 8, "test-embedder")
            await asyncio.sleep(0.5)  # hold it open while the other tries
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            await index.close()
        return "ok"

    go.wait()
    out.put(asyncio.run(run()))


def test_two_processes_creating_one_new_collection_do_not_blame_a_crash(tmp_path: Path) -> None:
    # The one that lost read the other's half-made shard as a crash's and was told to
    # remove it (the winner's finished shard), or got the engine's bare Exception.
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    go, out = context.Barrier(2), context.Queue()
    procs = [
        context.Process(target=_ensure, args=(str(tmp_path / "shards"), go, out)) for _ in "ab"
    ]
    for p in procs:
        p.start()
    outcomes = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert "ok" in outcomes
    for outcome in outcomes:
        assert outcome == "ok" or (
            outcome.startswith("ServiceUnavailableError")
            and ("open in another process" in outcome or "held by `" in outcome)
        ), outcome


# -- a creation that did not finish (an ingest killed while it made the shard) ---------------


async def test_a_half_made_shard_is_moved_aside_and_the_collection_made(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # It was an error asking for the folder's removal by hand, while `ask` sent the user
    # back to the `ingest` that refused: a circle (an ingest killed at creation, 12 of 12).
    from ragsift.retrieval.edge_unfinished import UNFINISHED_DIR

    root = tmp_path / "shards"
    (root / "docs" / "wal").mkdir(parents=True)
    (root / "docs" / "wal" / "open-1").write_bytes(b"\0" * 64)
    index = EdgeIndex(root)
    try:
        info = await index.ensure_collection("docs", 8, "test-embedder")
    finally:
        await index.close()
    assert info.points_count == 0
    (aside,) = (root / UNFINISHED_DIR).iterdir()
    assert (aside / "wal" / "open-1").read_bytes() == b"\0" * 64  # moved, not deleted
    assert any("did not finish" in r.getMessage() for r in caplog.records)


async def test_an_empty_shard_without_metadata_is_removed_and_made_again(tmp_path: Path) -> None:
    from ragsift.retrieval.edge_unfinished import UNFINISHED_DIR

    root = tmp_path / "shards"
    index = EdgeIndex(root)
    await index.ensure_collection("docs", 8, "test-embedder")
    await index.close()
    (root / "docs.ragsift.json").unlink()  # as if killed before the metadata was written
    again = EdgeIndex(root)
    try:
        assert (await again.ensure_collection("docs", 8, "test-embedder")).points_count == 0
    finally:
        await again.close()
    assert not (root / UNFINISHED_DIR).exists()


async def test_a_shard_with_points_but_no_metadata_is_never_cleared(tmp_path: Path) -> None:
    path = await _indexed(tmp_path)
    (path / "docs.ragsift.json").unlink()
    with pytest.raises(ConfigurationError, match="holds 1 point but has no metadata file"):
        await EdgeIndex(path).ensure_collection("docs", 8, "test-embedder")
    assert (path / "docs").is_dir()


@pytest.mark.parametrize(
    "record",
    [
        b"garbage",
        b"[]",
        b'{"pid": -1, "command": "ragsift ask", "since": 0}',
        b'{"pid": 0, "command": "ragsift ask", "since": 0}',
        b'{"pid": 99999999999999999999, "command": "x", "since": 0}',
        b'{"pid": "1", "command": "\\u202e\\n", "since": "nan"}',
        b'{"pid": 1, "command": "ragsift ask", "since": 1e308}',
        b"[" * 100_000 + b"]" * 100_000,
        b"\xff\xfe\x00",
    ],
)
def test_a_hostile_holder_record_names_nobody_and_is_not_waited_for(
    tmp_path: Path, record: bytes
) -> None:
    # The record is a file any process on the data dir can write: it must never raise,
    # name a process that is not the holder, or make an open wait.
    from ragsift.retrieval.edge_holder import describe_holder, load_waiting

    (tmp_path / ".docs.holder.json").write_bytes(record)
    shown = describe_holder(tmp_path, "docs")
    assert shown is None or "\n" not in shown
    tries: list[int] = []

    def refused() -> None:
        tries.append(1)
        raise RuntimeError("Can't init WAL: Kind(WouldBlock)")

    with pytest.raises(RuntimeError, match="WouldBlock"):
        load_waiting(refused, tmp_path, "docs")
    assert len(tries) < 200  # at most the 2 s given a holder that names nobody


async def test_a_payload_index_that_failed_is_made_with_the_collection_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The metadata file is written after the payload indexes: a creation that failed
    # on one leaves a shard without it, cleared and made whole by the next ensure.
    import qdrant_edge as qe

    from ragsift.retrieval.index import DOC_FIELD, TENANT_FIELD

    real = qe.EdgeShard

    class FailingOnce:
        def __init__(self, shard: Any) -> None:
            self.shard = shard

        def update(self, operation: Any) -> Any:
            monkeypatch.setattr(qe, "EdgeShard", real)  # once
            raise RuntimeError("payload index: timed out")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.shard, name)

    class Creating:
        load = staticmethod(real.load)

        @staticmethod
        def create(*args: Any) -> FailingOnce:
            return FailingOnce(real.create(*args))

    monkeypatch.setattr(qe, "EdgeShard", Creating)
    root = tmp_path / "shards"
    index = EdgeIndex(root)
    try:
        with pytest.raises(RuntimeError, match="payload index"):
            await index.ensure_collection("docs", 8, "test-embedder")
        assert not (root / f"docs{SIDECAR_SUFFIX}").exists()
        await index.ensure_collection("docs", 8, "test-embedder")
    finally:
        await index.close()
    shard = real.load(str(root / "docs"), None)
    try:
        assert set(shard.info().payload_schema) == {TENANT_FIELD, DOC_FIELD}
    finally:
        shard.close()
