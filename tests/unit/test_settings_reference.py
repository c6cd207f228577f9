"""docs/configuration.md is what scripts/settings_reference.py writes from the settings.

A setting added, renamed, re-defaulted or re-bounded in ragsift/settings.py
without regenerating the page fails here, naming the command that fixes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import load_script
from tests.unit.test_docs_agree import setting_variables

reference = load_script("settings_reference")


def test_the_page_is_up_to_date() -> None:
    page = reference.PAGE.read_text(encoding="utf-8") if reference.PAGE.exists() else ""
    assert page == reference.render(), "docs/configuration.md is stale: run " + (
        "python scripts/settings_reference.py"
    )


def test_every_setting_has_a_row() -> None:
    rows = {
        line.split("`")[1] for line in reference.render().splitlines() if line.startswith("| `")
    }
    missing = [sorted(names) for names in setting_variables() if not names & rows]
    assert missing == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "unset"),
        (True, "true"),
        (30.0, "30"),
        (0.05, "0.05"),
        (67_108_864, "67108864"),
        ({}, "`{}`"),
        ("", '`""`'),
        (Path(".ragsift/qdrant"), "`.ragsift/qdrant`"),
    ],
)
def test_defaults_are_shown_as_the_docs_write_them(value: object, shown: str) -> None:
    assert reference.shown_default(value) == shown


def test_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "configuration.md"
    monkeypatch.setattr(reference, "PAGE", page)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    page.write_text("# stale\n", encoding="utf-8")
    assert reference.main(["--check"]) == 1
    assert reference.main([]) == 0
    assert reference.main(["--check"]) == 0
    assert page.read_text(encoding="utf-8") == reference.render()


def test_every_setting_says_what_it_does() -> None:
    """A field's ``description`` or the ``#:`` comment above it fills the meaning column."""
    rows = [line for line in reference.render().splitlines() if line.startswith("| `")]
    silent = [row.split("`")[1] for row in rows if row.rstrip().endswith("|  |")]
    assert silent == [], "give these settings a #: comment in ragsift/settings.py"
