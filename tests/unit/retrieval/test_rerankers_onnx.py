"""OnnxCrossEncoder on a tiny ONNX graph built here with a cross-encoder's inputs and outputs.

The graph's "logit" is 0.01 x (sum of the unmasked token ids) + (number of unmasked
second-segment tokens): a number the test can compute from the tokenizer, which
changes if padding leaks in, segments are wrong or pairs get out of order.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ragsift.errors import ConfigurationError
from ragsift.retrieval.rerank import OnnxCrossEncoder, RerankerResponseError
from ragsift.retrieval.rerank.wordpiece import WordPieceTokenizer

onnx = pytest.importorskip("onnx")  # skipped only where the package is absent
pytest.importorskip("onnxruntime")
helper, TensorProto = onnx.helper, onnx.TensorProto

# [PAD] is not id 0, so padding that is not masked out changes the sums.
VOCAB = ["[UNK]", "[CLS]", "[SEP]", "the", "[PAD]", "refund", "##s", "are", "paid", "by"]
VOCAB += ["bank", "transfer", "how", "?", ".", "shipping", "takes", "days", "cafe", "退", "款"]
IDS_WEIGHT = 0.01
QUERY = "How are refunds paid?"
TEXTS = ["Refunds are paid by bank transfer.", "Shipping takes days.", "the"]


def graph(
    path: Path, *, token_types: bool = True, classes: int = 1, input_ids: str = "input_ids"
) -> None:
    """Write a model.onnx computing the documented logit, shaped (batch, ``classes``)."""
    names = [input_ids, "attention_mask"] + (["token_type_ids"] if token_types else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["B", "T"]) for n in names]
    nodes = [
        helper.make_node("Cast", [input_ids], ["ids"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["ids", "mask"], ["kept"]),
        helper.make_node("ReduceSum", ["kept", "axis"], ["idsum"], keepdims=1),
        helper.make_node("Mul", ["idsum", "weight"], ["score"]),
    ]
    if token_types:
        nodes += [
            helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["types", "mask"], ["second"]),
            helper.make_node("ReduceSum", ["second", "axis"], ["count"], keepdims=1),
            helper.make_node("Add", ["score", "count"], ["logit"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["score"], ["logit"]))
    if classes == 1:
        nodes.append(helper.make_node("Identity", ["logit"], ["logits"]))
    else:
        # Two-class head: [0, logit] (log-odds of class 1 = logit); more classes: padding.
        nodes.append(helper.make_node("Mul", ["logit", "zero"], ["nothing"]))
        nodes.append(
            helper.make_node("Concat", ["nothing"] * (classes - 1) + ["logit"], ["logits"], axis=1)
        )
    initializers = [
        helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
        helper.make_tensor("weight", TensorProto.FLOAT, [], [IDS_WEIGHT]),
        helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
    ]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", classes])
    model = helper.make_model(
        helper.make_graph(nodes, "cross-encoder", inputs, [output], initializers),
        opset_imports=[helper.make_opsetid("", 13)],
    )
    model.ir_version = 8  # old enough for any onnxruntime this code supports
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def folder(tmp_path: Path, *, model: str = "model.onnx", **kw: Any) -> Path:
    out = tmp_path / "cross-encoder"
    (out / Path(model).parent).mkdir(parents=True, exist_ok=True)
    graph(out / model, **kw)
    (out / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return out


def expected(query: str, text: str, max_length: int = 512, types: bool = True) -> float:
    tok = WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)})
    pair = tok.encode_pair(query, text, max_length)
    return IDS_WEIGHT * sum(pair.input_ids) + (sum(pair.token_type_ids) if types else 0)


async def test_scores_are_the_graphs_logits_in_text_order(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path))
    scores = await reranker.rerank(QUERY, TEXTS)
    assert scores == pytest.approx([expected(QUERY, t) for t in TEXTS], rel=1e-6)
    assert reranker.reranker_id == "onnx:cross-encoder"
    # Padding is masked: a short text scores the same alone as next to a long one.
    alone = await reranker.rerank(QUERY, [TEXTS[2]])
    assert alone == pytest.approx([scores[2]], rel=1e-6)
    await reranker.close()


async def test_batched_across_queries_and_session_runs(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path), batch_size=2)
    other = "shipping days?"
    many = await reranker.rerank_many([(QUERY, TEXTS), (other, TEXTS[:2]), (other, [])])
    # Two runs of TEXTS sorted by length (longest last): each logit back in its text's place.
    assert many[0] == pytest.approx([expected(QUERY, t) for t in TEXTS], rel=1e-6)
    assert many[0] == pytest.approx(await reranker.rerank(QUERY, TEXTS), rel=1e-6)
    assert many[1] == pytest.approx([expected(other, t) for t in TEXTS[:2]], rel=1e-6)
    assert many[2] == []


async def test_graph_without_token_type_ids(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path, token_types=False))
    scores = await reranker.rerank(QUERY, TEXTS)
    assert scores == pytest.approx([expected(QUERY, t, types=False) for t in TEXTS], rel=1e-6)


async def test_two_class_head_reads_the_log_odds_of_relevant(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path, classes=2, model="onnx/model.onnx"))
    scores = await reranker.rerank(QUERY, TEXTS)
    assert scores == pytest.approx([expected(QUERY, t) for t in TEXTS], rel=1e-6)


async def test_other_output_shapes_are_a_clear_error(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path, classes=3))
    with pytest.raises(RerankerResponseError, match=r"must be \(3,\), \(3, 1\) or \(3, 2\)"):
        await reranker.rerank(QUERY, TEXTS)


async def test_long_and_hostile_text_is_truncated_to_max_length(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(folder(tmp_path), max_length=16)
    hostile = "refunds " * 50_000 + "\u0000\u202e 退款 " + "a" * 200
    [score] = await reranker.rerank(QUERY + " \u0007", [hostile])
    assert score == pytest.approx(expected(QUERY, hostile, max_length=16), rel=1e-6)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("no-folder", "does not exist"),
        ("no-model", "no model.onnx"),
        ("no-tokenizer", "no tokenizer"),
        ("bad-graph", "cannot load"),
        ("wrong-inputs", "lacks the cross-encoder inputs"),
        ("bad-config", "unreadable"),
    ],
)
def test_bad_folders_are_configuration_errors(tmp_path: Path, setup: str, message: str) -> None:
    path = tmp_path / "cross-encoder"
    if setup != "no-folder":
        kw = {"input_ids": "ids_in"} if setup == "wrong-inputs" else {}
        path = folder(tmp_path, **kw)
    if setup == "no-model":
        (path / "model.onnx").unlink()
    if setup == "no-tokenizer":
        (path / "vocab.txt").unlink()
    if setup == "bad-graph":
        (path / "model.onnx").write_bytes(b"\x00not a graph" * 10)
    if setup == "bad-config":
        (path / "tokenizer_config.json").write_text("[[[", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=message):
        OnnxCrossEncoder(path)


def test_missing_onnxruntime_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = folder(tmp_path)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    with pytest.raises(ConfigurationError, match="pip install onnxruntime"):
        OnnxCrossEncoder(path)


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"max_length": 4}, "max_length"), ({"batch_size": 0}, "batch_size")]
)
def test_bad_arguments_are_named(tmp_path: Path, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OnnxCrossEncoder(tmp_path, **kwargs)


# -- the WordPiece tokenizer ------------------------------------------------------------------


def tokenizer(lowercase: bool = True) -> WordPieceTokenizer:
    return WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)}, lowercase=lowercase)


def test_wordpiece_splits_words_punctuation_and_cjk() -> None:
    tok = tokenizer()
    ids = tok.tokenize("How are REFUNDS paid? 退款")
    assert [VOCAB[i] for i in ids] == ["how", "are", "refund", "##s", "paid", "?", "退", "款"]


def test_wordpiece_lowercases_and_strips_accents_unless_cased() -> None:
    assert [VOCAB[i] for i in tokenizer().tokenize("CAFÉ")] == ["cafe"]
    assert [VOCAB[i] for i in tokenizer(lowercase=False).tokenize("CAFÉ")] == ["[UNK]"]


def test_wordpiece_unknowns_controls_and_overlong_words() -> None:
    tok = tokenizer()
    assert [VOCAB[i] for i in tok.tokenize("refundz")] == ["[UNK]"]  # one unknown piece
    assert [VOCAB[i] for i in tok.tokenize("paid\u0000\u200b\u202e by")] == ["paid", "by"]
    assert tok.tokenize("refund" * 30) == [tok.unk_id]  # 180 characters: one [UNK]
    assert tok.tokenize("") == []


def test_pairs_keep_the_query_and_fit_max_length() -> None:
    tok = tokenizer()
    pair = tok.encode_pair("how are refunds paid", "the " * 1000, 12)
    assert len(pair.input_ids) == len(pair.token_type_ids) == 12
    first = pair.token_type_ids.index(1)
    assert [VOCAB[i] for i in pair.input_ids[:first]] == [
        "[CLS]",
        "how",
        "are",
        "refund",
        "##s",
        "paid",
        "[SEP]",
    ][:first]
    assert pair.input_ids[-1] == tok.sep_id
    long_query = tok.encode_pair("the " * 1000, "paid by bank", 12)
    assert len(long_query.input_ids) == 12
    assert sum(long_query.token_type_ids) >= 4  # the passage keeps at least half the budget


def test_vocabulary_without_specials_is_refused() -> None:
    with pytest.raises(ValueError, match=r"special tokens \['\[PAD\]'\]"):
        WordPieceTokenizer({"[CLS]": 0, "[SEP]": 1, "[UNK]": 2})
