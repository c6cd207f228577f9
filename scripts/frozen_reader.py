"""Can the shipped MiniLM read, untrained? A trained head on its joint (question, passage) pass.

    python scripts/frozen_reader.py ../shared/data/squad2 [--per-half 3000]

A reader tells "this passage answers the question" from "this passage is on the
question's subject". SQuAD 2.0 pairs each question with the paragraph it was
written on: answerable ones (in scope) and ``is_impossible`` ones (near
misses) share a paragraph, so the pair alone decides. This script runs the
shipped all-MiniLM-L6-v2 (ragsift's ONNX embedder, no training) once on each
pair as one input, ``[CLS] question [SEP] paragraph [SEP]``, so every layer's
attention mixes the two, and fits logistic heads on what comes out, on the
half-1 articles (``split_groups``' seeded split, as ``ragsift eval --half``);
it prints the AUROC on half-2 articles, beside the bi-encoder cosine of the
question and its paragraph. Results are in docs/confidence.md ("Reader
signals"). Takes ~5 min on two cores.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from ragsift.evaluation.dataset import split_groups
from ragsift.evaluation.squad import unanswerable
from ragsift.retrieval.embedders.onnx import OnnxMiniLMEmbedder

SEP = 102  # [SEP] in the model's vocabulary
BATCH = 8
Matrix = npt.NDArray[np.float32]


def pairs(path: Path) -> list[tuple[bool, str, str, int]]:
    """(half 1?, question, its paragraph, answerable) for every question of the file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    first = split_groups([a["title"] for a in data], 0.5, 0)
    return [
        (a["title"] in first, qa["question"], p["context"], int(_answerable(qa)))
        for a in data
        for p in a["paragraphs"]
        for qa in p["qas"]
    ]


def _answerable(qa: dict[str, Any]) -> bool:
    """As ``load_squad`` reads it: not ``is_impossible`` and with an answer."""
    return not unanswerable(qa, f"question {qa.get('id')}")


def joint_features(model: OnnxMiniLMEmbedder, rows: list[tuple[str, str]]) -> dict[str, Matrix]:
    """Per pair: [CLS], mean question and mean passage token states, and token MaxSim stats."""
    tokenizer: Any = model._tokenizer
    session: Any = model._session
    out: dict[str, list[Any]] = {"cls": [], "q": [], "p": [], "maxsim": []}
    for start in range(0, len(rows), BATCH):
        encodings = tokenizer.encode_batch(rows[start : start + BATCH])
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), np.int64)
        mask, types = np.zeros_like(ids), np.zeros_like(ids)
        for k, e in enumerate(encodings):
            ids[k, : len(e.ids)], mask[k, : len(e.ids)] = e.ids, 1
            types[k, : len(e.ids)] = e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        (hidden,) = session.run(["last_hidden_state"], feeds)
        for k, e in enumerate(encodings):
            n = len(e.ids)
            kind, token = np.asarray(e.type_ids), np.asarray(e.ids)
            question = (kind == 0) & (token != SEP) & (np.arange(n) > 0)
            passage = (kind == 1) & (token != SEP)
            states = hidden[k, :n]
            q, p = states[question], states[passage]
            q_unit = q / np.linalg.norm(q, axis=1, keepdims=True)
            p_unit = p / np.linalg.norm(p, axis=1, keepdims=True)
            best = (q_unit @ p_unit.T).max(axis=1)  # each question token's closest passage token
            out["cls"].append(states[0])
            out["q"].append(q.mean(axis=0))
            out["p"].append(p.mean(axis=0))
            out["maxsim"].append([best.mean(), best.min(), np.percentile(best, 25)])
        print(f"  {min(start + BATCH, len(rows))}/{len(rows)} pairs", flush=True)
    return {name: np.asarray(rows_, dtype=np.float32) for name, rows_ in out.items()}


def head_auroc(
    x: Matrix, y: npt.NDArray[np.int64], train: npt.NDArray[np.bool_]
) -> dict[str, float]:
    """A logistic head fit on ``train``: its AUROC on the other pairs and on its own."""
    scale = StandardScaler().fit(x[train])
    model = LogisticRegression(C=0.1, max_iter=3000).fit(scale.transform(x[train]), y[train])
    p = model.predict_proba(scale.transform(x))[:, 1]
    return {
        "test": round(float(roc_auc_score(y[~train], p[~train])), 3),
        "fit": round(float(roc_auc_score(y[train], p[train])), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad_dir", type=Path)
    parser.add_argument("--per-half", type=int, default=3000, help="pairs per half at most")
    args = parser.parse_args()
    rows = pairs(args.squad_dir / "dev-v2.0.json")
    order = np.random.default_rng(1).permutation(len(rows))
    chosen = [i for i in order if rows[i][0]][: args.per_half]
    chosen += [i for i in order if not rows[i][0]][: args.per_half]
    y = np.array([rows[i][3] for i in chosen])
    train = np.array([rows[i][0] for i in chosen])
    model = OnnxMiniLMEmbedder()
    print(f"{train.sum()} pairs to fit on (half 1), {(~train).sum()} to test on (half 2)")
    cosine = np.einsum(
        "ij,ij->i",
        model.embed_sync([rows[i][1] for i in chosen]),
        model.embed_sync([rows[i][2] for i in chosen]),
    )
    f = joint_features(model, [(rows[i][1], rows[i][2]) for i in chosen])
    both = np.hstack([f["cls"], f["q"], f["p"], f["q"] * f["p"]])
    report: dict[str, Any] = {
        "pairs_fit": int(train.sum()),
        "pairs_tested": int((~train).sum()),
        "answerable_share_tested": round(float(y[~train].mean()), 3),
        "bi_encoder_cosine": round(float(roc_auc_score(y[~train], cosine[~train])), 3),
        "token_maxsim_mean": round(float(roc_auc_score(y[~train], f["maxsim"][~train, 0])), 3),
        "token_maxsim_min": round(float(roc_auc_score(y[~train], f["maxsim"][~train, 1])), 3),
        "head_on_cls": head_auroc(f["cls"], y, train),
        "head_on_cls_q_p_qp": head_auroc(both, y, train),
        "head_on_maxsim": head_auroc(f["maxsim"], y, train),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
