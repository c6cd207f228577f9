"""Re-probing every stored scope that is due, with no ingest: what an upgrade needs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragsift.confidence import CalibrationArtifact
from ragsift.confidence.registry import (
    CalibrationRegistry,
    CalibrationScope,
    DirectoryCalibrationStore,
)
from ragsift.evaluation.reprobe import Reprobe, reprobe_after_ingest
from ragsift.evaluation.sweep import Reprober, reprobe_stored
from ragsift.ingest.indexer import Indexer
from ragsift.retrieval.edge import EdgeIndex
from tests.factories import made_on_base
from tests.unit.evaluation.test_probes_eval import BASE, EMBEDDER
from tests.unit.evaluation.test_reprobe import _made_by
from tests.unit.evaluation.test_selfcal_collection import documents

OLD_BASE = "cal-000000000000"


async def test_an_upgrade_sweep_probes_each_stale_scope_and_keeps_the_others(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    registry = CalibrationRegistry(BASE, store, refresh_s=0)
    # Probe calibrations of the whole collection and of tenant alpha, as an ingest and
    # `calibrate --collection` leave them; then the upgrade: both made on an old base.
    for tenant in (None, "alpha"):
        made = await reprobe_after_ingest(
            index, EMBEDDER, BASE, store, collection="docs", tenant=tenant
        )
        assert made.outcome == "stored", made.message
        assert made.artifact is not None
        store.put(CalibrationScope("docs", tenant), made_on_base(made.artifact, OLD_BASE))
    whole, alpha = CalibrationScope("docs"), CalibrationScope("docs", "alpha")
    assert registry.examine(whole)[1] == "base"
    assert "ragsift calibrations reprobe" in str(registry.examine(alpha)[2])
    # A scope fit on labels is never replaced, and one whose collection is gone is kept.
    await Indexer(index, EMBEDDER).ingest("gamma", "docs", documents(20))
    labelled = _made_by("feedback re-fit", 20)
    store.put(CalibrationScope("docs", "gamma"), labelled)
    gone = CalibrationScope("removed", "alpha")
    store.put(gone, made_on_base(labelled, OLD_BASE))
    seen: list[Reprobe] = []

    outcomes = await reprobe_stored(index, EMBEDDER, BASE, store, done=seen.append)

    assert seen == outcomes
    by_scope = {done.scope: done for done in outcomes}
    assert set(by_scope) == {whole, alpha, CalibrationScope("docs", "gamma"), gone}
    for scope in (whole, alpha):
        assert by_scope[scope].outcome == "stored", by_scope[scope].message
        assert OLD_BASE in by_scope[scope].message
        renewed = store.get(scope)
        assert renewed is not None
        assert renewed.provenance is not None
        assert renewed.provenance.base_version == BASE.version
        assert registry.examine(scope)[1] is None  # queries use it again
    assert by_scope[whole].chunks == 63  # every tenant's: alpha's 40, beta's 3, gamma's 20
    assert by_scope[alpha].chunks == 40
    assert by_scope[CalibrationScope("docs", "gamma")].outcome == "kept"
    assert store.get(CalibrationScope("docs", "gamma")) == labelled
    assert by_scope[gone].outcome == "no_collection"
    assert "calibrations remove" in by_scope[gone].message
    assert store.get(gone) is not None

    again = await reprobe_stored(index, EMBEDDER, BASE, store)
    assert [(done.scope, done.outcome) for done in again if done.scope in (whole, alpha)] == [
        (whole, "not_due"),
        (alpha, "not_due"),
    ]


async def test_a_sweep_can_be_limited_to_some_scopes(index: EdgeIndex, tmp_path: Path) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    for tenant in (None, "alpha"):
        made = await reprobe_after_ingest(
            index, EMBEDDER, BASE, store, collection="docs", tenant=tenant
        )
        assert made.artifact is not None
        store.put(CalibrationScope("docs", tenant), made_on_base(made.artifact, OLD_BASE))

    outcomes = await reprobe_stored(
        index, EMBEDDER, BASE, store, only=lambda scope: scope.tenant == "alpha"
    )

    assert [(done.scope, done.outcome) for done in outcomes] == [
        (CalibrationScope("docs", "alpha"), "stored")
    ]
    untouched = store.get(CalibrationScope("docs"))
    assert untouched is not None
    assert untouched.provenance is not None
    assert untouched.provenance.base_version == OLD_BASE


async def _counted(counted: list[str], n: int) -> None:
    """Wait until the reprober has counted ``n`` outcomes (errors included)."""
    for _ in range(400):
        if len(counted) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} re-probe outcomes were not counted: {counted}")


async def test_the_indexers_sweep_queues_only_the_stale_scopes(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    whole = await reprobe_after_ingest(index, EMBEDDER, BASE, store, collection="docs", tenant=None)
    assert whole.artifact is not None
    alpha = CalibrationScope("docs", "alpha")
    store.put(alpha, made_on_base(whole.artifact, OLD_BASE))
    kept = whole.artifact
    counted: list[str] = []
    reprober = Reprober(index, EMBEDDER, BASE, store, quiet_s=30.0, count=counted.append)

    queued = await reprober.sweep()

    assert queued == [alpha]  # the whole collection's is current: not queued
    await _counted(counted, 1)  # probed at once, not after the 30 s quiet time
    assert counted == ["stored"]
    renewed = store.get(alpha)
    assert renewed is not None
    assert renewed.provenance is not None
    assert renewed.provenance.base_version == BASE.version
    assert store.get(CalibrationScope("docs")) == kept
    assert await reprober.sweep() == []
    await reprober.close()


async def test_a_swept_scope_whose_collection_is_gone_is_counted_not_raised(
    index: EdgeIndex, tmp_path: Path
) -> None:
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    made = await reprobe_after_ingest(index, EMBEDDER, BASE, store, collection="docs", tenant=None)
    assert made.artifact is not None
    store.put(CalibrationScope("removed", "alpha"), made_on_base(made.artifact, OLD_BASE))
    counted: list[str] = []
    reprober = Reprober(index, EMBEDDER, BASE, store, count=counted.append)
    assert await reprober.sweep() == [CalibrationScope("removed", "alpha")]
    await _counted(counted, 1)
    assert counted == ["no_collection"]
    await reprober.close()


async def test_a_corrupt_scope_calibration_is_swept_and_replaced(
    index: EdgeIndex, tmp_path: Path
) -> None:
    """Corrupt (not JSON, a hostile size field, control characters): probed again."""
    store = DirectoryCalibrationStore(tmp_path / "calibrations")
    made = await reprobe_after_ingest(index, EMBEDDER, BASE, store, collection="docs", tenant=None)
    assert made.artifact is not None
    (path,) = (tmp_path / "calibrations").rglob("_collection.json")
    path.write_text('{"version": "\u001b[2J", "data": {"n": 1e400}', encoding="utf-8")
    counted: list[str] = []
    reprober = Reprober(index, EMBEDDER, BASE, store, count=counted.append)

    assert await reprober.sweep() == [CalibrationScope("docs")]
    await _counted(counted, 1)

    assert counted == ["stored"]
    renewed = store.get(CalibrationScope("docs"))
    assert renewed is not None
    assert renewed.version == made.artifact.version  # the same probes, the same calibration
    await reprober.close()


class _Failing(DirectoryCalibrationStore):
    """A store that cannot be read (Redis gone): listing fails, or reading each one."""

    fails = "scopes"

    def scopes(self) -> list[CalibrationScope]:
        if self.fails == "scopes":
            raise OSError("store unreachable")
        return super().scopes()

    def get(self, scope: CalibrationScope) -> CalibrationArtifact | None:
        if self.fails == "get":
            raise OSError("connection reset")
        return super().get(scope)


@pytest.mark.parametrize("fails", ["scopes", "get"])
async def test_a_store_that_cannot_be_read_is_one_error_and_nothing_is_probed(
    index: EdgeIndex, tmp_path: Path, fails: str
) -> None:
    """Counted once as ``error``, not read as corrupt (which would probe every scope)."""
    folder = tmp_path / "calibrations"
    made = await reprobe_after_ingest(
        index, EMBEDDER, BASE, DirectoryCalibrationStore(folder), collection="docs", tenant=None
    )
    assert made.outcome == "stored"
    store = _Failing(folder)
    store.fails = fails
    counted: list[str] = []
    reprober = Reprober(index, EMBEDDER, BASE, store, count=counted.append)
    assert await reprober.sweep() == []
    assert counted == ["error"]
    await reprober.close()
