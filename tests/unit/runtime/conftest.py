"""The embedded runtime with the sample handbook indexed for tenant ``acme``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from tests.factories import embedded_settings


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[EmbeddedRuntime]:
    """A runtime on a temp data dir (hashing, low bars), the handbook indexed for acme."""
    rt = EmbeddedRuntime(embedded_settings(tmp_path))
    await rt.ingest("acme", sample_documents())
    yield rt
    await rt.close()
