"""A retrieval worker takes up its scopes' saved mix histograms and saves them again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ragsift.streams.assembly as assembly
import ragsift.streams.worker as worker
from ragsift.confidence.mix_state import FileMixState
from ragsift.settings import CacheSettings, CalibrationSettings, EmbedderSettings, Settings


async def test_the_worker_restores_at_build_and_saves_at_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(assembly, "restore_mix", lambda p, s: calls.append(("restore", s)) or 0)
    monkeypatch.setattr(worker, "save_mix", lambda p, s: calls.append(("save", s)) or 0)
    settings = Settings(
        data_dir=tmp_path,
        embedder=EmbedderSettings(kind="hashing"),
        cache=CacheSettings(enabled=False),
        calibration=CalibrationSettings(store_dir=tmp_path / "calibrations"),
    )
    app, _ = worker.build_worker(["retrieval"], settings)
    ((what, store),) = calls
    assert what == "restore"
    assert isinstance(store, FileMixState)
    assert store.path == tmp_path / "calibrations" / "_mix.json"
    await app.on_before_shutdown.send()
    assert calls[-1] == ("save", store)


def test_a_worker_without_the_retrieval_agent_keeps_no_mix_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(assembly, "restore_mix", lambda p, s: calls.append("restore") or 0)
    worker.build_worker(["decision"], Settings())
    assert calls == []
