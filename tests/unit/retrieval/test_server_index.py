"""``QdrantServerIndex`` alone: how it reports server failures and caches collections."""

from __future__ import annotations

from typing import NoReturn

import httpx
import pytest
from qdrant_client.http.exceptions import ResponseHandlingException
from retrieval_corpus import COLLECTION, local_client

from ragsift.errors import ServiceUnavailableError
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
