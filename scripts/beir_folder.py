"""Write a small BEIR folder (the layout ``ragsift eval --dataset`` reads): the
evaluation scripts that make sets of questions share it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def write_jsonl(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """One JSON object per line."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_folder(
    target: Path,
    corpus: Sequence[tuple[str, str]],
    judged: Sequence[tuple[str, str, str, int]],
    out_of_scope: Sequence[str],
) -> None:
    """``corpus.jsonl`` (id, text; no title), ``queries.jsonl`` and ``qrels/test.tsv``
    (query id, text, judged doc id, score), ``out-of-scope.jsonl`` (``out-N`` ids)."""
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    write_jsonl(target / "corpus.jsonl", [{"_id": d, "title": "", "text": t} for d, t in corpus])
    write_jsonl(target / "queries.jsonl", [{"_id": q, "text": t} for q, t, _, _ in judged])
    (target / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, _, d, s in judged),
        encoding="utf-8",
    )
    write_jsonl(
        target / "out-of-scope.jsonl",
        [{"_id": f"out-{i}", "text": q} for i, q in enumerate(out_of_scope)],
    )
