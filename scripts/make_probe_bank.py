"""Write the bundled probe bank: the questions of SQuAD 2.0 test-v2.0's half-1 articles.

    python scripts/make_probe_bank.py ../shared/data/squad2

Half 1 is ``select_half(..., 1)``'s seeded split of the out-of-scope articles,
so ``ragsift eval --dataset squad2 --half 2`` never scores a probe as an
out-of-scope question (docs/confidence.md, "Probes").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ragsift.evaluation.dataset import OUT_OF_SCOPE_GROUP, load_squad, select_half

TARGET = Path(__file__).resolve().parent.parent / "ragsift/evaluation/data/probe_questions.jsonl"


def main(squad_dir: Path) -> None:
    half = select_half(load_squad(squad_dir / "dev-v2.0.json", squad_dir / "test-v2.0.json"), 1)
    seen: set[str] = set()
    lines = []
    for q in half.queries:
        text = " ".join(q.text.split())
        if q.kind == "out_of_scope" and text and text not in seen:
            seen.add(text)
            group = q.group.removeprefix(OUT_OF_SCOPE_GROUP)
            lines.append(json.dumps({"group": group, "text": text}, ensure_ascii=False))
    TARGET.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} probe questions -> {TARGET}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/squad2"))
