"""What can a scope's near-miss reading tell apart? Read whole labelled sets' shares.

The service reads a scope's share of near misses from its unlabelled confidences
alone (ADR 021): a mixture of three kinds' confidence histograms taken from the
fit (answerable, near miss, out of scope). This script reads each labelled set
the same way, whole, and prints the true shares beside the read ones, so a
candidate change to the reading can be tried on sets before it is built:

* ``--second SIGNAL``: read a second axis too, the histogram over confidence x
  one signal of the ``--per-query`` rows (quantile bins of the parts' values; a
  missing value has a bin of its own);
* ``--answerable-too FILE``: a fourth kind, the answerable questions of another
  run (e.g. worded otherwise: ``eval --reword 0.5``), read beside the three.

Kinds are counted as the service counts them: an in-scope question whose kept
context lacks its answer is a near miss (ADR 021), whatever the set calls it.

    ragsift eval --dataset squad2 --half 1 --holes 0.15 --near-miss-negatives \\
        --artifact A --per-query parts.jsonl
    ragsift eval --dataset squad2 --half 2 --holes 0.25 --near-miss-negatives \\
        --max-out-of-scope 300 --artifact A --per-query holes.jsonl
    python scripts/read_kinds.py parts.jsonl holes.jsonl other.jsonl [--second score_gap]

Prints one JSON line per set: its name, size, true and read shares.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from near_miss_share import em_shares  # a sibling script, as run from scripts/

KINDS = ("answerable", "near_miss", "out_of_scope")
CONFIDENCE_BINS = 20

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def read_rows(path: Path, second: str | None = None) -> dict[str, FloatArray]:
    """Each kind's (confidence, second signal or NaN) rows of a ``--per-query`` file.

    Raises:
        ValueError: a line that is not such a row (named by file and line).
    """
    out: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                row = json.loads(line)
                confidence = float(row["scorers"]["calibrated"]["confidence"])
                value = row["signals"][second] if second else None
                kind = _kind(row["kind"], int(row["label"]))
                pair = (confidence, math.nan if value is None else float(value))
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise ValueError(f"{path}:{number}: not a --per-query row ({exc!r})") from exc
            if not 0.0 <= confidence <= 1.0:
                raise ValueError(f"{path}:{number}: confidence {confidence} outside [0, 1]")
            out[kind].append(pair)
    return {kind: np.asarray(rows, dtype=np.float64).reshape(-1, 2) for kind, rows in out.items()}


def _kind(kind: str, label: int) -> str:
    if kind == "in_scope":
        return "answerable" if label else "near_miss"
    if kind in ("near_miss", "out_of_scope"):
        return kind
    raise ValueError(f"kind {kind!r} unknown")


def second_edges(rows: FloatArray, bins: int) -> FloatArray:
    """Inner quantile edges of the second column's present values (none for one bin)."""
    present = rows[~np.isnan(rows[:, 1]), 1]
    if bins <= 1 or present.size == 0:
        return np.empty(0)
    return np.unique(np.quantile(present, np.linspace(0.0, 1.0, bins + 1)[1:-1]))


def cells(rows: FloatArray, edges: FloatArray | None) -> IntArray:
    """Each row's cell: its confidence bin, times the second axis's bin if ``edges``."""
    confidence = np.clip((rows[:, 0] * CONFIDENCE_BINS).astype(np.intp), 0, CONFIDENCE_BINS - 1)
    if edges is None:
        return confidence
    width = len(edges) + 2  # the quantile bins, then one for a missing value
    second = np.where(
        np.isnan(rows[:, 1]), width - 1, np.searchsorted(edges, np.nan_to_num(rows[:, 1]))
    )
    return np.asarray(confidence * width + second, dtype=np.intp)


def shares(cell: IntArray, parts: FloatArray, iters: int = 2_000) -> FloatArray:
    """The maximum-likelihood shares of ``parts`` (rows: each kind's cell distribution)
    behind the cells of a set, by EM."""
    return em_shares(parts[:, cell], iters)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", type=Path, help="per-query file of the fit's kinds")
    parser.add_argument("sets", type=Path, nargs="+", help="per-query files to read")
    parser.add_argument("--second", help="a signal of the rows to read beside the confidence")
    parser.add_argument("--second-bins", type=int, default=4, help="quantile bins of --second")
    parser.add_argument("--answerable-too", type=Path, help="a fourth kind's per-query file")
    args = parser.parse_args(argv)
    if args.second_bins < 1:
        parser.error("--second-bins must be at least 1")
    try:
        fit = read_rows(args.parts, args.second)
        extra = read_rows(args.answerable_too, args.second) if args.answerable_too else None
        sets = [(path, read_rows(path, args.second)) for path in args.sets]
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    kinds = [fit[kind] for kind in KINDS] + ([extra["answerable"]] if extra else [])
    if any(len(rows) == 0 for rows in kinds):
        parser.error(f"{args.parts}: each kind needs questions (eval with --holes)")
    edges = second_edges(np.concatenate(kinds), args.second_bins) if args.second else None
    size = CONFIDENCE_BINS * (1 if edges is None else len(edges) + 2)
    # Half a count in every cell: a cell a kind never reached must not rule a set out.
    parts = np.stack(
        [
            (np.bincount(cells(k, edges), minlength=size) + 0.5) / (len(k) + 0.5 * size)
            for k in kinds
        ]
    )
    for path, rows in sets:
        every = np.concatenate([rows[kind] for kind in KINDS])
        if len(every) == 0:
            parser.error(f"{path}: no questions")
        read = shares(cells(every, edges), parts)
        names = [*KINDS, "answerable_too"][: len(read)]
        print(
            json.dumps(
                {
                    "set": path.name,
                    "questions": len(every),
                    "true": {k: round(len(rows[k]) / len(every), 3) for k in KINDS},
                    "read": {k: round(float(v), 3) for k, v in zip(names, read, strict=True)},
                }
            )
        )


if __name__ == "__main__":
    main()
