"""A collection's metadata file (``<name>.ragsift.json``, written by ragsift) damaged on
disk: one ConfigurationError naming the file, never a traceback of another kind."""

from __future__ import annotations

from pathlib import Path

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
