"""Embedded pipeline throughput: queries/s and latency on 10,000 chunks.

By default query events carry precomputed vectors (embedding is the caller's cost), so
this measures cache look-up, hybrid search on Qdrant Edge, the confidence
engine and result building. Batches of 64 mirror the streaming worker's
``stream.take``. Every query is distinct, so the timed pass never hits the
cache; the same queries again under new ids are all cache hits
(``cache_hit_speedup``). Single-query latency is measured too. Then the bare
engine's part of that work runs on the same shard and queries, so
``pipeline_engine_ratio`` is the pipeline's throughput relative to the
engine's. Progress on stderr; one JSON object on the last line of stdout;
never asserts on time.

The embedder is pinned to ``hashing`` unless ``--embedder`` says otherwise
(not the default onnx: the corpus is made-up words, and indexing 10,000 chunks
with the model takes minutes on two cores). ``--embed-in-path`` sends the
timed queries without vectors, so the pipeline embeds them: with
``--embedder onnx`` that is the default configuration's queries/s with the
real model in the path (``make bench`` runs it on a smaller corpus).

    python bench/pipeline.py [--chunks 10000] [--queries 2000] [--batch 64]
                             [--embedder hashing|onnx] [--embed-in-path] [--profile]
                             [--cache memory|redis]

``--cache redis`` keeps results in Redis (``RAGSIFT_REDIS_URL``, under a fresh key
prefix), as the streaming workers do, instead of the embedded runtime's memory:
its round trips are then in every figure, cache hits most of all.

``--profile`` runs the timed batches under cProfile and adds ``profile``: the
pipeline's time per stage (``PIPELINE_STAGES``), the engine's native calls
apart. Its queries/s are then the profiler's, not quotable. With
``RAGSIFT_BENCH_PSTATS=FILE`` the raw profile is also written there, for
``python -m pstats FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import numpy as np
import qdrant_edge as qe
from corpus import make_corpus, make_queries, query_events
from quick import parse_args
from stages import cumulative

from ragsift.embedded import EmbeddedRuntime
from ragsift.gc_policy import settle as settle_gc
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.index import RRF_K, PointKey, RawPoint, rrf_fuse
from ragsift.retrieval.pipeline import RetrievalPipeline, prefetch_limit
from ragsift.retrieval.redis_cache import RedisCache
from ragsift.schemas import QueryEvent
from ragsift.settings import EmbedderSettings, Settings
from ragsift.wiring import build_pipeline

TENANT = "bench"
EmbedderKind = Literal["hashing", "onnx"]
_PIPELINE = "ragsift/retrieval/pipeline.py"
#: stage → functions whose cumulative time is the stage's; none calls another.
PIPELINE_STAGES: dict[str, list[tuple[str, str]]] = {
    "contradiction check (D7)": [("ragsift/retrieval/contradictions.py", "mark")],
    "result building": [("ragsift/retrieval/results.py", "scored_result")],
    "confidence engine (hit scores, assess)": [(_PIPELINE, "_assess_isolated")],
    "finish (drift, evidence, metrics)": [(_PIPELINE, "_finish")],
    "cache (keys, look-up, store)": [
        ("ragsift/retrieval/pipeline_cache.py", "lookup"),
        ("ragsift/retrieval/pipeline_cache.py", "store"),
    ],
    "reader (term coverage, ADR 020)": [("ragsift/retrieval/reader.py", "score")],
}
#: The engine's own (native) calls: what the bare engine also does.
ENGINE_CALLS = ("<method 'query_batch' of 'builtins.EdgeShard' objects>",
                "<method 'retrieve' of 'builtins.EdgeShard' objects>")  # fmt: skip


def stage_table(profile: pstats.Stats) -> dict[str, float]:
    """Fraction of the pipeline's time (``process``) per stage, engine calls apart."""
    stats: dict[Any, Any] = profile.stats  # type: ignore[attr-defined]
    total = cumulative(stats, (_PIPELINE, "process"))
    engine = sum(row[2] for (_, _, func), row in stats.items() if func in ENGINE_CALLS)
    # The binding hands point ids over as uuid.UUID objects, built in Python.
    ids = sum(
        row[2]
        for (path, _, func), row in stats.items()
        if path.endswith("/uuid.py") and func == "__init__"
    )
    seconds = {s: sum(cumulative(stats, w) for w in where) for s, where in PIPELINE_STAGES.items()}
    scored = sum(seconds[s] for s in list(seconds)[:3])
    seconds = {
        "Qdrant Edge (query_batch, retrieve: native)": engine,
        "point ids as UUID objects (the bare engine's too)": ids,
        "search around the engine (plans, fusion, hits)": cumulative(
            stats, (_PIPELINE, "_search_collection")
        )
        - engine
        - ids,
        **seconds,
        "score, other (policies, mix)": cumulative(stats, (_PIPELINE, "_score")) - scored,
    }
    seconds["pipeline, other (admission, bypass, single flight)"] = total - sum(seconds.values())
    return {s: round(v / total, 3) for s, v in sorted(seconds.items(), key=lambda kv: -kv[1])}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 3)


def engine_qps(shard_dir: Path, events: list[QueryEvent], batch: int, limit: int) -> float:
    """The bare engine's share of the pipeline's work, on the same shard and queries.

    Per batch: one ``query_batch`` of the dense and BM25 channels of every query
    (tenant filter, the pipeline's prefetch), RRF of each query's channels, and
    one ``retrieve`` of the winners' payloads: what ``bench/engine.py`` calls
    hybrid batch, so pipeline/engine is the pipeline's overhead on this data.
    """
    shard = qe.EdgeShard.load(str(shard_dir))
    bm25 = Bm25Encoder()
    flt = qe.Filter(must=[qe.FieldCondition(key="tenant_id", match=qe.MatchValue(TENANT))])
    prefetch = prefetch_limit(limit)
    requests = []
    for e in events:
        sparse = bm25.encode_query(e.query)
        assert e.vector is not None
        assert not sparse.is_empty
        requests.append(
            (
                qe.QueryRequest(
                    limit=prefetch,
                    query=qe.Query.Nearest(e.vector, using="dense"),
                    filter=flt,
                    with_payload=False,
                ),
                qe.QueryRequest(
                    limit=prefetch,
                    query=qe.Query.Nearest(
                        qe.SparseVector(list(sparse.indices), list(sparse.values)), using="bm25"
                    ),
                    filter=flt,
                    with_payload=False,
                ),
            )
        )
    start = time.perf_counter()
    for i in range(0, len(requests), batch):
        pairs = requests[i : i + batch]
        answers = shard.query_batch(qe.QueryBatchRequest([r for pair in pairs for r in pair]))
        winners: list[PointKey] = []
        for j in range(len(pairs)):
            channels = [
                [RawPoint(p.id.int, p.score) for p in a] for a in answers[2 * j : 2 * j + 2]
            ]
            winners.extend(pid for pid, _ in rrf_fuse(channels, k=RRF_K)[:limit])
        shard.retrieve([uuid.UUID(int=int(k)) for k in dict.fromkeys(winners)], True, False)
    qps = len(requests) / (time.perf_counter() - start)
    shard.close()
    return qps


async def timed_batches(
    pipeline: RetrievalPipeline,
    events: list[QueryEvent],
    batch: int,
    profiler: cProfile.Profile | None = None,
) -> tuple[float, list[float]]:
    """Queries/s over ``events`` in batches of ``batch``, and each batch's seconds."""
    batch_times: list[float] = []
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    for i in range(0, len(events), batch):
        t = time.perf_counter()
        await pipeline.process(events[i : i + batch])
        batch_times.append(time.perf_counter() - t)
    qps = len(events) / (time.perf_counter() - start)
    if profiler is not None:
        profiler.disable()
    return qps, batch_times


async def run(
    chunks: int,
    n_queries: int,
    batch: int,
    embedder: EmbedderKind,
    embed_in_path: bool,
    profile: bool = False,
    cache: Literal["memory", "redis"] = "memory",
) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(data_dir=Path(tmp), embedder=EmbedderSettings(kind=embedder))
        runtime = EmbeddedRuntime(settings)
        corpus = make_corpus(chunks)
        _log(f"indexing {chunks} chunks…")
        t0 = time.perf_counter()
        await runtime.ingest(TENANT, corpus)
        index_s = time.perf_counter() - t0
        texts = make_queries(corpus, n_queries + 200)
        vectors = await runtime.embedder.embed(texts)
        embedder_id = runtime.embedder.embedder_id
        events = query_events(texts, vectors, embedder_id, "b", TENANT)
        if embed_in_path:
            # Text only: the pipeline embeds each batch, as it does for a client's query.
            events = [e.model_copy(update={"vector": None, "embedder_id": None}) for e in events]
        warm, timed = events[:200], events[200:]
        # The corpus and the events are the bench's, not the pipeline's: freeze them out
        # of the collector, and set its thresholds, as the worker does after start-up,
        # so that collections scan what the pipeline allocates, not 10,000 fixture
        # documents, as often as in a worker.
        settle_gc()
        pipeline = runtime.pipeline
        redis: RedisCache | None = None
        if cache == "redis":
            prefix = f"bench-{uuid.uuid4().hex[:8]}"
            keyed = settings.model_copy(
                update={"redis": settings.redis.model_copy(update={"key_prefix": prefix})}
            )
            redis = RedisCache(keyed.redis)
            pipeline = build_pipeline(
                keyed,
                index=runtime.index,
                embedder=runtime.embedder,
                metrics=Metrics(),
                cache=redis,
                source="/bench/pipeline",
            )
        await pipeline.process(warm[:64])
        _log(f"batched: {len(timed)} queries in batches of {batch}…")
        profiler = cProfile.Profile() if profile else None
        batched_qps, batch_times = await timed_batches(pipeline, timed, batch, profiler)
        _log("the same queries again: cache hits…")
        repeats = [e.model_copy(update={"query_id": f"again-{e.query_id}"}) for e in timed]
        start = time.perf_counter()
        for i in range(0, len(repeats), batch):
            await pipeline.process(repeats[i : i + batch])
        hit_qps = len(repeats) / (time.perf_counter() - start)
        _log("single queries…")
        singles: list[float] = []
        for event in warm[64:]:
            t = time.perf_counter()
            await pipeline.process([event])
            singles.append(time.perf_counter() - t)
        if redis is not None:
            async for key in redis.client.scan_iter(match=f"{redis.prefix}:*", count=1000):
                await redis.client.delete(key)  # the bench's entries, not left for a day
            await redis.close()
        await runtime.close()
        _log("bare engine on the same shard and queries…")
        # The engine always gets the vectors: its figure never includes embedding.
        engine = engine_qps(
            Path(tmp) / "qdrant" / "default",
            [
                e.model_copy(update={"vector": v.tolist(), "embedder_id": embedder_id})
                for e, v in zip(timed, vectors[200:], strict=True)
            ],
            batch,
            runtime.settings.confidence.default_k,
        )
    if profiler is not None and os.environ.get("RAGSIFT_BENCH_PSTATS"):
        profiler.dump_stats(os.environ["RAGSIFT_BENCH_PSTATS"])
    extra = {"profile": stage_table(pstats.Stats(profiler))} if profiler is not None else {}
    return {
        "benchmark": "pipeline",
        "chunks": chunks,
        "queries": len(timed),
        "batch": batch,
        "embedder": embedder_id,
        "embed_in_path": embed_in_path,
        "cache": cache,
        "index_seconds": round(index_s, 2),
        "queries_per_s": round(batched_qps, 1),
        "batch_p50_ms": _ms(batch_times, 50),
        "batch_p99_ms": _ms(batch_times, 99),
        "cache_hit_queries_per_s": round(hit_qps, 1),
        "cache_hit_speedup": round(hit_qps / batched_qps, 2),
        "single_queries_per_s": round(len(singles) / sum(singles), 1),
        "single_p50_ms": _ms(singles, 50),
        "single_p99_ms": _ms(singles, 99),
        "engine_queries_per_s": round(engine, 1),
        "pipeline_engine_ratio": round(batched_qps / engine, 3),
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--embedder", choices=["hashing", "onnx"], default="hashing")
    parser.add_argument(
        "--embed-in-path", action="store_true", help="Queries carry text only: time embedding."
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the timed batches: time per stage"
    )
    parser.add_argument(
        "--cache",
        choices=["memory", "redis"],
        default="memory",
        help="Where results are cached: the embedded runtime's memory, or Redis as a worker.",
    )
    args = parse_args(parser, {"chunks": 2000, "queries": 300})
    figures = run(
        args.chunks,
        args.queries,
        args.batch,
        args.embedder,
        args.embed_in_path,
        args.profile,
        args.cache,
    )
    print(json.dumps(asyncio.run(figures)))


if __name__ == "__main__":
    main()
