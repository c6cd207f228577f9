"""Output identity: results and evidence of a few thousand mixed queries, to diff across changes.

Runs the embedded pipeline (hashing embedder, a seeded corpus of 2,000
chunks) through the retrieval handler over ``--queries`` mixed queries —
hybrid, dense and keyword modes, threshold/adaptive/top-k selection, several
k, with and without precomputed vectors, repeats (cache hits), greetings
(intent bypass), an unknown collection and an oversized k — and writes every
output as canonical JSON: topic, key and event with its wall-clock fields
(``timestamp``, ``created_at``, ``time``, ``timings_ms``, and a cache hit's
remaining ``ttl_seconds``) removed, so two runs of the same code compare
equal. ``--compare`` says which outputs differ (ids, scores, kept and
dropped hits: everything else is compared).

    python bench/identical.py --write before.json     # on the old code
    python bench/identical.py --compare before.json   # on the new: exit 1 if any differ
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from corpus import make_corpus, make_queries

from ragsift.embedded import EmbeddedRuntime
from ragsift.schemas import QueryEvent
from ragsift.schemas.base import MAX_K
from ragsift.settings import EmbedderSettings, Settings
from ragsift.workers.retrieval import RetrievalHandler

TENANT = "bench"
CHUNKS = 2000
BATCH = 64
SEED = 5
#: Fields that carry the wall clock: they differ between any two runs.
VOLATILE = frozenset({"timestamp", "created_at", "time", "timings_ms", "ttl_seconds"})


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def mixed_events(texts: list[str], vectors: np.ndarray, embedder_id: str) -> list[QueryEvent]:
    """One query per text, its options drawn from a seeded generator; some repeat earlier ones."""
    rng = np.random.default_rng(SEED)
    events = []
    for i, text in enumerate(texts):
        roll = rng.random()
        fields: dict[str, Any] = {"query_id": f"m-{i}", "tenant_id": TENANT, "query": text}
        if roll < 0.03:
            fields["query"] = str(rng.choice(["hello!", "thanks", "who are you?"]))
        elif roll < 0.04:
            fields["collection"] = "nowhere"
        elif roll < 0.05:
            fields["k"] = MAX_K  # the schema allows it; the pipeline limit may not
        elif roll < 0.12 and i > 0:
            fields["query"] = texts[int(rng.integers(i))]  # asked before: a cache hit
        fields["mode"] = str(rng.choice(["hybrid", "hybrid", "dense", "keyword"]))
        fields["selection"] = str(rng.choice(["threshold", "adaptive", "top_k"]))
        if rng.random() < 0.5:
            fields["k"] = fields.get("k", int(rng.choice([3, 5, 10, 20])))
        if rng.random() < 0.5 and fields["query"] == text:
            fields["vector"] = vectors[i].tolist()
            fields["embedder_id"] = embedder_id
        events.append(QueryEvent(**fields))
    return events


async def outputs(n_queries: int) -> list[Any]:
    """Every output of the mixed queries, in order, as stable JSON values."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(data_dir=Path(tmp), embedder=EmbedderSettings(kind="hashing"))
        runtime = EmbeddedRuntime(settings)
        corpus = make_corpus(CHUNKS)
        await runtime.ingest(TENANT, corpus)
        texts = make_queries(corpus, n_queries, seed=SEED)
        vectors = await runtime.embedder.embed(texts)
        events = mixed_events(texts, vectors, runtime.embedder.embedder_id)
        handler = RetrievalHandler(runtime.pipeline)
        out: list[Any] = []
        for i in range(0, len(events), BATCH):
            for event, outcome in zip(
                events[i : i + BATCH],
                await handler.handle_batch(events[i : i + BATCH]),
                strict=True,
            ):
                if isinstance(outcome, Exception):
                    out.append({"query_id": event.query_id, "error": type(outcome).__name__})
                    continue
                out.append(
                    [
                        {
                            "topic": e.topic,
                            "key": e.key,
                            "event": _stable(e.event.model_dump(mode="json")),
                        }
                        for e in outcome
                    ]
                )
        await runtime.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=3000)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the outputs here")
    group.add_argument("--compare", type=Path, help="compare with outputs written earlier")
    args = parser.parse_args()
    now = asyncio.run(outputs(args.queries))
    if args.write:
        args.write.write_text(json.dumps(now, sort_keys=True, indent=1) + "\n")
        _log(f"wrote {len(now)} outputs to {args.write}")
        print(json.dumps({"benchmark": "identical", "outputs": len(now)}))
        return
    before = _stable(json.loads(args.compare.read_text()))
    differ = [i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b]
    errors = sum(1 for o in now if isinstance(o, dict))
    summary = {
        "benchmark": "identical",
        "outputs": len(now),
        "outputs_before": len(before),
        "errors_among_them": errors,
        "differing": len(differ),
        "first_differing": differ[:10],
        "identical": not differ and len(before) == len(now),
    }
    print(json.dumps(summary))
    sys.exit(0 if summary["identical"] else 1)


if __name__ == "__main__":
    main()
