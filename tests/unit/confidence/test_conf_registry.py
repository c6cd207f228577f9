"""The calibration registry: the most specific scope wins, new versions are seen, bad ones not."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ragsift.confidence import load_default_calibration
from ragsift.confidence.artifact import CalibrationArtifact, Provenance
from ragsift.confidence.errors import CalibrationMismatchError, ConfidenceError
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    CalibrationStore,
    DirectoryCalibrationStore,
)


def _variant(base: CalibrationArtifact, intercept: float) -> CalibrationArtifact:
    data = base.model_dump(mode="json", exclude={"version"})
    data["intercept"] = intercept
    return CalibrationArtifact.model_validate(data)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_most_specific_scope_wins(tmp_path: Path) -> None:
    default = load_default_calibration()
    store = DirectoryCalibrationStore(tmp_path)
    assert isinstance(store, CalibrationStore)
    registry = CalibrationRegistry(default, store, refresh_s=0)
    collection_cal = _variant(default, 1.0)
    tenant_cal = _variant(default, 2.0)
    registry.put(CalibrationScope("docs"), collection_cal)
    registry.put(CalibrationScope("docs", "acme"), tenant_cal)

    assert registry.resolve("acme", "docs").version == tenant_cal.version
    assert registry.resolve("other", "docs").version == collection_cal.version
    assert registry.resolve(None, "docs").version == collection_cal.version
    assert registry.resolve("acme", "elsewhere").version == default.version
    assert registry.scope_of("acme", "docs") == CalibrationScope("docs", "acme")
    assert registry.scope_of("acme", "elsewhere") is None
    assert store.scopes() == [CalibrationScope("docs"), CalibrationScope("docs", "acme")]


def test_a_new_version_is_seen_after_the_refresh_period(tmp_path: Path) -> None:
    default = load_default_calibration()
    clock = _Clock()
    writer = DirectoryCalibrationStore(tmp_path)
    reader = CalibrationRegistry(
        default, DirectoryCalibrationStore(tmp_path), refresh_s=5, clock=clock
    )
    assert reader.resolve("acme", "docs").version == default.version
    first = _variant(default, 1.0)
    writer.put(CalibrationScope("docs", "acme"), first)
    clock.now = 1.0  # within the refresh period: still the cached answer
    assert reader.resolve("acme", "docs").version == default.version
    clock.now = 6.0
    assert reader.resolve("acme", "docs").version == first.version


def test_names_that_differ_only_in_unsafe_characters_do_not_collide(tmp_path: Path) -> None:
    default = load_default_calibration()
    store = DirectoryCalibrationStore(tmp_path)
    store.put(CalibrationScope("a/b"), _variant(default, 1.0))
    store.put(CalibrationScope("a_b"), _variant(default, 2.0))
    a = store.get(CalibrationScope("a/b"))
    b = store.get(CalibrationScope("a_b"))
    assert a is not None
    assert b is not None
    assert (a.intercept, b.intercept) == (1.0, 2.0)
    assert store.delete(CalibrationScope("a/b"))
    assert not store.delete(CalibrationScope("a/b"))


def test_a_mismatched_artifact_is_refused_on_put_and_skipped_on_read(tmp_path: Path) -> None:
    default = load_default_calibration()
    data = default.model_dump(mode="json", exclude={"version"})
    data["embedder_id"] = "some-other-model"
    alien = CalibrationArtifact.model_validate(data)
    store = DirectoryCalibrationStore(tmp_path)
    registry = CalibrationRegistry(default, store, refresh_s=0)
    with pytest.raises(CalibrationMismatchError):
        registry.put(CalibrationScope("docs"), alien)
    store.put(CalibrationScope("docs"), alien)  # written behind the registry's back
    reasons: list[str] = []
    registry.on_fallback = reasons.append
    assert registry.resolve(None, "docs").version == default.version
    assert registry.rejected == 1
    assert reasons == ["mismatch"]


def test_without_a_store_everything_gets_the_default() -> None:
    default = load_default_calibration()
    registry = CalibrationRegistry(default)
    assert registry.resolve("acme", "docs") is default
    with pytest.raises(ConfidenceError):
        registry.put(CalibrationScope("docs"), default)
    with pytest.raises(ConfidenceError):
        CalibrationScope("")


def test_a_calibration_derived_from_another_default_is_not_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After an upgrade refits the default, a scope's probe calibration made on the old
    one re-certified a bar on another model: the scope falls back to the default."""
    default = load_default_calibration()
    store = DirectoryCalibrationStore(tmp_path)
    derived = _variant(default, 1.0)

    def made_on(version: str) -> CalibrationArtifact:
        provenance = Provenance(method="probes (bundled)", base_version=version, collection="docs")
        data = derived.model_dump(mode="json", exclude={"version"})
        data["provenance"] = provenance.model_dump(mode="json")
        return CalibrationArtifact.model_validate(data)

    current, stale = made_on(default.version), made_on("cal-000000000000")
    store.put(CalibrationScope("docs", "acme"), current)
    store.put(CalibrationScope("docs", "beta"), stale)
    registry = CalibrationRegistry(default, store, refresh_s=0)
    reasons: list[str] = []
    registry.on_fallback = reasons.append

    assert registry.resolve("acme", "docs").version == current.version
    assert registry.resolve("beta", "docs").version == default.version
    assert registry.scope_of("beta", "docs") is None
    assert registry.resolve("beta", "docs").version == default.version
    assert registry.rejected == 1
    assert reasons == ["base", "base"]  # each query it leaves to the default
    assert caplog.text.count("cal-000000000000") == 1  # logged at the one read


class _UnreadableStore(DirectoryCalibrationStore):
    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        raise OSError("disk gone")


@pytest.mark.parametrize("reason", ["invalid", "unreadable"])
def test_each_ignored_calibration_is_reported_with_its_reason(tmp_path: Path, reason: str) -> None:
    """A calibration the store holds but cannot give (corrupt file, unreadable store) is
    skipped like a mismatched one, and said so: the scope quietly loses its calibration
    otherwise."""
    default = load_default_calibration()
    writer = DirectoryCalibrationStore(tmp_path)
    writer.put(CalibrationScope("docs"), _variant(default, 1.0))
    if reason == "invalid":
        (written,) = [p for p in tmp_path.rglob("*.json")]
        written.write_text('{"version": "cal-1", "intercept": "not a number"}', encoding="utf-8")
    store = writer if reason == "invalid" else _UnreadableStore(tmp_path)
    registry = CalibrationRegistry(default, store, refresh_s=0)
    reasons: list[str] = []
    registry.on_fallback = reasons.append

    assert registry.resolve(None, "docs") is default
    assert reasons == [reason]
    assert registry.rejected == 1


class _CountingStore(DirectoryCalibrationStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads = 0

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        self.reads += 1
        return super().get(scope)


def test_the_scopes_remembered_are_bounded_least_recently_used_first(tmp_path: Path) -> None:
    default = load_default_calibration()
    store = _CountingStore(tmp_path)
    registry = CalibrationRegistry(default, store, refresh_s=3600, max_cached_scopes=8)
    tenant_cal = _variant(default, 2.0)
    registry.put(CalibrationScope("docs", "acme"), tenant_cal)

    assert registry.resolve("acme", "docs").version == tenant_cal.version
    before = store.reads
    for n in range(1_000):  # a thousand tenants without calibrations of their own
        assert registry.resolve(f"t{n}", "docs").version == default.version
        assert registry.resolve("acme", "docs").version == tenant_cal.version  # kept: recent
    # Each new tenant's scope is read once, the collection's the first time; acme's stays.
    assert store.reads - before == 1_001
    assert len(registry._cache) == 8
    reads = store.reads
    assert registry.resolve("acme", "docs").version == tenant_cal.version
    assert store.reads == reads  # still remembered
    assert registry.resolve("t0", "docs").version == default.version
    assert store.reads == reads + 1  # evicted long ago: read again (its collection scope is kept)


def test_a_registry_must_remember_a_querys_two_scopes(tmp_path: Path) -> None:
    with pytest.raises(ConfidenceError, match="max_cached_scopes must be >= 2"):
        CalibrationRegistry(
            load_default_calibration(), DirectoryCalibrationStore(tmp_path), max_cached_scopes=1
        )


class _PausingStore(DirectoryCalibrationStore):
    """Holds its first read of ``scope``, once read, until told to go on."""

    def __init__(self, root: Path, scope: CalibrationScope) -> None:
        super().__init__(root)
        self.scope = scope
        self.read = threading.Event()
        self.go_on = threading.Event()

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        artifact = super().get(scope)
        if scope == self.scope and not self.read.is_set():
            self.read.set()
            assert self.go_on.wait(timeout=30), "the test never let the read go on"
        return artifact


@pytest.mark.parametrize("writer", ["this registry", "another process"])
def test_a_read_across_a_change_is_not_remembered_after_it(tmp_path: Path, writer: str) -> None:
    """The embedded console resolves queries on its event loop while a feedback re-fit
    runs on a thread with the same registry (``console_server.post_feedback``). A
    query's read of its scope, passed by a change (a put through the registry, or
    another process's, as ``ragsift calibrate --collection``) and by the re-fit
    thread's refresh, was cached after both: the scope was served the replaced
    calibration until the store changed again."""
    default = load_default_calibration()
    scope = CalibrationScope("docs", "acme")
    old, new = _variant(default, 1.0), _variant(default, 2.0)
    DirectoryCalibrationStore(tmp_path).put(scope, old)
    store = _PausingStore(tmp_path, scope)
    clock = _Clock()
    registry = CalibrationRegistry(default, store, refresh_s=5, clock=clock)
    served: list[str] = []
    query = threading.Thread(target=lambda: served.append(registry.resolve("acme", "docs").version))
    query.start()
    assert store.read.wait(timeout=30)  # the query read ``old``, and has not cached it yet
    if writer == "this registry":
        registry.put(scope, new)  # the re-fit's thread
    else:
        DirectoryCalibrationStore(tmp_path).put(scope, new)
        clock.now = 6.0  # past the refresh period
    registry.resolve(None, "docs")  # the re-fit's next read (``refit_base``) refreshes
    store.go_on.set()
    query.join(timeout=30)
    assert served == [old.version]  # it began before the change: either is right
    assert registry.resolve("acme", "docs").version == new.version
    assert registry.scope_of("acme", "docs") == scope
