"""Write the bundled probe bank: questions of SQuAD 2.0's half-1 articles.

    python scripts/make_probe_bank.py ../shared/data/squad2

Half 1 is ``select_half(..., 1)``'s seeded split, so ``ragsift eval --dataset
squad2 --half 2`` never scores a probe. The bank holds every question of
``test-v2.0``'s half-1 articles (ten), and a seeded sample of
:data:`PER_DEV_ARTICLE` questions (answerable or not: as probes, each is a
question about its own article) of each of ``dev-v2.0``'s half-1 articles
(eight): eighteen subjects, so that a collection about some of them, as a
Wikipedia corpus holding the ten ``test-v2.0`` articles is, still keeps enough
probes about the others (docs/confidence.md, "Probes").
"""

from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from ragsift.evaluation.dataset import OUT_OF_SCOPE_GROUP, select_half
from ragsift.evaluation.squad import load_squad

TARGET = Path(__file__).resolve().parent.parent / "ragsift/evaluation/data/probe_questions.jsonl"
#: Questions kept per dev-v2.0 article: the grouped bound counts articles, so more
#: subjects buy more than more questions about each.
PER_DEV_ARTICLE = 100
SEED = 14


def main(squad_dir: Path) -> None:
    half = select_half(load_squad(squad_dir / "dev-v2.0.json", squad_dir / "test-v2.0.json"), 1)
    by_article: dict[tuple[bool, str], list[str]] = defaultdict(list)
    for q in half.queries:
        text = " ".join(q.text.split())
        if text:
            outside = q.kind == "out_of_scope"
            by_article[(outside, q.group.removeprefix(OUT_OF_SCOPE_GROUP))].append(text)
    rng = random.Random(SEED)
    seen: set[str] = set()
    lines = []
    # test-v2.0's articles first, in the data's order (the bank as it was), then the
    # dev-v2.0 samples, article by article.
    outside_first = sorted(by_article, key=lambda key: not key[0])
    for outside, group in outside_first:
        unique = [t for t in dict.fromkeys(by_article[(outside, group)]) if t not in seen]
        if not outside:
            unique = rng.sample(unique, min(PER_DEV_ARTICLE, len(unique)))
        seen.update(unique)
        lines += [json.dumps({"group": group, "text": t}, ensure_ascii=False) for t in unique]
    TARGET.write_text("\n".join(lines) + "\n", encoding="utf-8")
    groups = len({g for _, g in by_article})
    print(f"{len(lines)} probe questions about {groups} articles -> {TARGET}")


if __name__ == "__main__":
    if len(sys.argv) > 2 or any(a.startswith("-") for a in sys.argv[1:]):
        raise SystemExit(__doc__)
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/squad2"))
