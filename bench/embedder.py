"""Benchmark of the embedders: load time, texts per second (short, long) and peak memory.

Short texts are SQuAD 2.0 questions (~10-15 tokens), long ones its paragraphs
(~155 tokens on average after truncation at 256). Each measurement runs in a
fresh process, so imports are timed apart from the model load (sha256 checks,
tokenizer, onnxruntime session) and peak RSS is that configuration's own;
each is repeated and the median reported. The onnx model runs with fp32
products (the default) at every cap asked for, and with int8 products
(``RAGSIFT_EMBEDDER_COMPUTE=int8``, ADR 019) at the default cap. Prints
human-readable lines, then one JSON object on the last line. Never asserts on time.

    python bench/embedder.py [--repeats 3] [--texts 512] [--caps 2048,4096,16384]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from quick import parse_args

REPO = Path(__file__).resolve().parent.parent
SQUAD = Path(os.environ.get("RAGSIFT_SQUAD2_DIR", REPO.parent / "shared" / "data" / "squad2"))
BATCH = 64
_KIB = 1024


def _texts(limit: int) -> tuple[list[str], list[str]]:
    data = json.loads((SQUAD / "dev-v2.0.json").read_text(encoding="utf-8"))["data"]
    questions: list[str] = []
    paragraphs: list[str] = []
    for article in data:
        for paragraph in article["paragraphs"]:
            paragraphs.append(paragraph["context"])
            questions.extend(qa["question"] for qa in paragraph["qas"])
    return questions[:limit], paragraphs[:limit]


def _measure(kind: str, cap: int, limit: int) -> dict[str, Any]:
    """One configuration, in this process (called in a child)."""
    short, long = _texts(limit)
    start = time.perf_counter()
    embedder: Any
    if kind in ("onnx", "onnx-int8"):
        import onnxruntime  # noqa: F401  # timed apart from the model load
        import tokenizers  # noqa: F401

        from ragsift.retrieval.embedders.onnx import OnnxMiniLMEmbedder

        import_s = time.perf_counter() - start
        compute = "int8" if kind == "onnx-int8" else "fp32"
        embedder = OnnxMiniLMEmbedder(compute=compute, batch_size=BATCH, max_tokens_per_batch=cap)
        embed = embedder.embed_sync
    else:
        from ragsift.retrieval.embedders import HashingEmbedder

        import_s = time.perf_counter() - start
        embedder = HashingEmbedder()
        embed = embedder._embed_many
    load_s = time.perf_counter() - start - import_s
    embed(short[:BATCH])  # warm-up: first-run allocations
    rates = {}
    for name, texts in (("short", short), ("long", long)):
        start = time.perf_counter()
        for i in range(0, len(texts), BATCH):
            embed(texts[i : i + BATCH])
        rates[name] = len(texts) / (time.perf_counter() - start)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KIB
    return {
        "embedder_id": embedder.embedder_id,
        "import_s": import_s,
        "load_s": load_s,
        "short_per_s": rates["short"],
        "long_per_s": rates["long"],
        "peak_rss_mb": peak_mb,
    }


def _median_of(kind: str, cap: int, limit: int, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        child = subprocess.run(
            [sys.executable, __file__, "--child", kind, "--cap", str(cap), "--texts", str(limit)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(child.stdout.splitlines()[-1]))
    summary: dict[str, Any] = {"embedder_id": runs[0]["embedder_id"], "runs": repeats}
    for key in ("import_s", "load_s", "short_per_s", "long_per_s", "peak_rss_mb"):
        summary[key] = round(statistics.median(run[key] for run in runs), 3)
    return summary


def main() -> None:
    """Run the benchmark and print its JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--texts", type=int, default=512, help="Short and long texts each.")
    parser.add_argument(
        "--caps",
        help="Comma-separated max_tokens_per_batch values to compare (default: the module's).",
    )
    parser.add_argument("--child", choices=["onnx", "onnx-int8", "hashing"], help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=int, help=argparse.SUPPRESS)
    args = parse_args(parser, {"repeats": 1, "texts": 64})
    if args.child:
        print(json.dumps(_measure(args.child, args.cap, args.texts)))
        return

    # Imported only here so a child's import time covers the whole ragsift import.
    from ragsift.retrieval.embedders.onnx import MAX_TOKENS_PER_BATCH

    if args.caps is None:
        args.caps = str(MAX_TOKENS_PER_BATCH)
    results: dict[str, Any] = {}
    for cap in (int(value) for value in args.caps.split(",")):
        name = f"onnx_cap_{cap}"
        results[name] = _median_of("onnx", cap, args.texts, args.repeats)
        print(f"{name}: {results[name]}", file=sys.stderr)
    # The int8 model at the default cap: its gain is the products, not the batching.
    results["onnx_int8"] = _median_of("onnx-int8", MAX_TOKENS_PER_BATCH, args.texts, args.repeats)
    print(f"onnx_int8: {results['onnx_int8']}", file=sys.stderr)
    results["hashing"] = _median_of("hashing", 0, args.texts, args.repeats)
    print(f"hashing: {results['hashing']}", file=sys.stderr)
    print(
        json.dumps(
            {
                "benchmark": "embedder",
                "batch": BATCH,
                "texts_each": args.texts,
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
