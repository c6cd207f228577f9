"""`scripts/read_kinds.py`: whole sets read as the near-miss reading reads them, with a
second axis or a fourth kind, and per-query files that are not rows refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.factories import load_script

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "read_kinds.py"


def _script() -> ModuleType:
    return load_script("read_kinds")


def _row(kind: str, label: int, confidence: float, gap: float | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "label": label,
        "signals": {"score_gap": gap, "top_score": 0.5},
        "scorers": {"calibrated": {"confidence": confidence}},
    }


def _write(path: Path, counts: dict[str, int], seed: int) -> None:
    """Answerable and near-miss questions share their confidences and differ only in
    their score gap; out-of-scope questions score low."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(counts.get("answerable", 0)):
        rows.append(_row("in_scope", 1, rng.uniform(0.3, 1.0), rng.uniform(0.5, 1.0)))
    for _ in range(counts.get("near_miss", 0)):
        # Half the near misses are in-scope questions whose answer was not kept.
        kind, label = ("in_scope", 0) if rng.random() < 0.5 else ("near_miss", 0)
        rows.append(_row(kind, label, rng.uniform(0.3, 1.0), rng.uniform(0.0, 0.5)))
    for _ in range(counts.get("out_of_scope", 0)):
        rows.append(_row("out_of_scope", 0, rng.uniform(0.0, 0.2), None))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(SCRIPT), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_shares_recover_a_known_mix() -> None:
    script = _script()
    rng = np.random.default_rng(3)
    kinds = [rng.beta(8, 2, (4000, 1)), rng.beta(3, 3, (4000, 1)), rng.beta(1, 9, (4000, 1))]
    rows = [np.hstack([k, np.full_like(k, np.nan)]) for k in kinds]
    size = script.CONFIDENCE_BINS
    parts = np.stack([(np.bincount(script.cells(r, None), minlength=size) + 0.5) for r in rows])
    parts /= parts.sum(axis=1, keepdims=True)
    drawn = np.concatenate([rows[0][:700], rows[1][:300], rows[2][:1000]])
    assert np.allclose(
        script.shares(script.cells(drawn, None), parts), [0.35, 0.15, 0.5], atol=0.05
    )


def test_a_second_axis_reads_what_the_confidence_alone_cannot(tmp_path: Path) -> None:
    parts, traffic = tmp_path / "parts.jsonl", tmp_path / "traffic.jsonl"
    _write(parts, {"answerable": 600, "near_miss": 600, "out_of_scope": 600}, seed=1)
    _write(traffic, {"answerable": 700, "near_miss": 100, "out_of_scope": 200}, seed=2)
    alone, both = _run(parts, traffic), _run(parts, traffic, "--second", "score_gap")
    assert alone.returncode == 0, alone.stderr
    assert both.returncode == 0, both.stderr
    first, second = json.loads(alone.stdout), json.loads(both.stdout)
    assert first["set"] == "traffic.jsonl"
    assert first["questions"] == 1000
    assert first["true"] == {"answerable": 0.7, "near_miss": 0.1, "out_of_scope": 0.2}
    # The confidence alone splits the on-topic questions at random; the gap tells them apart.
    assert abs(second["read"]["near_miss"] - 0.1) < 0.05
    assert abs(first["read"]["near_miss"] - 0.1) > abs(second["read"]["near_miss"] - 0.1)
    assert abs(first["read"]["out_of_scope"] - 0.2) < 0.05


def test_a_fourth_kind_is_read_beside_the_three(tmp_path: Path) -> None:
    parts, other, traffic = (tmp_path / f"{n}.jsonl" for n in ("parts", "other", "traffic"))
    _write(parts, {"answerable": 500, "near_miss": 500, "out_of_scope": 500}, seed=4)
    _write(other, {"answerable": 500}, seed=5)
    _write(traffic, {"answerable": 500, "out_of_scope": 500}, seed=6)
    done = _run(parts, traffic, "--answerable-too", other)
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)["read"]
    assert set(read) == {"answerable", "near_miss", "out_of_scope", "answerable_too"}
    assert sum(read.values()) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        json.dumps({"kind": "in_scope", "label": 1}),
        json.dumps({**_row("in_scope", 1, 0.5, 0.1), "kind": "\u001b[2J"}),
        json.dumps(_row("in_scope", 1, 1e400, 0.1)),
        json.dumps({**_row("in_scope", 1, 0.5, 0.1), "label": "yes"}),
        json.dumps(
            {**_row("in_scope", 1, 0.5, 0.1), "scorers": {"calibrated": {"confidence": "NaN"}}}
        ),
        json.dumps({**_row("in_scope", 1, 0.5, 0.1), "signals": {"score_gap": "wide"}}),
        "[" * 100_000,
    ],
)
def test_a_line_that_is_not_a_row_is_one_clear_error(tmp_path: Path, line: str) -> None:
    parts, bad = tmp_path / "parts.jsonl", tmp_path / "bad.jsonl"
    _write(parts, {"answerable": 10, "near_miss": 10, "out_of_scope": 10}, seed=7)
    bad.write_text(parts.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    refused = _run(parts, bad, "--second", "score_gap")
    assert refused.returncode == 2, refused.stderr
    assert f"{bad}:31:" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_parts_without_a_kind_an_empty_set_and_bad_options_are_refused(tmp_path: Path) -> None:
    parts, clean, empty = (tmp_path / f"{n}.jsonl" for n in ("parts", "clean", "empty"))
    _write(parts, {"answerable": 10, "near_miss": 10, "out_of_scope": 10}, seed=8)
    _write(clean, {"answerable": 10, "out_of_scope": 10}, seed=9)
    empty.write_text("", encoding="utf-8")
    for args, words in [
        ((clean, parts), "each kind needs questions"),
        ((parts, empty), "empty.jsonl: no questions"),
        ((parts, parts, "--second-bins", "0"), "--second-bins"),
        ((parts, tmp_path / "none.jsonl"), "none.jsonl"),
        ((parts, parts, "--second", "no_such_signal"), "not a --per-query row"),
    ]:
        refused = _run(*args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert words in refused.stderr
        assert "Traceback" not in refused.stderr
