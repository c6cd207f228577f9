"""Write the word table ragsift guesses a text's language from (ragsift/retrieval/language.py).

    python scripts/language_words.py STOPWORDS_DIR [ragsift/retrieval/data/language_words.tsv]

STOPWORDS_DIR is NLTK's ``corpora/stopwords`` folder (the Snowball project's lists,
as PostgreSQL ships them; NLTK's English list adds contractions). One line per
(language, word), tab-separated: the ISO 639-1 code, the word, and its weight:

* English (``en``): every word of the English list, weight 1;
* fr, es, de, it, pt, nl: the language's list, without the words English's list
  holds ("in", "was", "a": they say nothing), without single ASCII letters (French
  "l", "c", "j" are initials in English text; the elided forms below count instead), plus
  the question words the Snowball lists lack (``EXTRA``); weight 0.5 where the word
  is also an English word or abbreviation (a WordNet lemma: "son", "era", "die",
  "mit", "la"), 1 otherwise, so two such words alone never make a text foreign.
* French and Italian elisions (``l'``, ``qu'``, ``dell'``), weight 1.

Deterministic: sorted, so the same lists write the same bytes.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

LISTS = {
    "en": "english",
    "fr": "french",
    "es": "spanish",
    "de": "german",
    "it": "italian",
    "pt": "portuguese",
    "nl": "dutch",
}
# Question words and a few common function words the Snowball lists leave out
# (ragsift's own, same licence as ragsift): questions are what ragsift reads.
EXTRA = {
    "fr": "combien comment pourquoi quand quel quelle quels quelles où quoi dont cette"
    " peut faut puis",
    "es": "cuánto cuánta cuántos cuántas cómo dónde cuándo cuál cuáles porqué puedo hay",
    "de": "warum wann wieso weshalb woher wohin wieviel wie viele lange gibt kann",
    "it": "quanto quanta quanti quante perché quando qual quale quali cosa posso",
    "pt": "quanto quanta quantos quantas onde quando porque qual quais posso",
    "nl": "waarom wanneer waar hoeveel welke welk lang kunt",
}
ELISIONS = {
    "fr": "c' d' j' l' m' n' qu' s' t' jusqu' lorsqu' puisqu'",
    "it": "c' l' un' dell' all' dall' nell' sull' quell' quest'",
}
WORDNET = Path("ragsift/evaluation/data/synonyms.tsv.gz")
OUT = Path("ragsift/retrieval/data/language_words.tsv")


def main(source: Path, out: Path) -> None:
    with gzip.open(WORDNET, "rt", encoding="utf-8") as handle:
        english_words = {line.split("\t", 1)[0].lower() for line in handle}
    english = set((source / LISTS["en"]).read_text(encoding="utf-8").split())
    rows = {("en", word, "1") for word in english}
    for code, name in LISTS.items():
        if code == "en":
            continue
        words = set((source / name).read_text(encoding="utf-8").split())
        words |= set(EXTRA[code].split())
        for word in words - english:
            if len(word) < 2 and word.isascii():  # "l", "e"; "à" and "é" stay
                continue
            rows.add((code, word, "0.5" if word in english_words else "1"))
        rows |= {(code, elided, "1") for elided in ELISIONS.get(code, "").split()}
    lines = ["\t".join(row) for row in sorted(rows)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{out}: {len(lines)} words")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) == 3 else OUT)
