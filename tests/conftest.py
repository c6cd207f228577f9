"""Test tiers: every test under tests/<tier>/ gets the <tier> marker."""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier of the folder it lives in."""
    root = Path(__file__).parent
    for item in items:
        try:
            tier = Path(item.fspath).relative_to(root).parts[0]
        except ValueError:
            continue
        if tier in _TIERS:
            item.add_marker(getattr(pytest.mark, tier))
