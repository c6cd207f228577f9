"""``ragsift ingest`` into a new collection past RAGSIFT_QDRANT_MAX_COLLECTIONS: one line
naming the cap, the setting and the collection, exit 2, and nothing made on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result

from tests.unit.cli.conftest import Invoke, error_lines

pytestmark = pytest.mark.unit

CAPPED = {"RAGSIFT_QDRANT_MAX_COLLECTIONS": "2"}


def _ingest(cli: Invoke, doc: Path, collection: str, env: dict[str, str]) -> Result:
    result = cli(
        ["ingest", str(doc), "-t", "acme", "-c", collection, "--no-probe", "--data-dir", "d"],
        env,
    )
    assert "Traceback" not in result.output
    return result


def test_ingest_past_the_cap_exits_2_naming_the_cap(cli: Invoke, tmp_path: Path) -> None:
    doc = tmp_path / "a.txt"
    doc.write_text("The warranty lasts two years.", encoding="utf-8")
    for collection in ("one", "two"):
        made = _ingest(cli, doc, collection, CAPPED)
        assert made.exit_code == 0, made.output
    refused = _ingest(cli, doc, "three", CAPPED)
    assert refused.exit_code == 2
    [line] = error_lines(refused)
    assert line.startswith("error: collection 'three' not created")
    assert "RAGSIFT_QDRANT_MAX_COLLECTIONS=2" in line
    assert not (tmp_path / "d" / "qdrant" / "three").exists()
    # The collections that exist still take documents, and a raised cap lets it in.
    assert _ingest(cli, doc, "two", CAPPED).exit_code == 0
    assert _ingest(cli, doc, "three", {"RAGSIFT_QDRANT_MAX_COLLECTIONS": "3"}).exit_code == 0


@pytest.mark.parametrize("value", ["-1", "100001", "9" * 40, "1e3", "ten", "", "１０"])
def test_a_cap_out_of_bounds_is_refused_in_one_line(
    cli: Invoke, tmp_path: Path, value: str
) -> None:
    doc = tmp_path / "a.txt"
    doc.write_text("The warranty lasts two years.", encoding="utf-8")
    result = cli(
        ["ingest", str(doc), "-t", "acme", "--no-probe", "--data-dir", "d"],
        {"RAGSIFT_QDRANT_MAX_COLLECTIONS": value},
    )
    assert result.exit_code == 2, result.output
    assert "RAGSIFT_QDRANT_MAX_COLLECTIONS" in "\n".join(error_lines(result))
    assert "Traceback" not in result.output
