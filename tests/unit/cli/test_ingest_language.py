"""``ragsift ingest`` of documents that are mostly not English warns once, and indexes
them all the same: ragsift's embedder, BM25 and calibrations read English."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.conftest import Invoke

pytestmark = pytest.mark.unit

FRENCH = [
    "La garantie du thermostat Orbit dure deux ans à compter de la date d'achat.",
    "Les remboursements sont versés sous quatorze jours sur la carte utilisée pour l'achat.",
    "Le support est ouvert du lundi au vendredi, de neuf heures à dix-huit heures.",
]
ENGLISH = [
    "The Orbit thermostat warranty lasts two years from the date of purchase.",
    "Refunds are paid within fourteen days to the card used for the purchase.",
    "Support is open Monday to Friday, from nine in the morning to six in the evening.",
]


def _folder(tmp_path: Path, texts: list[str]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n, text in enumerate(texts):
        (docs / f"doc-{n}.md").write_text(text + "\n", encoding="utf-8")
    return docs


def _ingest(cli: Invoke, docs: Path) -> tuple[str, list[str]]:
    done = cli(["ingest", str(docs), "-t", "acme", "--data-dir", "data", "--no-probe"])
    assert done.exit_code == 0, done.output
    warnings = [line for line in done.stderr.splitlines() if "non-English" in line]
    return str(done.stdout), warnings


def test_a_french_folder_is_indexed_with_one_warning(cli: Invoke, tmp_path: Path) -> None:
    out, warnings = _ingest(cli, _folder(tmp_path, [*FRENCH, ENGLISH[0]]))
    assert "indexed 4 documents" in out
    assert len(warnings) == 1
    (said,) = warnings
    assert "% of the text ingested for tenant 'acme' into collection 'default'" in said
    assert "looks non-English (mostly French" in said
    assert "docs/confidence.md, section 13" in said


@pytest.mark.parametrize(
    "texts",
    [ENGLISH, [*ENGLISH, FRENCH[0]], ["API rate limits: 100 requests a minute."]],
    ids=["english", "mostly-english", "keywords"],
)
def test_an_english_folder_is_not_warned_about(
    cli: Invoke, tmp_path: Path, texts: list[str]
) -> None:
    _, warnings = _ingest(cli, _folder(tmp_path, texts))
    assert warnings == []


def test_language_checks_off_warns_nothing(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_CONFIDENCE_LANGUAGE_CHECKS", "off")
    out, warnings = _ingest(cli, _folder(tmp_path, FRENCH))
    assert "indexed 3 documents" in out
    assert warnings == []
