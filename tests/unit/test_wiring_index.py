"""``build_index`` hands the Qdrant server client the timeout the settings ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
import qdrant_client

from ragsift.settings import QdrantSettings
from ragsift.wiring import build_index

pytestmark = pytest.mark.unit

#: Nothing listens here: the client is built, never used.
UNUSED_URL = "http://127.0.0.1:39301"


class _RecordingClient(qdrant_client.AsyncQdrantClient):
    """An ``AsyncQdrantClient`` that remembers the timeout it was built with."""

    timeouts: ClassVar[list[Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        type(self).timeouts.append(kwargs.get("timeout"))
        super().__init__(**{**kwargs, "check_compatibility": False})


@pytest.mark.parametrize(
    ("timeout_s", "expected"), [(0.5, 1), (0.01, 1), (1.0, 1), (2.5, 3), (5.0, 5)]
)
async def test_a_fractional_qdrant_timeout_is_rounded_up_never_to_zero(
    timeout_s: float, expected: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _RecordingClient.timeouts.clear()
    monkeypatch.setattr(qdrant_client, "AsyncQdrantClient", _RecordingClient)
    settings = QdrantSettings(mode="server", url=UNUSED_URL, timeout_s=timeout_s)
    index = build_index(settings, tmp_path)
    try:
        assert _RecordingClient.timeouts == [expected]
    finally:
        await index.close()
