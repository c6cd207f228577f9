"""`scripts/near_miss_share.py`: the mixture estimate finds known shares, and refuses
files that lack a kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.factories import load_script

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "near_miss_share.py"


def _script() -> ModuleType:
    return load_script("near_miss_share")


def test_the_mixture_recovers_the_shares_it_was_drawn_with() -> None:
    script = _script()
    rng = np.random.default_rng(1)
    answerable, near, outside = rng.beta(8, 2, 4000), rng.beta(4, 4, 4000), rng.beta(1, 9, 4000)
    parts = np.stack([script.histogram(x) for x in (answerable, near, outside)])
    stream = np.concatenate([answerable[:600], near[:400], outside[:1000]])
    shares = script.mixture_shares(stream, parts)
    assert np.allclose(shares, [0.3, 0.2, 0.5], atol=0.04)
    alone = script.mixture_shares(outside[1000:1500], parts)
    assert alone[2] > 0.9


def _write(path: Path, kinds: list[str]) -> None:
    rows = [
        {"kind": kind, "scorers": {"calibrated": {"confidence": 0.1 * (i % 10)}}}
        for kind in kinds
        for i in range(30)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_the_script_prints_one_line_per_mix_and_refuses_files_without_holes(
    tmp_path: Path,
) -> None:
    every, no_holes = tmp_path / "every.jsonl", tmp_path / "clean.jsonl"
    _write(every, ["in_scope", "near_miss", "out_of_scope"])
    _write(no_holes, ["in_scope", "out_of_scope"])
    run = [sys.executable, str(SCRIPT)]
    done = subprocess.run(
        [*run, str(every), str(every), "--draws", "3", "--size", "50"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == len(_script().MIXES)
    assert all(0.0 <= line["p05"] <= line["near_miss_estimate"] <= line["p95"] for line in lines)
    refused = subprocess.run(
        [*run, str(every), str(no_holes)], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2
    assert "no near_miss questions in both files" in refused.stderr


@pytest.mark.parametrize("size", ["0", "-5"])
def test_a_stream_size_below_one_is_refused(tmp_path: Path, size: str) -> None:
    every = tmp_path / "every.jsonl"
    _write(every, ["in_scope", "near_miss", "out_of_scope"])
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), str(every), str(every), "--size", size],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2
    assert "--size" in refused.stderr


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        json.dumps({"kind": "in_scope"}),
        json.dumps({"kind": "\u001b[2J", "scorers": {"calibrated": {"confidence": 0.5}}}),
        json.dumps({"kind": "in_scope", "scorers": {"calibrated": {"confidence": 1e400}}}),
        json.dumps({"kind": "in_scope", "scorers": {"calibrated": {"confidence": "NaN"}}}),
        "[" * 100_000,
    ],
)
def test_a_file_that_is_not_per_query_rows_is_one_clear_error(tmp_path: Path, line: str) -> None:
    every, bad = tmp_path / "every.jsonl", tmp_path / "bad.jsonl"
    _write(every, ["in_scope", "near_miss", "out_of_scope"])
    bad.write_text(every.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), str(every), str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2, refused.stderr
    assert f"{bad}:91:" in refused.stderr
    assert "Traceback" not in refused.stderr
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), str(every), str(tmp_path / "none.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2
    assert "none.jsonl" in missing.stderr
