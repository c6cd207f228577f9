"""The shipped ONNX calibrations hold their risk where a corpus lacks answers and
the traffic is mostly answerable (ADR 043).

ADR 042's refit, fit on questions reworded with synonyms, passed every check of its
day: each was run at SQuAD's own mix, three unanswerable questions to one. Where
traffic was mostly answerable and a quarter of the paragraphs were missing, the
near-miss reading (ADR 021) took the missing paragraphs' questions for answerable
ones, the bar fell to 0.01-0.07 (ADR 030) and the risk was 0.25 against alpha = 0.1,
in every arrival order. This replays that traffic through `ragsift eval` with each
shipped ONNX artifact, as served (the collection's own probes, arrival orders),
and holds the median risk to alpha + 0.03, the target of issue 14.

The first evaluation of each artifact embeds dev half 2's questions, the corpus and
the bundled probes (about 25 s on two cores); the second finds their vectors in a
vector cache that lives in this run's temporary directory, and embeds only its
off-topic questions. Nothing is kept across runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragsift.cli.labelled import SQUAD_DIR
from ragsift.retrieval.engines import packaged_calibration_path

ALPHA = 0.1
#: issue 14's target: risk at the threshold within alpha + 0.03 on every transfer set
TARGET = ALPHA + 0.03
ORDERS = 5
#: the embedder settings of each shipped ONNX artifact, and its embedder id
ARTIFACTS = {
    "onnx": ({"KIND": "onnx", "COMPUTE": "fp32"}, "onnx-all-MiniLM-L6-v2-int8-384"),
    "onnx-int8": ({"KIND": "onnx", "COMPUTE": "int8"}, "onnx-all-MiniLM-L6-v2-int8dyn-384"),
}
#: a quarter of each article's paragraphs left out, their questions counted wrong when
#: answered; answerable questions alone, and with 300 off-topic ones
TRAFFIC = {
    "a quarter left out": ("--max-out-of-scope", "0"),
    "a quarter left out, 300 off-topic": ("--max-out-of-scope", "300"),
}
EVAL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One vector cache (a file per embedder) for this module's evaluations."""
    return tmp_path_factory.mktemp("vectors")


def _served(
    embedder: dict[str, str], embedder_id: str, traffic: tuple[str, ...], vectors: Path
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSIFT_")}
    env.update({f"RAGSIFT_EMBEDDER_{k}": v for k, v in embedder.items()})
    env["RAGSIFT_SQUAD2_DIR"] = str(SQUAD_DIR)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragsift",
            "eval",
            "--artifact",
            str(packaged_calibration_path(embedder_id)),
            "--dataset",
            "squad2",
            "--half",
            "2",
            "--holes",
            "0.25",
            "--near-miss-negatives",
            *traffic,
            "--arrival-orders",
            str(ORDERS),
            "--json",
            "--vector-cache",
            str(vectors),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=EVAL_TIMEOUT_S,
        env=env,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.timeout(EVAL_TIMEOUT_S + 60)
@pytest.mark.parametrize("traffic", sorted(TRAFFIC))
@pytest.mark.parametrize("kind", sorted(ARTIFACTS))
def test_a_corpus_missing_a_quarter_of_its_answers_holds_the_risk(
    kind: str, traffic: str, vectors: Path
) -> None:
    if not (SQUAD_DIR / "dev-v2.0.json").is_file():
        pytest.fail(f"the labelled set is missing: {SQUAD_DIR}", pytrace=False)
    embedder, embedder_id = ARTIFACTS[kind]
    report = _served(embedder, embedder_id, TRAFFIC[traffic], vectors)
    counts = report["counts"]
    assert counts["near_miss"] > 300  # the left-out paragraphs' questions are in it
    version = json.loads(packaged_calibration_path(embedder_id).read_text())["version"]
    assert f"({version}," in report["calibration"]  # the shipped one, probed as served
    assert report["probes"]["applied"]
    orders = report["mix"]["orders"]
    assert orders["orders"] == ORDERS
    risk = orders["risk"]["p50"]
    assert risk <= TARGET, (
        f"{kind}, {traffic}: median risk {risk:.3f} over {ORDERS} arrival orders is past"
        f" alpha + 0.03 = {TARGET:.2f} (bar at the end {report['mix']['bar']})"
    )
    assert orders["answer_rate"]["p50"] > 0.3  # held by answering, not by refusing all
