"""Reranking cost: per-query overhead of reranking 20 candidates on a local TEI-speaking server.

A minimal server speaking TEI's ``POST /rerank`` runs in a child process and
scores by word overlap, so the figures are what ragsift adds around a reranker
(HTTP round trip, JSON both ways, the wider search, reordering, the reranked
engine), not a model's inference time, which depends on the model and the GPU.
The same queries run through the embedded pipeline with the reranker off and
on: single queries (p50/p99) and batches of 64; ``overhead_ms_per_query`` is
the difference. Those two runs use the weighted scorer, the one that reranks a
window of ``--candidates`` hits; ``order_kept`` is the same pair with the
calibrated scorer (the default), where the reranker only orders each query's
kept hits (ADR 048). The bare client's latency for one query's 20 texts is
measured too. ``model`` is a model's cost on this machine's CPU: the
cross-encoder ``ragsift[reranker]`` installs (``docs/reranking.md``) in the
same pipeline with the calibrated scorer, ordering the kept hits of
``--model-queries`` queries at 256 tokens a pair (``--model-queries 0`` leaves it
out; without the extra it says so). Progress on stderr; one JSON object on the
last line of stdout; never asserts on time.

    python bench/rerank.py [--chunks 2000] [--queries 500] [--candidates 20]
                           [--model-queries 128]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from aiohttp import web
from corpus import make_corpus, make_queries, query_events
from quick import parse_args

from ragsift.embedded import EmbeddedRuntime
from ragsift.errors import ConfigurationError
from ragsift.gc_policy import settle as settle_gc
from ragsift.retrieval.rerank import HttpReranker
from ragsift.retrieval.rerank.packaged import PACKAGED_RERANKER_ID, packaged_model_dir
from ragsift.settings import EmbedderSettings, RerankerSettings, Settings

TENANT = "bench"
BATCH = 64  # the streaming worker's stream.take batch


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 3)


async def _tei(request: web.Request) -> web.Response:
    body: dict[str, Any] = await request.json()
    words = set(body["query"].split())
    scores = [len(words & set(t.split())) - 1.5 for t in body["texts"]]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return web.json_response([{"index": i, "score": scores[i]} for i in order])


def _serve(sock: socket.socket) -> None:
    app = web.Application()
    app.router.add_post("/rerank", _tei)
    web.run_app(app, sock=sock, print=None, handle_signals=True)


async def _ready(url: str) -> None:
    probe = HttpReranker("tei", url, max_retries=0, deadline=1.0)
    try:
        for _ in range(100):
            try:
                await probe.rerank("probe", ["probe"])
                return
            except Exception:  # not listening yet
                await asyncio.sleep(0.05)
        raise RuntimeError(f"the TEI stub at {url} did not start")
    finally:
        await probe.close()


async def _pipeline(
    tmp: Path,
    corpus: Any,
    texts: list[str],
    reranker: RerankerSettings,
    tag: str,
    singles: int = 200,
    scorer: Literal["weighted", "calibrated"] = "weighted",
) -> dict[str, float]:
    # Hashing, not the default onnx: this measures ragsift's cost around a reranker, and
    # indexing 2,000 made-up-word chunks twice with the model would take minutes.
    hashing = EmbedderSettings(kind="hashing")
    settings = Settings.from_env(data_dir=tmp / tag, reranker=reranker, embedder=hashing)
    confidence = settings.confidence.model_copy(update={"scorer": scorer})
    settings = settings.model_copy(update={"confidence": confidence})
    runtime = EmbeddedRuntime(settings)
    await runtime.ingest(TENANT, corpus)
    vectors = await runtime.embedder.embed(texts)
    events = query_events(texts, vectors, runtime.embedder.embedder_id, tag, TENANT)
    warm, singles_in = events[:BATCH], events[BATCH : BATCH + singles]
    timed = events[BATCH + singles :]
    settle_gc()
    pipeline = runtime.pipeline
    await pipeline.process(warm)
    single_times: list[float] = []
    for event in singles_in:
        t = time.perf_counter()
        await pipeline.process([event])
        single_times.append(time.perf_counter() - t)
    start = time.perf_counter()
    for i in range(0, len(timed), BATCH):
        outputs = await pipeline.process(timed[i : i + BATCH])
        assert all(not isinstance(o, Exception) for o in outputs)
    batched = (time.perf_counter() - start) / len(timed)
    registry = runtime.metrics.registry
    failures = registry.get_sample_value(
        "ragsift_reranker_failures_total", {"reason": "unavailable"}
    )
    stages = {
        stage: round(
            1000
            * (
                registry.get_sample_value("ragsift_stage_duration_seconds_sum", {"stage": stage})
                or 0
            )
            / (
                registry.get_sample_value("ragsift_stage_duration_seconds_count", {"stage": stage})
                or 1
            ),
            3,
        )
        for stage in ("search", "rerank", "score")
    }
    await runtime.close()
    gc.unfreeze()
    return {
        "single_p50_ms": _ms(single_times, 50),
        "single_p99_ms": _ms(single_times, 99),
        "batched_ms_per_query": round(batched * 1000, 3),
        "batched_queries_per_s": round(1 / batched, 1),
        "reranker_failures": failures or 0.0,
        "stage_ms_per_call": stages,
    }


MODEL_SINGLES = 32  # a model's single queries take a second each at 20 candidates
MODEL_MAX_LENGTH = 256


async def _model(tmp: Path, corpus: Any, texts: list[str], n_queries: int) -> dict[str, object]:
    """The packaged cross-encoder in the pipeline (calibrated scorer), or why it was not run."""
    if n_queries <= 0:
        return {"skipped": "--model-queries 0"}
    try:
        packaged_model_dir()
    except ConfigurationError as exc:
        return {"skipped": str(exc)}
    settings = RerankerSettings(kind="onnx", max_length=MODEL_MAX_LENGTH)
    wanted = texts[: BATCH + MODEL_SINGLES + n_queries]
    _log("pipeline with the packaged cross-encoder ordering the kept hits…")
    figures = await _pipeline(
        tmp, corpus, wanted, settings, "model", singles=MODEL_SINGLES, scorer="calibrated"
    )
    return {
        "reranker_id": PACKAGED_RERANKER_ID,
        "queries": n_queries,
        "reranks": "the kept hits (ADR 048)",
        "max_length": MODEL_MAX_LENGTH,
        **figures,
    }


async def run(
    chunks: int, n_queries: int, candidates: int, model_queries: int
) -> dict[str, object]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(sock,), daemon=True)
    server.start()
    try:
        await _ready(url)
        corpus = make_corpus(chunks)
        asked = max(n_queries + 200, model_queries + MODEL_SINGLES) + BATCH
        texts = make_queries(corpus, asked)
        client = HttpReranker("tei", url)
        passages = [d.text[:1000] for d in corpus[:candidates]]
        calls: list[float] = []
        for text in texts[:200]:
            t = time.perf_counter()
            await client.rerank(text, passages)
            calls.append(time.perf_counter() - t)
        await client.close()
        with tempfile.TemporaryDirectory() as tmp:
            model = await _model(Path(tmp), corpus, texts, model_queries)
            texts = texts[: n_queries + BATCH + 200]
            _log(f"pipeline without reranker: {chunks} chunks, {n_queries} queries…")
            off = await _pipeline(Path(tmp), corpus, texts, RerankerSettings(), "off")
            _log(f"pipeline with a TEI reranker over {candidates} candidates…")
            on_settings = RerankerSettings(kind="tei", url=url, candidates=candidates)
            on = await _pipeline(Path(tmp), corpus, texts, on_settings, "on")
            _log("the same two, calibrated: the reranker orders the kept hits…")
            kept_off = await _pipeline(
                Path(tmp), corpus, texts, RerankerSettings(), "kept-off", scorer="calibrated"
            )
            kept_on = await _pipeline(
                Path(tmp), corpus, texts, on_settings, "kept-on", scorer="calibrated"
            )
    finally:
        server.terminate()
        server.join(5)
    return {
        "benchmark": "rerank",
        "chunks": chunks,
        "queries": n_queries,
        "candidates": candidates,
        "client_p50_ms": _ms(calls, 50),
        "client_p99_ms": _ms(calls, 99),
        "off": off,
        "on": on,
        "single_overhead_p50_ms": round(on["single_p50_ms"] - off["single_p50_ms"], 3),
        "overhead_ms_per_query": round(on["batched_ms_per_query"] - off["batched_ms_per_query"], 3),
        "order_kept": {
            "off": kept_off,
            "on": kept_on,
            "single_overhead_p50_ms": round(
                kept_on["single_p50_ms"] - kept_off["single_p50_ms"], 3
            ),
            "overhead_ms_per_query": round(
                kept_on["batched_ms_per_query"] - kept_off["batched_ms_per_query"], 3
            ),
        },
        "model": model,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--model-queries", type=int, default=128)
    args = parse_args(parser, {"chunks": 300, "queries": 100, "model_queries": 32})
    figures = run(args.chunks, args.queries, args.candidates, args.model_queries)
    print(json.dumps(asyncio.run(figures)))


if __name__ == "__main__":
    main()
