"""Write the synonym table ragsift rewords questions with, from Debian's WordNet 3.0.

    apt-get install wordnet-base         # Debian's package: WordNet's database files
    python scripts/wordnet_synonyms.py [ragsift/evaluation/data/synonyms.tsv.gz]

`ragsift calibrate --reword` (ragsift/evaluation/reword.py, ADR 042) swaps a
question's words for synonyms so that the shipped fit sees questions asked in
other words. It reads this table, not WordNet, so a refit needs nothing installed.
One line per single-word WordNet lemma (letters only), tab-separated:

* the lemma;
* the lemmas of its most frequent sense (most tagged uses; WordNet's first sense
  on a tie) that a synonym may be: letters only, not the word, not sharing its
  first four letters; comma-separated, in WordNet's order;
* the same for its most frequent noun sense, where it has a noun sense and no verb
  sense (a plural's stem: "comes" is a verb's third person and stays).

Deterministic: the same WordNet writes the same bytes (gzip without a timestamp).
``WNSEARCHDIR`` names another WordNet folder. WordNet's licence is kept beside the
table (``WORDNET-LICENSE``).
"""

from __future__ import annotations

import gzip
import os
import re
import sys
from functools import cache
from pathlib import Path

WORDNET = Path(os.environ.get("WNSEARCHDIR", "/usr/share/wordnet"))
WORDNET_POS = ("noun", "verb", "adj", "adv")
TARGET = Path(__file__).resolve().parents[1] / "ragsift/evaluation/data/synonyms.tsv.gz"

Sense = tuple[int, str, int]  # (tagged uses, part of speech, offset in data.POS)


def wordnet_index() -> dict[str, list[Sense]]:
    """lemma -> the (tagged uses, part of speech, offset) of its first sense, per part of speech."""
    if not (WORDNET / "index.noun").is_file():
        raise SystemExit(f"no WordNet at {WORDNET} (apt-get install wordnet-base, or WNSEARCHDIR)")
    index: dict[str, list[Sense]] = {}
    for pos in WORDNET_POS:
        for line in (WORDNET / f"index.{pos}").read_text(encoding="utf-8").splitlines():
            if line.startswith(" "):  # the licence header
                continue
            fields = line.split()
            lemma, synsets, pointers = fields[0], int(fields[2]), int(fields[3])
            tagged = int(fields[5 + pointers])
            first = int(fields[6 + pointers])
            if synsets:
                index.setdefault(lemma, []).append((tagged, pos, first))
    return index


@cache
def synset_lemmas(pos: str, offset: int) -> tuple[str, ...]:
    """The lemmas of one synset, lower-case, in WordNet's order."""
    with (WORDNET / f"data.{pos}").open("rb") as data:
        data.seek(offset)
        fields = data.readline().decode("utf-8").split()
    count = int(fields[3], 16)
    return tuple(re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).lower() for i in range(count))


def candidates(word: str, senses: list[Sense]) -> list[str]:
    """The lemmas of ``word``'s most frequent sense among ``senses`` that may replace it."""
    if not senses:
        return []
    _, pos, offset = max(senses)
    return [
        lemma
        for lemma in synset_lemmas(pos, offset)
        if lemma.isalpha() and lemma != word and lemma[:4] != word[:4]
    ]


def table_lines(index: dict[str, list[Sense]]) -> list[str]:
    """One line per letters-only lemma (see the module's docstring), sorted."""
    lines = []
    for word in sorted(index):
        if not word.isalpha():
            continue
        senses = index[word]
        nouns = [] if any(s[1] == "verb" for s in senses) else [s for s in senses if s[1] == "noun"]
        best, noun = candidates(word, senses), candidates(word, nouns)
        lines.append(f"{word}\t{','.join(best)}\t{','.join(noun)}")
    return lines


def main(target: Path) -> None:
    lines = table_lines(wordnet_index())
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    target.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"{target}: {len(lines)} lemmas, {target.stat().st_size} bytes")


if __name__ == "__main__":
    if len(sys.argv) > 2 or any(a.startswith("-") for a in sys.argv[1:]):
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]) if len(sys.argv) == 2 else TARGET)
