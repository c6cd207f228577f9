"""How often the D7 contradiction check fires where it should not: SQuAD 2.0 dev.

The SQuAD paragraphs are one encyclopedia's consistent articles, so a flag on
an answerable question is almost always a false alarm (two paragraphs giving
different durations or amounts for different things). Runs the embedded
pipeline with the default settings (the ONNX embedder unless
``RAGSIFT_EMBEDDER_KIND`` says otherwise) over the 646 dev paragraphs and
every in-scope (and, for reference, near-miss) question, and prints the flag
rates, examples, then one JSON object on the last line. Never asserts.

    python bench/contradictions.py [--data /work/shared/data/squad2] [--limit N]
                                   [--results FILE]

``--results FILE`` keeps the pipeline's results: the first run writes them, a
later run re-checks the saved kept hits with the current detector (which is
all the check reads), without re-indexing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from ragsift.embedded import EmbeddedRuntime
from ragsift.evaluation.dataset import EvalQuery, LabelledSet, load_squad
from ragsift.retrieval.contradictions import ContradictionDetector
from ragsift.schemas import QueryEvent, RetrievalResult
from ragsift.settings import Settings

TENANT = "bench"
BATCH = 64


async def retrieve(
    settings: Settings, dataset: LabelledSet, queries: list[EvalQuery]
) -> list[RetrievalResult]:
    """Every query's result from the embedded pipeline over a fresh index of the corpus."""
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedRuntime(settings.model_copy(update={"data_dir": Path(tmp)})) as rt:
            await rt.ingest(TENANT, dataset.documents)
            results: list[RetrievalResult] = []
            for start in range(0, len(queries), BATCH):
                events = [
                    QueryEvent(query_id=q.query_id, tenant_id=TENANT, query=q.text)
                    for q in queries[start : start + BATCH]
                ]
                results.extend(r for r in await rt.ask(events) if isinstance(r, RetrievalResult))
    return results


def measure(data: Path, limit: int | None, saved: Path | None) -> dict[str, Any]:
    dataset = load_squad(data / "dev-v2.0.json")
    queries = [q for q in dataset.queries if q.kind in ("in_scope", "near_miss")][:limit]
    settings = Settings.from_env()
    if saved is not None and saved.exists():
        results = [RetrievalResult.model_validate_json(line) for line in saved.open()]
        detector = ContradictionDetector.from_settings(settings.contradictions)
        results = [detector.mark(r.model_copy(update={"contradiction": None})) for r in results]
    else:
        results = asyncio.run(retrieve(settings, dataset, queries))
        if saved is not None:
            saved.write_text("".join(r.model_dump_json() + "\n" for r in results))
    if len(results) != len(queries):
        raise SystemExit(f"{len(results)} results for {len(queries)} queries: rerun without them")
    out: dict[str, Any] = {
        "embedder": settings.embedder.kind,
        "contradictions": settings.contradictions.model_dump(),
    }
    examples = []
    for kind in ("in_scope", "near_miss"):
        mine = [r for q, r in zip(queries, results, strict=True) if q.kind == kind]
        flagged = [r for r in mine if r.contradiction is not None]
        multi_doc = [r for r in mine if len({h.doc_id for h in r.hits}) > 1]
        out[kind] = {
            "queries": len(mine),
            "with_hits_from_two_documents": len(multi_doc),
            "flagged": len(flagged),
            "rate": round(len(flagged) / len(mine), 4) if mine else None,
            "by_kind": {
                k: sum(1 for r in flagged if r.contradiction and r.contradiction.kind == k)
                for k in ("value", "negation")
            },
        }
        examples += [
            {"query": r.query, **r.contradiction.model_dump()} for r in flagged if r.contradiction
        ]
    out["examples"] = examples
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/squad2"))
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--results", type=Path, default=None, help="results to keep / re-check")
    args = parser.parse_args()
    out = measure(args.data, args.limit, args.results)
    for example in out["examples"]:
        print(json.dumps(example, ensure_ascii=False))
    for kind in ("in_scope", "near_miss"):
        print(f"{kind}: {out[kind]}")
    print(json.dumps({k: v for k, v in out.items() if k != "examples"}))


if __name__ == "__main__":
    main()
