"""Write SQuAD 2.0 as a BEIR folder, to check that both readers of `ragsift eval` agree.

    python scripts/squad_to_beir.py ../shared/data/squad2 /tmp/beir --half 2
    ragsift eval --dataset /tmp/beir --out-of-scope /tmp/beir/out-of-scope.jsonl \
        --artifact ARTIFACT --json

Beside ``ragsift eval --dataset squad2 --half 2 --artifact ARTIFACT`` (docs/evaluation.md,
"The same set as a BEIR folder"). The folder gets:

* ``corpus.jsonl``: every paragraph of ``dev-v2.0.json`` (``_id`` = title and
  paragraph index, as ``load_squad`` names it; ``title`` with spaces);
* ``queries.jsonl`` and ``qrels/test.tsv``: every question, judged 1 against
  its paragraph when answerable, else 0 (BEIR's reader calls those near misses);
* ``out-of-scope.jsonl``: ``test-v2.0.json``'s questions, in ``queries.jsonl`` form.

``--half 1|2`` keeps the articles of that half of each file only
(``split_groups``' seeded split, the one ``--half`` uses), since a BEIR
folder's corpus is not split by ``ragsift eval --half``.

``--holes F`` makes a corpus that covers its subjects in part, as a user's
often does: a seeded share F of each article's paragraphs is left out of the
corpus (never the last one), and the answerable questions written on them
become near misses, judged 0 against a paragraph of their article that is
kept: on topic, with the answer nowhere in the corpus. SQuAD's own
unanswerable questions are left out then, so every near miss is a hole.
``ragsift eval --holes F`` and ``ragsift calibrate --holes F`` make the same
holes in the SQuAD files themselves (``ragsift.evaluation.dataset.with_holes``).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ragsift.evaluation.dataset import left_out, split_groups
from ragsift.evaluation.squad import unanswerable


def _articles(path: Path, half: int | None) -> Iterator[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    first = split_groups([str(a.get("title", "untitled")) for a in data], 0.5, 0)
    for article in data:
        if half is None or (str(article.get("title", "untitled")) in first) == (half == 1):
            yield article


def _line(out: TextIO, row: dict[str, str]) -> None:
    out.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--half", type=int, choices=(1, 2), help="keep this half's articles")
    parser.add_argument(
        "--holes", type=float, default=0.0, help="share of each article's paragraphs to leave out"
    )
    args = parser.parse_args()
    if not 0.0 <= args.holes < 1.0:
        parser.error("--holes must be in [0, 1)")
    rng = random.Random(0)
    (args.out / "qrels").mkdir(parents=True, exist_ok=True)
    counts = {"documents": 0, "queries": 0, "holes": 0, "out_of_scope": 0}
    with (
        (args.out / "corpus.jsonl").open("w", encoding="utf-8") as corpus,
        (args.out / "queries.jsonl").open("w", encoding="utf-8") as queries,
        (args.out / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels,
    ):
        qrels.write("query-id\tcorpus-id\tscore\n")
        for article in _articles(args.squad_dir / "dev-v2.0.json", args.half):
            title = str(article.get("title", "untitled"))
            paragraphs = list(enumerate(article.get("paragraphs", [])))
            dropped = left_out(len(paragraphs), args.holes, rng)
            kept_id = f"{title}-{len(paragraphs) - 1}"
            for i, paragraph in paragraphs:
                doc_id = f"{title}-{i}"
                if i not in dropped:
                    text = str(paragraph.get("context", ""))
                    _line(corpus, {"_id": doc_id, "title": title.replace("_", " "), "text": text})
                    counts["documents"] += 1
                for qa in paragraph.get("qas", []):
                    answerable = not unanswerable(qa, f"question {qa.get('id')}")
                    if args.holes and not answerable:
                        continue
                    judged = (kept_id, 0) if i in dropped else (doc_id, int(answerable))
                    _line(queries, {"_id": str(qa["id"]), "text": str(qa["question"])})
                    qrels.write(f"{qa['id']}\t{judged[0]}\t{judged[1]}\n")
                    counts["holes" if i in dropped else "queries"] += 1
    with (args.out / "out-of-scope.jsonl").open("w", encoding="utf-8") as outside:
        for article in _articles(args.squad_dir / "test-v2.0.json", args.half):
            for paragraph in article.get("paragraphs", []):
                for qa in paragraph.get("qas", []):
                    _line(outside, {"_id": f"o-{qa['id']}", "text": str(qa["question"])})
                    counts["out_of_scope"] += 1
    print(json.dumps({"folder": str(args.out), **counts}))


if __name__ == "__main__":
    main()
