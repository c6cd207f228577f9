"""The calibration registry across a store outage: a scope read while the store was down
gets its own calibration back once the store answers, without a read per query."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsift.confidence import load_default_calibration
from ragsift.confidence.artifact import CalibrationArtifact
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.retrieval.redis_calibration import (
    CalibrationStoreDownError,
    CalibrationStoreRefusedError,
)

SCOPE = CalibrationScope("docs", "acme")


def _variant(base: CalibrationArtifact, intercept: float) -> CalibrationArtifact:
    data = base.model_dump(mode="json", exclude={"version"})
    data["intercept"] = intercept
    return CalibrationArtifact.model_validate(data)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _FlakyStore(DirectoryCalibrationStore):
    """A directory store whose reads (and, if told, generation polls) fail with ``error``
    while ``failing``; it counts the reads and polls it was asked for."""

    def __init__(self, root: Path, error: OSError, *, polls_fail: bool = True) -> None:
        super().__init__(root)
        self.error = error
        self.polls_fail = polls_fail
        self.failing = False
        self.reads = 0
        self.polls = 0

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        self.reads += 1
        if self.failing:
            raise self.error
        return super().get(scope)

    def generation(self) -> str:
        self.polls += 1
        if self.failing and self.polls_fail:
            raise self.error
        return super().generation()


def _down() -> CalibrationStoreDownError:
    return CalibrationStoreDownError("redis calibration store: Timeout", service="redis")


def _setup(
    tmp_path: Path, error: OSError, *, polls_fail: bool = True
) -> tuple[CalibrationRegistry, _FlakyStore, _Clock, CalibrationArtifact, list[str]]:
    default = load_default_calibration()
    tenant_cal = _variant(default, 2.0)
    DirectoryCalibrationStore(tmp_path).put(SCOPE, tenant_cal)
    store = _FlakyStore(tmp_path, error, polls_fail=polls_fail)
    clock = _Clock()
    registry = CalibrationRegistry(default, store, refresh_s=5, clock=clock)
    registry.resolve(None, "warm")  # the registry has polled the store's generation
    store.reads = store.polls = 0
    clock.now = 10.0  # the outage begins a refresh period later
    reasons: list[str] = []
    registry.on_fallback = reasons.append
    return registry, store, clock, tenant_cal, reasons


@pytest.mark.parametrize("polls_fail", [True, False], ids=["redis down", "reads down"])
def test_a_scope_read_while_the_store_was_down_is_read_again_when_it_answers(
    tmp_path: Path, polls_fail: bool
) -> None:
    """Redis paused (or failed over) and came back with its data: its generation had not
    moved, and the scope read during the pause kept the broader calibration until some
    calibration was written somewhere."""
    registry, store, clock, tenant_cal, reasons = _setup(tmp_path, _down(), polls_fail=polls_fail)
    store.failing = True
    assert registry.resolve("acme", "docs") is registry.default  # the outage: the default
    assert reasons == ["unreadable"]

    clock.now = 16.0  # Redis answers again, with the same data and generation
    store.failing = False
    assert registry.resolve("acme", "docs").version == tenant_cal.version
    assert registry.scope_of("acme", "docs") == SCOPE
    assert reasons == ["unreadable"]  # no fallback once it was read


def test_an_outage_costs_no_store_read_per_query(tmp_path: Path) -> None:
    """While the store is down, each scope is read at most once per refresh period, and
    not at all while the registry's poll says the store is still down."""
    registry, store, clock, _, reasons = _setup(tmp_path, _down())
    store.failing = True
    for _ in range(100):
        registry.resolve("acme", "docs")
    assert store.reads == 2  # the tenant's scope and the collection's, once each
    assert store.polls == 1
    for now in (16.0, 22.0, 28.0):  # polls fail: the store is still down, nothing re-read
        clock.now = now
        for _ in range(100):
            registry.resolve("acme", "docs")
    assert store.reads == 2
    assert store.polls == 4
    assert reasons == ["unreadable"] * 400  # every query that fell back was counted


def test_reads_down_while_polls_answer_are_retried_once_per_period(tmp_path: Path) -> None:
    registry, store, clock, _, _ = _setup(tmp_path, _down(), polls_fail=False)
    store.failing = True
    for now in (10.0, 11.0, 16.0, 17.0, 22.0):
        clock.now = now
        for _ in range(10):
            registry.resolve("acme", "docs")
    assert store.reads == 2 * 3  # both scopes, at 10, 16 and 22 s


@pytest.mark.parametrize(
    "error",
    [
        CalibrationStoreRefusedError(
            "redis calibration store: refused", store="calibration", key_kind="artifacts", code="X"
        ),
        OSError("disk gone"),
    ],
    ids=["refused", "unreadable"],
)
def test_a_read_no_retry_fixes_waits_for_the_store_to_change(
    tmp_path: Path, error: OSError
) -> None:
    """A refusal (a key of the wrong type) is answered the same at every try: it is read
    again when the store changes, as a mismatched or corrupt artifact is, not every period."""
    registry, store, clock, _, _ = _setup(tmp_path, error, polls_fail=False)
    store.failing = True
    registry.resolve("acme", "docs")
    assert store.reads == 2
    for now in (16.0, 22.0):
        clock.now = now
        registry.resolve("acme", "docs")
    assert store.reads == 2
