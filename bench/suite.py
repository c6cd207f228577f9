"""Every benchmark in one run, printed as one JSON document (``make bench``).

On one seeded corpus (bench/corpus.py, 10,000 chunks by default) it runs:

- bench/confidence.py: the confidence engine's cost per query;
- bench/pipeline.py: the embedded pipeline's batched queries/s on cache
  misses, the same queries again as cache hits (the cache-hit speed-up), and
  the bare Qdrant Edge engine's hybrid batch throughput on the very shard and
  queries the pipeline used: the ceiling the pipeline is measured against
  (hashing embedder, vectors precomputed: the pipeline's own cost);
- bench/pipeline.py --embedder onnx --embed-in-path: the default
  configuration's queries/s with the onnx model embedding each batch, on a
  smaller corpus (indexing with the model costs ~0.1 s per chunk on two cores);
- bench/embedder.py: each embedder's load time, texts/s (short, long) and peak
  memory, in fresh processes;
- bench/streaming.py: Kafka end to end with 1 and 2 worker processes on the
  same corpus: queries/s, p50/p99 from produce to result;
- bench/rerank.py: the per-query overhead of reranking 20 candidates on a
  local TEI-speaking server (its own smaller corpus);

and reports the ratios of pipeline and end-to-end throughput over the bare
engine's. Needs Kafka and Redis for the streaming part (``make bench`` starts
them). Progress on stderr; the JSON document alone on stdout. Never asserts on
time.

    python bench/suite.py [--chunks 10000] [--queries 2000] [--stream-queries 5000]
                          [--onnx-chunks 500] [--onnx-queries 500]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _script(name: str, *args: str) -> dict[str, Any]:
    """Run bench/NAME.py; its last stdout line is its JSON figures."""
    _log(f"== bench/{name}.py {' '.join(args)}")
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *args],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000, help="embedded pipeline")
    parser.add_argument("--stream-queries", type=int, default=5_000, help="per worker count")
    parser.add_argument("--onnx-chunks", type=int, default=500, help="pipeline with the model")
    parser.add_argument("--onnx-queries", type=int, default=500, help="pipeline with the model")
    args = parser.parse_args()
    started = time.perf_counter()
    chunks = ("--chunks", str(args.chunks))
    confidence = _script("confidence")
    pipeline = _script("pipeline", *chunks, "--queries", str(args.queries))
    with_model = _script(
        "pipeline",
        *("--chunks", str(args.onnx_chunks), "--queries", str(args.onnx_queries)),
        *("--embedder", "onnx", "--embed-in-path"),
    )
    embedder = _script("embedder")["results"]
    streaming = _script("streaming", *chunks, "--queries", str(args.stream_queries))
    rerank = _script("rerank")
    engine = pipeline["engine_queries_per_s"]
    one, two = streaming["workers_1"], streaming["workers_2"]
    document = {
        "benchmark": "ragsift",
        "chunks": args.chunks,
        "confidence_us_per_query": confidence["batch_us_per_query"],
        "confidence_single_us_per_query": confidence["single_us_per_query"],
        "bare_engine_batch_qps": engine,
        "pipeline_qps": pipeline["queries_per_s"],
        "pipeline_single_p50_ms": pipeline["single_p50_ms"],
        "pipeline_cache_hit_qps": pipeline["cache_hit_queries_per_s"],
        "cache_hit_speedup": pipeline["cache_hit_speedup"],
        "pipeline_onnx_in_path_qps": with_model["queries_per_s"],
        "pipeline_onnx_in_path_single_p50_ms": with_model["single_p50_ms"],
        "embedders": embedder,
        "e2e_1_worker": one,
        "e2e_2_workers": two,
        "rerank_overhead_ms_per_query": rerank["overhead_ms_per_query"],
        "rerank_single_overhead_p50_ms": rerank["single_overhead_p50_ms"],
        "pipeline_over_engine": pipeline["pipeline_engine_ratio"],
        "e2e_1_worker_over_engine": round(one["queries_per_s"] / engine, 3),
        "targets": {"e2e_1_worker_qps_min": 1000, "pipeline_over_engine_min": 0.7},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
