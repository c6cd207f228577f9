"""Benchmark of the confidence engine: microseconds per query, batched and one at a time.

Measures signals + scoring + filtering + levels (the whole ``assess`` path) for
10,000 synthetic queries x 20 hits (dense cosine + BM25 + document ids), with
the default calibrated scorer. Besides the big array batch, it times the two
shapes the retrieval pipeline calls: one query (``assess``) and a batch of 64
(``assess_many``, the worker's batch size), as the median of ``--repeats``
passes. Prints human-readable lines, then one JSON object on the last line.
Never asserts on time.

    python bench/confidence.py [--queries 10000] [--hits 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
from quick import parse_args

from ragsift.confidence import ConfidenceConfig, ConfidenceEngine, HitBatch, HitScores

# The retrieval worker's default batch size (RAGSIFT_LIMITS_BATCH_SIZE): the engine
# call a pipeline batch makes.
PIPELINE_BATCH = 64


def _synthetic(n_queries: int, n_hits: int, seed: int) -> tuple[HitBatch, list[HitScores]]:
    rng = np.random.default_rng(seed)
    dense = np.sort(rng.beta(5, 3, size=(n_queries, n_hits)), axis=1)[:, ::-1]
    sparse = np.clip(dense * 20 + rng.normal(0, 3, size=dense.shape), 0, None)
    docs = rng.integers(0, 8, size=(n_queries, n_hits))
    lengths = np.full(n_queries, n_hits)
    batch = HitBatch(lengths=lengths, dense=dense, sparse=sparse, doc_codes=docs)
    singles = [
        HitScores(
            dense=dense[i],
            sparse=sparse[i],
            doc_ids=[f"d{d}" for d in docs[i]],
        )
        for i in range(n_queries)
    ]
    return batch, singles


def _pipeline_shapes(
    engine: ConfidenceEngine, singles: list[HitScores], repeats: int
) -> tuple[float, float]:
    """Median us per query of ``assess`` one at a time and of ``assess_many`` by 64."""
    chunks = [singles[i : i + PIPELINE_BATCH] for i in range(0, len(singles), PIPELINE_BATCH)]
    one, many = [], []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        for hits in singles:
            engine.assess(hits)
        one.append((time.perf_counter() - t0) / len(singles) * 1e6)
        t0 = time.perf_counter()
        for chunk in chunks:
            engine.assess_many(chunk)
        many.append((time.perf_counter() - t0) / len(singles) * 1e6)
    return statistics.median(one), statistics.median(many)


def main() -> None:
    """Run the benchmark and print its JSON summary last."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--hits", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--single-queries", type=int, default=2_000)
    args = parse_args(parser, {"queries": 1000, "repeats": 1, "single_queries": 200})

    engine = ConfidenceEngine(ConfidenceConfig())
    batch, singles = _synthetic(args.queries, args.hits, seed=0)
    engine.assess_batch(batch)  # warm-up

    batch_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        result = engine.assess_batch(batch)
        batch_times.append(time.perf_counter() - t0)
    batch_us = min(batch_times) / args.queries * 1e6

    n_mat = min(args.single_queries, args.queries)
    t0 = time.perf_counter()
    for i in range(n_mat):
        result.item(i)
    materialize_us = (time.perf_counter() - t0) / n_mat * 1e6

    n_single = min(args.single_queries, args.queries)
    for hits in singles[:100]:
        engine.assess(hits)  # warm-up
    single_times = []
    for _ in range(max(1, args.repeats // 2)):
        t0 = time.perf_counter()
        for hits in singles[:n_single]:
            engine.assess(hits)
        single_times.append(time.perf_counter() - t0)
    single_us = min(single_times) / n_single * 1e6

    one_us, batch64_us = _pipeline_shapes(engine, singles[:n_single], args.repeats)

    summary = {
        "benchmark": "confidence",
        "queries": args.queries,
        "hits_per_query": args.hits,
        "scorer": engine.scorer.name,
        "selection": engine.config.selection,
        "batch_us_per_query": round(batch_us, 2),
        "batch_materialize_us_per_query": round(materialize_us, 2),
        "single_us_per_query": round(single_us, 2),
        "single_queries_timed": n_single,
        "one_query_us_median": round(one_us, 2),
        "batch64_us_per_query_median": round(batch64_us, 2),
        "target_batch_us": 20,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"batch  (arrays): {batch_us:8.2f} us/query over {args.queries} queries")
    print(f"batch  (+ Assessment objects): {batch_us + materialize_us:8.2f} us/query")
    print(f"single (assess): {single_us:8.2f} us/query over {n_single} queries")
    print(f"one query, median of {args.repeats} passes: {one_us:8.2f} us")
    print(f"batch of {PIPELINE_BATCH} (assess_many), median: {batch64_us:8.2f} us/query")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
