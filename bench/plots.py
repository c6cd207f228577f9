"""Draw docs/latency_vs_rate.png and docs/cost_vs_corpus.png from a benchmark JSON document.

Reads the document ``make bench`` prints (bench/suite.py), or bench/scale.py's
own (``make bench-scale``: only the cost plot is drawn then).

    python bench/plots.py bench.json [--out docs]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a build machine
import matplotlib.pyplot as plt  # after the backend is chosen

REPO = Path(__file__).resolve().parents[1]
DPI = 110


def latency_plot(document: dict[str, Any], out: Path) -> Path:
    """p50 and p99 latency against offered rate, per worker set."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = {
        "1 worker": document.get("e2e_1_worker"),
        "2 workers": document.get("e2e_2_workers"),
        "1 worker, onnx in path": document.get("e2e_onnx_1_worker"),
    }
    for label, figures in series.items():
        if not figures:
            continue
        rates = [r for r in figures["rates"] if "p99_ms" in r]
        offered = [r["offered_qps"] for r in rates]
        ax.plot(offered, [r["p50_ms"] for r in rates], "o-", label=f"{label}: p50")
        ax.plot(offered, [r["p99_ms"] for r in rates], "s--", label=f"{label}: p99")
    target = document.get("targets", {}).get("e2e_1_worker_p99_ms_at_half_max_max")
    if target:
        ax.axhline(
            target, color="grey", linewidth=0.8, label=f"target p99 at 50% of max: {target} ms"
        )
    ax.set_xlabel("offered rate (queries/s)")
    ax.set_ylabel("latency from scheduled send to result (ms)")
    ax.set_yscale("log")
    ax.set_title("Kafka end to end, open loop")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", linewidth=0.3)
    path = out / "latency_vs_rate.png"
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def cost_plot(scale: dict[str, Any], out: Path) -> Path:
    """Index time, memory and disk, latency and throughput against corpus size."""
    rows = scale["sizes"]
    chunks = [r["chunks"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5))
    panels = [
        (
            axes[0][0],
            "index seconds",
            [
                ("index_seconds", "hashing (measured)"),
                ("onnx_index_estimate_s", "onnx (estimated)"),
            ],
        ),
        (
            axes[0][1],
            "MiB",
            [("rss_indexed_mb", "resident after indexing"), ("disk_mb", "on disk (allocated)")],
        ),
        (
            axes[1][0],
            "ms",
            [("single_p50_ms", "single query p50"), ("batch_p50_ms", "batch of 64 p50")],
        ),
        (
            axes[1][1],
            "queries/s",
            [("pipeline_qps", "embedded pipeline"), ("engine_qps", "bare engine")],
        ),
    ]
    for ax, unit, keys in panels:
        for key, label in keys:
            if all(key in r for r in rows):
                ax.plot(chunks, [r[key] for r in rows], "o-", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("corpus (chunks)")
        ax.set_ylabel(unit)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", linewidth=0.3)
    fig.suptitle(f"Cost as the corpus grows ({scale.get('embedder', 'hashing')} embedder)")
    path = out / "cost_vs_corpus.png"
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("document", type=Path, help="JSON from make bench or bench/scale.py")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args()
    document = json.loads(args.document.read_text())
    drawn = []
    if document.get("benchmark") == "scale":
        drawn.append(cost_plot(document, args.out))
    else:
        drawn.append(latency_plot(document, args.out))
        drawn.append(cost_plot(document["scale"], args.out))
    print(json.dumps({"plots": [str(p) for p in drawn]}))


if __name__ == "__main__":
    main()
