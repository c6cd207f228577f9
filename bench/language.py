"""The query-language guess on English questions: how many it flags, and its cost.

Reads every question of SQuAD 2.0 (``dev-v2.0.json``, and ``test-v2.0.json`` when it
is beside it) and ragsift's bundled out-of-domain questions, counts those
:func:`ragsift.retrieval.language.guess_language` calls non-English (each is a
false flag: all are English), names the first few, and times the guess per query
(the median of ``--repeats`` passes over the SQuAD questions). Prints lines, then
one JSON object on the last line. Never asserts on time.

    python bench/language.py [--squad /work/shared/data/squad2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from ragsift.retrieval.language import guess_language

OUT_OF_DOMAIN = Path("ragsift/evaluation/data/out_of_domain_questions.txt")


def _squad(folder: Path) -> dict[str, list[str]]:
    sets = {}
    for name in ("dev-v2.0.json", "test-v2.0.json"):
        path = folder / name
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))["data"]
            sets[name] = [qa["question"] for a in data for p in a["paragraphs"] for qa in p["qas"]]
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=Path, default=Path("/work/shared/data/squad2"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sets = _squad(args.squad)
    lines = OUT_OF_DOMAIN.read_text(encoding="utf-8").splitlines()
    sets["out_of_domain_questions.txt"] = [q for q in lines if q.strip()]
    report: dict[str, object] = {}
    for name, questions in sets.items():
        flagged = [(q, code) for q in questions if (code := guess_language(q)) is not None]
        report[name] = {"questions": len(questions), "flagged": len(flagged)}
        print(f"{name}: {len(flagged)} of {len(questions)} English questions flagged")
        for question, code in flagged[:10]:
            print(f"  {code}: {question}")
    timed = [q for name, qs in sets.items() if name.endswith(".json") for q in qs] or lines
    passes = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        for question in timed:
            guess_language(question)
        passes.append((time.perf_counter() - started) / len(timed) * 1e6)
    report["us_per_query"] = round(statistics.median(passes), 2)
    print(f"{report['us_per_query']} us per query (median of {args.repeats} passes)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
