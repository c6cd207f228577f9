"""Cost as the corpus grows: index time, memory, disk, query latency and q/s per size.

Each size runs in a fresh process (so resident memory is that size's own) on
the seeded synthetic corpus of bench/corpus.py with the **hashing** embedder
(the default onnx model would take ~15 ms per chunk to index, minutes at 10k
and hours at 1M on two cores; what it would add is measured apart as
``onnx_ms_per_chunk`` on real-length chunks). Per size: index seconds (embed +
upsert + optimize, chunks/s), resident memory after indexing (corpus objects
freed), on-disk bytes of the data directory, single-query latency p50/p99,
batch-of-64 latency p50/p99, embedded pipeline q/s on cache misses, and the bare
engine's q/s on the same shard and queries (bench/pipeline.py's
``engine_qps``). Progress on stderr; one JSON object on the last line of
stdout; never asserts on time.

    python bench/scale.py [--sizes 10000,30000,100000] [--queries 1000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from corpus import make_corpus, make_queries, query_events
from pipeline import engine_qps, timed_batches
from quick import parse_args

from ragsift.embedded import EmbeddedRuntime
from ragsift.gc_policy import settle as settle_gc
from ragsift.settings import EmbedderSettings, Settings

TENANT = "bench"
BATCH = 64
SINGLES = 200
#: Chunks the onnx model embeds to price indexing with it (its cost per chunk is flat).
ONNX_CHUNKS = 256
_PAGE = os.sysconf("SC_PAGE_SIZE")
_MIB = 1024 * 1024
QUICK_SIZES = "1000,5000"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _rss_mb() -> float:
    """Resident memory now (not the peak): /proc/self/statm's second field."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return round(pages * _PAGE / _MIB, 1)


def _disk_bytes(root: Path) -> tuple[int, int]:
    """(allocated, apparent) bytes: Qdrant Edge preallocates sparse segment files."""
    files = [p.stat() for p in root.rglob("*") if p.is_file()]
    return sum(f.st_blocks * 512 for f in files), sum(f.st_size for f in files)


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 3)


async def one_size(chunks: int, n_queries: int) -> dict[str, Any]:
    """Every figure for one corpus size, in this process."""
    rss_start = _rss_mb()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(data_dir=Path(tmp), embedder=EmbedderSettings(kind="hashing"))
        runtime = EmbeddedRuntime(settings)
        corpus = make_corpus(chunks)
        texts = make_queries(corpus, n_queries + SINGLES)
        t0 = time.perf_counter()
        await runtime.ingest(TENANT, corpus)
        index_s = time.perf_counter() - t0
        del corpus
        gc.collect()
        rss_indexed = _rss_mb()
        vectors = await runtime.embedder.embed(texts)
        events = query_events(texts, vectors, runtime.embedder.embedder_id, "s", TENANT)
        singles_events, timed = events[:SINGLES], events[SINGLES:]
        pipeline = runtime.pipeline
        settle_gc()  # as the worker does after start-up, and bench/pipeline.py
        await pipeline.process(singles_events[:8])  # warm-up
        singles = []
        for event in singles_events[8:]:
            t = time.perf_counter()
            await pipeline.process([event])
            singles.append(time.perf_counter() - t)
        pipeline_qps, batches = await timed_batches(pipeline, timed, BATCH)
        rss_after = _rss_mb()
        await runtime.close()
        disk, apparent = _disk_bytes(Path(tmp))
        engine = engine_qps(
            Path(tmp) / "qdrant" / "default", timed, BATCH, settings.confidence.default_k
        )
    return {
        "chunks": chunks,
        "index_seconds": round(index_s, 2),
        "index_chunks_per_s": round(chunks / index_s, 1),
        "rss_start_mb": rss_start,
        "rss_indexed_mb": rss_indexed,
        "rss_after_queries_mb": rss_after,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "disk_mb": round(disk / _MIB, 1),
        "disk_bytes_per_chunk": round(disk / chunks),
        "disk_apparent_mb": round(apparent / _MIB, 1),
        "single_p50_ms": _ms(singles, 50),
        "single_p99_ms": _ms(singles, 99),
        "batch_p50_ms": _ms(batches, 50),
        "batch_p99_ms": _ms(batches, 99),
        "pipeline_qps": round(pipeline_qps, 1),
        "engine_qps": round(engine, 1),
        "pipeline_over_engine": round(pipeline_qps / engine, 3),
    }


def onnx_ms_per_chunk() -> dict[str, Any]:
    """The onnx embedder's cost per corpus chunk (60 words), batched as indexing does."""
    from ragsift.retrieval.embedders.onnx import OnnxMiniLMEmbedder

    texts = [d.text for d in make_corpus(ONNX_CHUNKS, seed=99)]
    embedder = OnnxMiniLMEmbedder()
    embedder.embed_sync(texts[:BATCH])  # warm-up
    start = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        embedder.embed_sync(texts[i : i + BATCH])
    per_chunk = (time.perf_counter() - start) / len(texts)
    return {
        "embedder_id": embedder.embedder_id,
        "chunks": len(texts),
        "ms_per_chunk": round(per_chunk * 1000, 2),
    }


def _child(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000", help="comma-separated chunks")
    parser.add_argument("--queries", type=int, default=1000, help="batched queries per size")
    parser.add_argument("--child-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-onnx", action="store_true", help=argparse.SUPPRESS)
    args = parse_args(parser, {"sizes": QUICK_SIZES, "queries": 300})
    if args.child_size:
        print(json.dumps(asyncio.run(one_size(args.child_size, args.queries))))
        return
    if args.child_onnx:
        print(json.dumps(onnx_ms_per_chunk()))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for size in sizes:
        _log(f"== {size} chunks")
        rows.append(_child(["--child-size", str(size), "--queries", str(args.queries)]))
        _log(json.dumps(rows[-1]))
    _log("== onnx embedding cost per chunk")
    onnx = _child(["--child-onnx"])
    for row in rows:
        row["onnx_index_estimate_s"] = round(row["chunks"] * onnx["ms_per_chunk"] / 1000, 1)
    print(
        json.dumps(
            {"benchmark": "scale", "embedder": "hashing", "sizes": rows, "onnx_embedding": onnx}
        )
    )


if __name__ == "__main__":
    main()
