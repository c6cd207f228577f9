"""Document metadata the index cannot keep is refused before anything is written.

Qdrant Edge wrote a payload nested ~125 deep to its write-ahead log and then could
not read the log back: every search of the shard, every tenant's, failed from then
on. NaN, lone surrogates and reserved keys failed only after the document's old
chunks were deleted. Each is now one clear error, from the file loader (naming file
and line), the event contract and the indexer alike, and the shard stays readable.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.errors import DecodeError, InvalidEventError
from ragsift.ingest.chunking import Chunker
from ragsift.ingest.indexer import Indexer
from ragsift.ingest.loaders import SourceDocument, iter_documents
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.index import SearchRequest
from ragsift.schemas import DocumentEvent
from ragsift.schemas.payload import MAX_METADATA_DEPTH
from ragsift.streams.codec import EventCodec
from tests.unit.cli.conftest import run_cli

EMBEDDER = HashingEmbedder(64)
KEPT = "The warranty on the Orbit thermostat lasts two years from purchase."


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE: dict[str, Any] = {
    "nested 130 deep": {"x": _nested(130)},
    "nested one past the bound": {"x": _nested(MAX_METADATA_DEPTH)},
    "NaN": {"x": float("nan")},
    "infinity": {"x": [float("-inf")]},
    "an integer no float holds": {"x": 10**400},
    "an integer past 64 bits": {"x": 2**64},
    "a negative integer past 64 bits": {"x": [{"y": -(2**63) - 1}]},
    "a lone surrogate value": {"x": "caf\ud800"},
    "a lone surrogate key": {"\udc00": 1},
    "a reserved key": {"tenant_id": "beta"},
    "no JSON value": {"x": object()},
}


async def _texts(index: EdgeIndex, tenant: str) -> list[str]:
    vector = (await EMBEDDER.embed(["warranty thermostat"]))[0]
    request = SearchRequest(tenant_id=tenant, query="warranty", dense_vector=vector, mode="dense")
    return [hit.text for hit in await index.search("docs", request)]


@pytest.mark.parametrize("metadata", HOSTILE.values(), ids=HOSTILE.keys())
async def test_an_update_with_hostile_metadata_is_refused_and_the_shard_still_reads(
    tmp_path: Path, metadata: dict[str, Any]
) -> None:
    """Through the indexer (an event built without validation, as a Python caller may):
    nothing of it is written, and the shard reopens and answers. A file's ingest keeps
    the old version; a documents-topic event withdraws it, as an index rebuilt from the
    compacted topic (which keeps this record, not that version) would not have it."""
    index = EdgeIndex(tmp_path / "edge")
    indexer = Indexer(index, EMBEDDER)
    await indexer.ingest("alpha", "docs", [SourceDocument("a", KEPT), SourceDocument("b", KEPT)])
    with pytest.raises(InvalidEventError, match="metadata"):
        await indexer.ingest("alpha", "docs", [SourceDocument("b", "B.", metadata=metadata)])
    event = DocumentEvent.model_construct(
        event_id="e1", tenant_id="alpha", collection="docs", doc_id="a", op="upsert",
        text="A new version.", title=None, source=None, source_type="unknown",
        metadata=metadata,
    )  # fmt: skip
    with pytest.raises(
        InvalidEventError, match=r"'a' metadata .*nothing was written; its indexed version is"
    ):
        await indexer.apply(event)
    await index.close()
    reopened = EdgeIndex(tmp_path / "edge")
    try:
        assert await _texts(reopened, "alpha") == [KEPT]  # b's, kept by the file ingest
        assert await reopened.documents("docs", "alpha") == {"b": 1}
    finally:
        await reopened.close()


@pytest.mark.parametrize(
    "metadata",
    [
        '{"x": NaN}',
        '{"x": ' + "[" * 40 + "1" + "]" * 40 + "}",
        '{"x": -Infinity}',
        '{"x": 18446744073709551616}',
    ],
)
def test_the_document_contract_refuses_metadata_the_index_cannot_keep(metadata: str) -> None:
    payload = '{"event_id": "e", "tenant_id": "t", "doc_id": "d", "text": "hi", "metadata": %s}'
    with pytest.raises(DecodeError, match=r"metadata: (holds|nests)"):
        EventCodec(DocumentEvent).decode(payload % metadata)


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ('{"text": "t", "x": ' + "[" * 200 + "]" * 200 + "}", "nests deeper than 32"),
        ('{"text": "t", "title": ' + "[" * 200 + "]" * 200 + "}", "'title' must be a string"),
        ('{"text": "t", "x": NaN}', "holds nan"),
        ('{"text": "t", "x": 1e400}', "holds inf"),
        (
            '{"text": "t", "x": [36893488147419103232]}',
            "holds the integer 36893488147419103232, past the 64 bits .*: send it as a string",
        ),
        ('{"text": "t \\ud800"}', "lone surrogate"),
        ('{"text": "t", "source": "s \\udfff"}', "lone surrogate"),
        ('{"text": "t", "source": {"a": [1]}}', "'source' must be a string"),
        ('{"text": "t", "collection": "x"}', r"reserved payload keys: \['collection'\]"),
        ('{"text": "t", "source_type": ["unknown"]}', "source_type must be one of"),
    ],
)
def test_ingest_names_the_file_and_line_and_writes_nothing(
    tmp_path: Path, row: str, why: str
) -> None:
    good = json.dumps({"id": "g", "text": KEPT})
    (tmp_path / "docs.jsonl").write_text(f"{good}\n{row}\n", encoding="utf-8")
    data = tmp_path / "data"
    result = run_cli(
        ["ingest", str(tmp_path / "docs.jsonl"), "--tenant", "t", "--data-dir", str(data)]
    )
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith(f"error: {tmp_path / 'docs.jsonl'}:2: ")
    assert re.search(why, line), line
    assert "Traceback" not in result.output
    assert not data.exists()  # nothing written: the good first line neither


async def test_integers_at_the_64_bit_bounds_are_stored_exactly(tmp_path: Path) -> None:
    """The refusal above starts where Qdrant would store a float: not before."""
    bounds = {"smallest": -(2**63), "largest": 2**64 - 1, "past_a_float": 2**53 + 1}
    index = EdgeIndex(tmp_path / "edge")
    try:
        doc = SourceDocument("a", KEPT, metadata=bounds)
        await Indexer(index, EMBEDDER).ingest("alpha", "docs", [doc])
        [chunk] = Chunker().split("a", KEPT)
        [payload] = (await index.chunk_payloads("docs", "alpha", [chunk.chunk_id])).values()
    finally:
        await index.close()
    stored = {key: payload[key] for key in bounds}
    assert stored == bounds
    assert all(type(value) is int for value in stored.values())


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
def test_a_file_name_that_is_not_utf8_is_stored_with_replacement_characters(
    tmp_path: Path,
) -> None:
    folder = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9")
    Path(folder).mkdir()
    Path(folder, os.fsdecode(b"men\xfc.txt")).write_text("Lunch is at noon.", encoding="utf-8")
    [doc] = iter_documents(Path(folder))
    assert doc.source == "men\ufffd.txt"
    assert doc.problem() is None

    async def index_it() -> list[str]:
        index = EdgeIndex(tmp_path / "edge")
        try:
            await Indexer(index, EMBEDDER).ingest("alpha", "docs", [doc])
            vector = (await EMBEDDER.embed(["lunch"]))[0]
            request = SearchRequest(tenant_id="alpha", query="lunch", dense_vector=vector)
            return [hit.source for hit in await index.search("docs", request)]
        finally:
            await index.close()

    assert asyncio.run(index_it()) == ["men\ufffd.txt"]


def _load(path: Path) -> tuple[list[SourceDocument], str | None]:
    try:
        return list(iter_documents(path)), None
    except InvalidEventError as exc:
        return [], str(exc)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extra=st.dictionaries(st.text(max_size=6), _JSON, max_size=3),
    depth=st.integers(0, 40) | st.integers(120, 150),
)
def test_any_jsonl_metadata_is_indexed_or_refused_and_the_shard_still_reads(
    tmp_path_factory: pytest.TempPathFactory, extra: dict[str, Any], depth: int
) -> None:
    """Whatever a JSONL line carries besides its text (any JSON, nested up to 150 deep,
    NaN included): the loader refuses it naming the line, or it is indexed and the
    shard reopens with every document readable."""
    folder = tmp_path_factory.mktemp("meta")
    row = {**extra, "x": _nested(depth), "text": KEPT}
    (folder / "d.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    docs, refused = _load(folder / "d.jsonl")
    if refused is not None:
        assert refused.startswith(f"{folder / 'd.jsonl'}:1: ")
        return

    async def index_and_reopen() -> list[str]:
        index = EdgeIndex(folder / "edge")
        await Indexer(index, EMBEDDER).ingest("alpha", "docs", docs)
        await index.close()
        reopened = EdgeIndex(folder / "edge")
        try:
            return await _texts(reopened, "alpha")
        finally:
            await reopened.close()

    assert asyncio.run(index_and_reopen()) == [KEPT]
