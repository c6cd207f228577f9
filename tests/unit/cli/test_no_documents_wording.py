"""A tenant with no documents, and a collection that does not exist, are said in one
wording (``ragsift.retrieval.errors``) by ``ragsift ask`` and by the console over HTTP."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from ragsift.api.auth import Authenticator
from ragsift.console_server import create_console_app
from ragsift.embedded import EmbeddedRuntime
from ragsift.retrieval.errors import missing_collection, no_documents
from ragsift.settings import EmbedderSettings, Settings
from tests.unit.cli.conftest import error_lines, run_cli

pytestmark = pytest.mark.unit

#: the question the pipeline answers from what the tenant has indexed (D7)
SCOPE_QUESTION = "What can you answer?"


async def _console_answer(data: Path, body: dict[str, Any]) -> tuple[int, Any]:
    runtime = EmbeddedRuntime(Settings(data_dir=data, embedder=EmbedderSettings(kind="hashing")))
    auth = Authenticator(None, None, insecure=True)  # what `ragsift console` uses on loopback
    async with runtime, TestClient(TestServer(create_console_app(runtime, auth=auth))) as client:
        response = await client.post("/v1/query", json=body)
        return response.status, await response.json()


def test_a_tenant_with_no_documents_is_worded_alike(demo_dir: Path, tmp_path: Path) -> None:
    said = no_documents("nobody", "default")
    asked = run_cli(["ask", "refund?", "--tenant", "nobody", "--data-dir", str(demo_dir)])
    assert asked.exit_code == 2, asked.output
    assert said in error_lines(asked)[0]

    data = tmp_path / "data"
    shutil.copytree(demo_dir, data)
    body = {"query": SCOPE_QUESTION, "tenant_id": "nobody"}
    status, answer = asyncio.run(_console_answer(data, body))
    assert status == 200, answer
    assert said in answer["report"]["answer"]


def test_a_collection_that_does_not_exist_is_worded_alike(demo_dir: Path, tmp_path: Path) -> None:
    said = missing_collection("nope")
    args = ["ask", "refund?", "--tenant", "demo", "--collection", "nope"]
    asked = run_cli([*args, "--data-dir", str(demo_dir)])
    assert asked.exit_code == 2, asked.output
    assert said in error_lines(asked)[0]

    data = tmp_path / "data"
    shutil.copytree(demo_dir, data)
    body = {"query": "refund?", "tenant_id": "demo", "collection": "nope"}
    status, answer = asyncio.run(_console_answer(data, body))
    assert status == 404, answer
    assert said in answer["detail"]
