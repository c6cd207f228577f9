"""``QdrantServerIndex`` alone: how it reports server failures and caches collections."""

from __future__ import annotations

from typing import Any, NoReturn

import httpx
import pytest
from qdrant_client import models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from retrieval_corpus import COLLECTION, DIM, local_client, make_record

from ragsift.errors import ServiceUnavailableError
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.errors import CollectionNotFoundError
from ragsift.retrieval.index import DOC_FIELD, TENANT_FIELD
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


class _PayloadIndexes:
    """A server's payload indexes over local mode (which ignores them): the fields made,
    listed by ``get_collection`` as a server lists them; ``failing`` fails once."""

    def __init__(self, index: QdrantServerIndex, failing: str | None = None) -> None:
        self.failing = failing
        self.made: list[str] = []
        self._get_collection = index.client.get_collection

    async def create_payload_index(self, collection: str, field: str, schema: Any) -> None:
        if field == self.failing:
            self.failing = None
            raise UnexpectedResponse(503, "Service Unavailable", b"", httpx.Headers())
        self.made.append(field)

    async def get_collection(self, name: str) -> models.CollectionInfo:
        info = await self._get_collection(name)
        made = models.PayloadIndexInfo(data_type=models.PayloadSchemaType.KEYWORD, points=0)
        return info.model_copy(update={"payload_schema": dict.fromkeys(self.made, made)})


@pytest.mark.parametrize("failing", [TENANT_FIELD, DOC_FIELD])
async def test_a_payload_index_that_failed_is_made_by_the_next_ensure_and_only_it(
    failing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = QdrantServerIndex(local_client())
    server = _PayloadIndexes(index, failing)
    monkeypatch.setattr(index.client, "create_payload_index", server.create_payload_index)
    monkeypatch.setattr(index.client, "get_collection", server.get_collection)
    with pytest.raises(ServiceUnavailableError, match="503"):
        await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    made_first = list(server.made)  # the tenant index when the document index failed
    assert failing not in made_first
    await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    missing = [field for field in (TENANT_FIELD, DOC_FIELD) if field not in made_first]
    assert server.made == made_first + missing  # the missing ones, not a made one again
    await index.ensure_collection(COLLECTION, DIM, OLD_ID)
    assert sorted(server.made) == sorted([TENANT_FIELD, DOC_FIELD])  # made once each
    await index.close()
