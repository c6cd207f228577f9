"""Can a scope's share of near misses be read from its unlabelled confidences?

An experiment for the next step after ADR 020 (its "Consequences"): the shipped fit
assumes one on-topic question in ten is a hole, everywhere. If the share of near
misses in a scope's traffic can be estimated from the confidences alone, the bar
could rise where holes show and stay low where they do not. This fits the shares
of a three-part mixture (answerable, near miss, out of scope) by EM over
histograms of each part's confidence, taken from one labelled run, to streams
drawn from another run with known shares, and prints how close the estimates come.
The service now does this per scope (``ragsift.confidence.near_miss``, ADR 021).

    ragsift calibrate --dataset squad2 --half 1 --out half1.json
    ragsift eval --dataset squad2 --half 1 --holes 0.25 --near-miss-negatives \\
        --probes none --artifact half1.json --per-query parts.jsonl
    ragsift eval --dataset squad2 --half 2 --holes 0.5 --near-miss-negatives \\
        --probes none --artifact half1.json --per-query streams.jsonl
    python scripts/near_miss_share.py parts.jsonl streams.jsonl --size 500

Prints one JSON line per mix: the true shares and the median and 5th-95th
percentiles of the estimated near-miss share over ``--draws`` streams.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

KINDS = ("in_scope", "near_miss", "out_of_scope")
BINS = np.linspace(0.0, 1.0, 21)
#: (answerable, near miss, out of scope) shares of the streams drawn.
MIXES = (
    (0.33, 0.0, 0.67),
    (0.30, 0.03, 0.67),
    (0.25, 0.08, 0.67),
    (0.17, 0.17, 0.67),
    (0.5, 0.0, 0.5),
    (0.4, 0.1, 0.5),
    (0.25, 0.25, 0.5),
    (0.9, 0.1, 0.0),
)

FloatArray = npt.NDArray[np.float64]


def confidences(path: Path, scorer: str = "calibrated") -> dict[str, FloatArray]:
    """Each kind's confidences in a ``ragsift eval --per-query`` file.

    Raises:
        ValueError: a line that is not such a row (named by file and line).
    """
    out: dict[str, list[float]] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                row = json.loads(line)
                kind, value = row["kind"], float(row["scorers"][scorer]["confidence"])
            except (ValueError, KeyError, TypeError, RecursionError) as exc:
                raise ValueError(f"{path}:{number}: not a --per-query row ({exc!r})") from exc
            if kind not in KINDS or not 0.0 <= value <= 1.0:
                raise ValueError(f"{path}:{number}: kind {kind!r} or confidence {value} unknown")
            out.setdefault(kind, []).append(value)
    return {kind: np.asarray(values) for kind, values in out.items()}


def histogram(values: FloatArray) -> FloatArray:
    """The share of ``values`` in each of 20 bins of [0, 1], half a count added to each
    (a bin a part never reached must not make a stream impossible)."""
    counts = np.histogram(np.clip(values, 0.0, 1.0), BINS)[0] + 0.5
    return np.asarray(counts / counts.sum(), dtype=np.float64)


def mixture_shares(values: FloatArray, parts: FloatArray, iters: int = 500) -> FloatArray:
    """The shares of ``parts`` (rows: each part's histogram) that best explain
    ``values``, by EM on the mixture likelihood."""
    bins = np.clip(np.digitize(np.clip(values, 0.0, 1.0), BINS) - 1, 0, len(BINS) - 2)
    return em_shares(parts[:, bins], iters)


def em_shares(likelihood: FloatArray, iters: int = 500) -> FloatArray:
    """The mixture shares that best explain a sample, by EM, from ``likelihood``: one
    row per part, one column per value (that part's probability of it)."""
    shares = np.full(len(likelihood), 1.0 / len(likelihood))
    for _ in range(iters):
        weighted = shares[:, None] * likelihood
        weighted /= weighted.sum(axis=0, keepdims=True)
        shares = weighted.mean(axis=1)
    return shares


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", type=Path, help="per-query file the parts are read from")
    parser.add_argument("streams", type=Path, help="per-query file streams are drawn from")
    parser.add_argument("--size", type=int, default=500, help="queries per stream")
    parser.add_argument("--draws", type=int, default=200, help="streams per mix")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.size < 1 or args.draws < 1:
        parser.error("--size and --draws must be at least 1")
    try:
        parts_by_kind, pool = confidences(args.parts), confidences(args.streams)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    missing = [k for k in KINDS if k not in parts_by_kind or k not in pool]
    if missing:
        parser.error(f"no {', '.join(missing)} questions in both files (eval with --holes)")
    parts = np.stack([histogram(parts_by_kind[k]) for k in KINDS])
    rng = np.random.default_rng(args.seed)
    for mix in MIXES:
        estimates = []
        for _ in range(args.draws):
            drawn = [
                rng.choice(pool[kind], round(share * args.size))
                for kind, share in zip(KINDS, mix, strict=True)
                if share > 0
            ]
            estimates.append(mixture_shares(np.concatenate(drawn), parts)[1])
        near = np.asarray(estimates)
        print(
            json.dumps(
                {
                    "shares": dict(zip(KINDS, mix, strict=True)),
                    "near_miss_estimate": round(float(np.median(near)), 3),
                    "p05": round(float(np.quantile(near, 0.05)), 3),
                    "p95": round(float(np.quantile(near, 0.95)), 3),
                }
            )
        )


if __name__ == "__main__":
    main()
