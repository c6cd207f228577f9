"""gc_policy.settle: the collector's settings a worker runs with after start-up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ragsift.gc_policy import YOUNG_THRESHOLD, settle

pytestmark = pytest.mark.unit


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored_gc")
def test_settle_freezes_start_up_and_raises_only_the_young_threshold() -> None:
    _, older, oldest = gc.get_threshold()
    settle()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, older, oldest)
    assert gc.get_freeze_count() > 0
