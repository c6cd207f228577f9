"""Write the demo handbook with questions asked as its users would ask them, as a BEIR folder.

    python scripts/handbook_questions.py /tmp/handbook
    ragsift eval --dataset /tmp/handbook --out-of-scope /tmp/handbook/out-of-scope.jsonl \
        --artifact A --near-miss-negatives --json

SQuAD's questions were written by people reading the paragraph, so they reuse
its words; a user who has not read the document paraphrases ("How do I get a
refund?" of a text that says "return ... for a full refund"). This set is the
other kind, written by hand for the twelve documents of ``ragsift demo`` and
never fitted on (docs/evaluation.md, "Questions in a user's words"):

* 30 in scope: each answered by one handbook document, in words it mostly
  does not use;
* 10 near misses: on the handbook's subjects, answered by none of it (judged
  0 against the document they are closest to);
* 20 out of scope: general questions (``out-of-scope.jsonl``).

Thirty questions measure a direction, not a rate: quote counts, not decimals.
"""

from __future__ import annotations

import sys
from pathlib import Path

from beir_folder import write_folder

from ragsift.ingest.sample import sample_documents

IN_SCOPE: tuple[tuple[str, str], ...] = (
    ("How do I get a refund?", "returns-and-refunds"),
    ("What is the warranty period?", "warranty"),
    ("How long does shipping take?", "shipping"),
    ("How much does the thermostat cost?", "pricing"),
    ("Can I work from home?", "remote-work"),
    ("What happens if I type my password wrong too many times?", "security"),
    ("When is customer support open?", "support"),
    ("Do I need a C-wire?", "installation"),
    ("How long do you keep my data?", "privacy-and-data-retention"),
    ("How many API calls can I make per minute?", "api-rate-limits"),
    ("How much gas can I save with Orbit?", "energy-savings"),
    ("What is the hotel allowance when travelling?", "travel-expenses"),
    ("Is delivery free?", "shipping"),
    ("Can I cancel my Insights subscription?", "returns-and-refunds"),
    ("Where is my data stored?", "privacy-and-data-retention"),
    ("How fast are refunds paid?", "returns-and-refunds"),
    ("Does the warranty cover water damage?", "warranty"),
    ("How do I make a warranty claim?", "warranty"),
    ("Which countries do you ship to?", "shipping"),
    ("Do you support single sign-on?", "security"),
    ("Can I use 5 GHz Wi-Fi?", "installation"),
    ("How do I delete my data?", "privacy-and-data-retention"),
    ("Is VAT included in the price?", "pricing"),
    ("Can I fly business class?", "travel-expenses"),
    ("What's the minimum password length?", "security"),
    ("Do I get a laptop when working remotely?", "remote-work"),
    ("How long do I have to send the thermostat back?", "returns-and-refunds"),
    ("What happens when I go over the API limit?", "api-rate-limits"),
    ("Is there phone support?", "support"),
    ("How much is express shipping?", "shipping"),
)

NEAR_MISSES: tuple[tuple[str, str], ...] = (
    ("Does Orbit work with heat pumps?", "installation"),
    ("Can I pay with PayPal?", "pricing"),
    ("Is there a student discount?", "pricing"),
    ("Does Orbit work with Alexa?", "installation"),
    ("How do I reset the thermostat to factory settings?", "installation"),
    ("What colours does the Orbit come in?", "pricing"),
    ("How much does the Power Bridge cost on its own?", "pricing"),
    ("Does the thermostat have a battery backup?", "installation"),
    ("How many devices can one account have?", "security"),
    ("Can I get a refund on shipping costs?", "shipping"),
)

OUT_OF_SCOPE: tuple[str, ...] = (
    "Who won the football world cup in 2014?",
    "What is the boiling point of ethanol?",
    "What's the capital of Australia?",
    "How do I bake sourdough bread?",
    "Who wrote Pride and Prejudice?",
    "How fast does light travel?",
    "How tall is Mount Everest?",
    "When did the Berlin Wall fall?",
    "How many players are on a rugby team?",
    "What is the best way to learn Spanish?",
    "How do vaccines work?",
    "How many people live in Tokyo?",
    "Who painted the Mona Lisa?",
    "How do I change a flat tyre?",
    "What is photosynthesis?",
    "How many moons does Jupiter have?",
    "What is a black hole?",
    "Who invented the telephone?",
    "How do I fix a leaking tap?",
    "What should I cook for dinner tonight?",
)


def main(target: Path) -> None:
    docs = {d.doc_id: d for d in sample_documents()}
    for _, doc_id in IN_SCOPE + NEAR_MISSES:
        if doc_id not in docs:
            raise SystemExit(f"{doc_id!r} is not a handbook document")
    asked = [(f"in-{i}", q, d, 1) for i, (q, d) in enumerate(IN_SCOPE)]
    asked += [(f"near-{i}", q, d, 0) for i, (q, d) in enumerate(NEAR_MISSES)]
    write_folder(target, [(d.doc_id, d.text) for d in docs.values()], asked, OUT_OF_SCOPE)
    print(
        f"{target}: {len(docs)} documents, {len(IN_SCOPE)} in scope, "
        f"{len(NEAR_MISSES)} near misses, {len(OUT_OF_SCOPE)} out of scope"
    )


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):  # --help is not a folder
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
