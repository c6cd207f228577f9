"""``QdrantServerIndex`` alone: how it reports server failures and caches collections."""

from __future__ import annotations

from typing import NoReturn

import httpx
import pytest
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from retrieval_corpus import COLLECTION, DIM, local_client, make_record

from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.server import QdrantServerIndex

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("failure", "named"),
    [
        (httpx.ConnectError(""), "ConnectError"),
        (ResponseHandlingException(httpx.ReadTimeout("")), "ReadTimeout"),
        (httpx.ConnectError("connection refused"), "connection refused"),
    ],
    ids=["bare", "wrapped", "worded"],
)
async def test_a_failure_without_a_message_is_named_by_its_type(
    failure: Exception, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = QdrantServerIndex(local_client())

    async def fail(*args: object, **kwargs: object) -> NoReturn:
        raise failure

    monkeypatch.setattr(index.client, "collection_exists", fail)
    with pytest.raises(ServiceUnavailableError) as caught:
        await index.collection_info(COLLECTION)
    assert caught.value.message == f"Qdrant unreachable for collection {COLLECTION!r}: {named}"
    await index.close()


OLD_ID = HashingEmbedder(DIM).embedder_id
NEW_DIM = DIM // 2
NEW_ID = HashingEmbedder(NEW_DIM).embedder_id


async def test_a_collection_made_again_by_this_index_is_read_again() -> None:
    index = QdrantServerIndex(local_client())
    await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    await index.client.delete_collection(COLLECTION)
    info = await index.ensure_collection(COLLECTION, NEW_DIM, NEW_ID)
    assert (info.embedder_id, info.dim) == (NEW_ID, NEW_DIM)
    await index.upsert(COLLECTION, [make_record("t1", 0, "text", vector=[1.0] * NEW_DIM)])
    await index.close()


async def test_a_collection_made_again_by_another_replica_is_read_again_on_ensure() -> None:
    client = local_client()
    index, other = QdrantServerIndex(client), QdrantServerIndex(client)
    await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    await client.delete_collection(COLLECTION)
    await other.ensure_collection(COLLECTION, NEW_DIM, NEW_ID)
    info = await index.ensure_collection(COLLECTION, NEW_DIM, NEW_ID)
    assert (info.embedder_id, info.dim) == (NEW_ID, NEW_DIM)
    await client.close()


async def test_a_404_forgets_the_collection_so_its_successor_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = local_client()
    index, other = QdrantServerIndex(client), QdrantServerIndex(client)
    await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    await client.delete_collection(COLLECTION)

    async def gone(*args: object, **kwargs: object) -> NoReturn:
        # what a Qdrant server answers (local mode raises a ValueError instead)
        raise UnexpectedResponse(404, "Not Found", b"", httpx.Headers())

    with monkeypatch.context() as patched:
        patched.setattr(client, "upsert", gone)
        with pytest.raises(CollectionNotFoundError):
            await index.upsert(COLLECTION, [make_record("t1", 0, "text")])
    await other.ensure_collection(COLLECTION, NEW_DIM, NEW_ID)
    info = await index.collection_info(COLLECTION)
    assert (info.embedder_id, info.dim) == (NEW_ID, NEW_DIM)
    await client.close()
