"""The int8-compute MiniLM (RAGSIFT_EMBEDDER_COMPUTE=int8): in ragsift, its own id (ADR 019)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from ragsift.confidence import load_calibration
from ragsift.retrieval.embedders.onnx import (
    INT8_MODEL_SHA256,
    MODEL_SHA256,
    ModelIntegrityError,
    OnnxMiniLMEmbedder,
    find_packaged_onnx_minilm,
    packaged_int8_model,
)
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.settings import EmbedderSettings
from ragsift.wiring import build_embedder
from tests.factories import load_script

pytestmark = pytest.mark.unit

TEXTS = [
    "How do I reset my password after it expired?",
    "x",
    "",
    "The warranty covers manufacturing defects for two years from the date of purchase, "
    "provided the device was used as described in the manual and was not opened.",
    "Refunds are paid to the original card within fourteen days.",
    "Temperature data is kept for 30 days and then deleted. " * 4,
    "Qu'est-ce que la garantie couvre ? 保修期是多久？",
]


@pytest.fixture(scope="module")
def pair() -> tuple[OnnxMiniLMEmbedder, OnnxMiniLMEmbedder]:
    """The float and the int8 embedder, loaded once for the module."""
    return OnnxMiniLMEmbedder(threads=1), OnnxMiniLMEmbedder(compute="int8", threads=1)


def test_loads_the_model_ragsift_ships_with_its_own_id(
    pair: tuple[OnnxMiniLMEmbedder, OnnxMiniLMEmbedder],
) -> None:
    fp32, int8 = pair
    assert int8.embedder_id == "onnx-all-MiniLM-L6-v2-int8dyn-384"
    assert fp32.embedder_id == "onnx-all-MiniLM-L6-v2-int8-384"
    assert int8.model_path == packaged_int8_model()
    assert int8.dim == 384
    digest = hashlib.sha256(packaged_int8_model().read_bytes()).hexdigest()
    assert digest == INT8_MODEL_SHA256


def test_vectors_are_close_to_the_float_ones_but_not_the_same(
    pair: tuple[OnnxMiniLMEmbedder, OnnxMiniLMEmbedder],
) -> None:
    fp32, int8 = pair
    a, b = fp32.embed_sync(TEXTS), int8.embed_sync(TEXTS)
    assert b.dtype == np.float32
    assert b.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1)
    # The same model with its products rounded to int8 (the empty text and "x" are furthest).
    assert cosines.min() > 0.98, cosines
    assert np.median(cosines) > 0.995, cosines
    assert np.abs(a - b).max() > 1e-3  # ... and not the float model under another name
    np.testing.assert_array_equal(int8.embed_sync(TEXTS), b)  # deterministic


def test_a_texts_vector_does_not_depend_on_its_batch(
    pair: tuple[OnnxMiniLMEmbedder, OnnxMiniLMEmbedder],
) -> None:
    """Activations are quantized per row: one scale per batch would tie a query's
    vector to whatever traffic shared its batch (it did, by up to 0.03)."""
    _, int8 = pair
    batched = int8.embed_sync(TEXTS)
    for i, text in enumerate(TEXTS):
        np.testing.assert_array_equal(int8.embed_sync([text])[0], batched[i])
    reordered = int8.embed_sync([TEXTS[5], TEXTS[0], TEXTS[5] * 3])
    np.testing.assert_array_equal(reordered[1], batched[0])


def test_ranks_texts_as_the_float_model_does(
    pair: tuple[OnnxMiniLMEmbedder, OnnxMiniLMEmbedder],
) -> None:
    queries = ["how long is the warranty", "when do refunds arrive", "how long is data kept"]
    passages = TEXTS[3:6]
    for model in pair:
        scores = model.embed_sync(queries) @ model.embed_sync(passages).T
        assert list(scores.argmax(axis=1)) == [0, 1, 2], model.compute


def test_refuses_the_float_model_under_the_int8_setting(tmp_path: Path) -> None:
    source = find_packaged_onnx_minilm()
    assert source is not None
    copy = tmp_path / "model.onnx"
    shutil.copyfile(source, copy)
    with pytest.raises(ModelIntegrityError) as caught:
        OnnxMiniLMEmbedder(copy, compute="int8")
    assert caught.value.expected == INT8_MODEL_SHA256
    assert caught.value.actual == MODEL_SHA256
    assert "model-int8-dynamic.onnx" in str(caught.value)


def test_refuses_a_truncated_copy_of_the_int8_model(tmp_path: Path) -> None:
    copy = tmp_path / "model-int8-dynamic.onnx"
    copy.write_bytes(packaged_int8_model().read_bytes()[:1000])
    with pytest.raises(ModelIntegrityError, match="expected sha256 " + INT8_MODEL_SHA256):
        OnnxMiniLMEmbedder(copy, compute="int8")


@pytest.mark.parametrize("value", ["INT8", "int4", "", "fp16", "int8\n", "fp32;int8", "x" * 10_000])
def test_refuses_other_compute_values(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_COMPUTE", value)
    with pytest.raises(ValidationError, match="compute"):
        EmbedderSettings()
    with pytest.raises(ValueError, match="compute must be"):
        OnnxMiniLMEmbedder(compute=value)  # type: ignore[arg-type]


def test_the_setting_picks_the_int8_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_EMBEDDER_KIND", "onnx")
    monkeypatch.setenv("RAGSIFT_EMBEDDER_COMPUTE", "int8")
    embedder: Any = build_embedder(EmbedderSettings())
    assert embedder.embedder_id == "onnx-all-MiniLM-L6-v2-int8dyn-384"


def test_a_calibration_ships_for_the_int8_embedder() -> None:
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8dyn-384")
    assert path is not None
    artifact = load_calibration(path)
    assert artifact.embedder_id == "onnx-all-MiniLM-L6-v2-int8dyn-384"
    assert artifact.conformal is not None
    assert 0.0 < artifact.conformal.threshold < 1.0


def test_the_reader_signals_have_an_int8_calibration_too() -> None:
    """RAGSIFT_CONFIDENCE_READER_SIGNALS=on with int8 reads, as with the float model."""
    path = packaged_calibration_path("onnx-all-MiniLM-L6-v2-int8dyn-384", reader=True)
    assert path is not None
    assert path.name == "onnx-all-MiniLM-L6-v2-int8dyn-384+reader.json"
    artifact = load_calibration(path)
    assert artifact.embedder_id == "onnx-all-MiniLM-L6-v2-int8dyn-384"
    assert {"sentence_match", "term_coverage"} <= set(artifact.features)


def test_the_script_writes_the_shipped_bytes(tmp_path: Path) -> None:
    """scripts/quantize_minilm.py reproduces the shipped model (same onnxruntime)."""
    module = load_script("quantize_minilm")
    source = find_packaged_onnx_minilm()
    assert source is not None
    assert module.quantize(source, tmp_path / "out.onnx") == INT8_MODEL_SHA256
