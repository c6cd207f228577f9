"""The bundled probe bank's vectors are embedded once per embedder and kept; nothing
else is kept, and a kept file that no longer matches its embedder is dropped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragsift.evaluation import probe_vectors
from ragsift.evaluation.probe_vectors import BankVectors, with_bank_vectors
from ragsift.evaluation.probes import bundled_probes
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.embedders.base import FloatMatrix

BANK = [p.text for p in bundled_probes()][:60]
USER = "How do I reset my router's admin password?"


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it was asked to embed."""

    def __init__(self, *, shift: float = 0.0) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.shift = shift

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.texts.extend(texts)
        vectors = await super().embed(texts)
        return vectors + np.float32(self.shift)  # a "new model" under the same id


def _embed(embedder: BankVectors, texts: list[str]) -> FloatMatrix:
    return asyncio.run(embedder.embed(texts))


def test_bank_texts_are_embedded_once_and_the_vectors_are_the_embedders(tmp_path: Path) -> None:
    first = CountingEmbedder()
    vectors = _embed(BankVectors(first, tmp_path), [*BANK, USER])
    assert first.texts == sorted({*BANK, USER})  # one call, each text once
    expected = asyncio.run(HashingEmbedder().embed([*BANK, USER]))
    np.testing.assert_array_equal(vectors, expected)

    # Another process (no memory of this one) reads the file: only a check of a
    # few rows and the user's text reach the embedder.
    probe_vectors._KEPT.clear()  # as a fresh process starts
    later = CountingEmbedder()
    again = BankVectors(later, tmp_path)
    np.testing.assert_array_equal(_embed(again, [USER, *BANK]), expected[[-1, *range(60)]])
    assert USER in later.texts
    assert len(later.texts) <= probe_vectors.CHECKED_ROWS + 1


def test_a_users_text_is_never_written_down(tmp_path: Path) -> None:
    _embed(BankVectors(CountingEmbedder(), tmp_path), [USER, BANK[0]])
    (kept,) = tmp_path.iterdir()
    with np.load(kept) as data:
        assert list(data["texts"]) == [BANK[0]]
    assert USER.encode() not in kept.read_bytes()


def test_a_kept_file_from_another_model_under_the_same_id_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _embed(BankVectors(CountingEmbedder(), tmp_path), BANK)
    probe_vectors._KEPT.clear()
    moved = CountingEmbedder(shift=0.01)
    with caplog.at_level(logging.WARNING):
        vectors = _embed(BankVectors(moved, tmp_path), BANK)
    assert "no longer match" in caplog.text
    np.testing.assert_array_equal(vectors, asyncio.run(moved.embed(BANK)))


@pytest.mark.parametrize("damage", [b"", b"not an npz file", b"PK\x03\x04broken"])
def test_an_unreadable_kept_file_costs_only_the_embedding(
    tmp_path: Path, damage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = CountingEmbedder()
    path = BankVectors(embedder, tmp_path).path
    assert path is not None
    path.write_bytes(damage)
    with caplog.at_level(logging.WARNING):
        vectors = _embed(BankVectors(embedder, tmp_path), BANK[:5])
    assert "unreadable" in caplog.text
    np.testing.assert_array_equal(vectors, asyncio.run(HashingEmbedder().embed(BANK[:5])))
    with np.load(path) as data:  # and it is written again, whole
        assert sorted(data["texts"]) == sorted(BANK[:5])


def test_a_folder_it_cannot_write_leaves_the_vectors_in_this_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder would be")
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING):
        first = _embed(BankVectors(embedder, blocked / "vectors"), BANK[:3])
    assert "cannot keep probe vectors" in caplog.text
    calls = len(embedder.texts)
    np.testing.assert_array_equal(
        _embed(BankVectors(embedder, blocked / "vectors"), BANK[:3]), first
    )
    assert len(embedder.texts) == calls  # kept in memory all the same


@pytest.mark.parametrize("setting", ["", "off", " off "])
def test_the_setting_off_keeps_nothing_on_disk(
    setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR", setting)
    wrapped = with_bank_vectors(HashingEmbedder())
    assert isinstance(wrapped, BankVectors)
    assert wrapped.path is None
    monkeypatch.setenv("RAGSIFT_CALIBRATION_PROBE_VECTORS_DIR", str(tmp_path / "v"))
    kept = with_bank_vectors(HashingEmbedder())
    assert isinstance(kept, BankVectors)
    assert kept.path is not None
    assert kept.path.parent == tmp_path / "v"
    assert with_bank_vectors(kept) is kept  # never wrapped twice


def test_an_empty_batch_is_an_empty_matrix(tmp_path: Path) -> None:
    assert _embed(BankVectors(HashingEmbedder(), tmp_path), []).shape[0] == 0


def test_keep_embeds_a_runs_bank_texts_in_one_call_and_writes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = CountingEmbedder()
    bank = BankVectors(embedder, tmp_path)
    writes: list[int] = []
    save = bank._save
    monkeypatch.setattr(bank, "_save", lambda kept: (writes.append(len(kept)), save(kept)))
    asyncio.run(bank.keep([USER, *BANK]))
    assert embedder.texts == sorted(BANK)  # the user's text is not embedded ahead
    for start in range(0, len(BANK), 7):  # then the run's batches: nothing new
        _embed(bank, [*BANK[start : start + 7], USER])
    assert writes == [len(BANK)]
    assert embedder.texts.count(USER) == len(range(0, len(BANK), 7))


@pytest.mark.parametrize("name", ["n" * 5_000, "ünïcödé-探针-\u202e"])
def test_a_hostile_folder_name_costs_only_the_embedding(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING):
        vectors = _embed(BankVectors(embedder, tmp_path / name), BANK[:4])
    np.testing.assert_array_equal(vectors, asyncio.run(HashingEmbedder().embed(BANK[:4])))


def test_wrappers_made_before_the_file_was_read_share_what_one_of_them_read(
    tmp_path: Path,
) -> None:
    _embed(BankVectors(CountingEmbedder(), tmp_path), BANK)
    probe_vectors._KEPT.clear()  # a fresh process, with two wrappers made up front
    inner = CountingEmbedder()
    first, second = BankVectors(inner, tmp_path), BankVectors(inner, tmp_path)
    _embed(first, BANK)
    checked = len(inner.texts)
    assert checked == probe_vectors.CHECKED_ROWS  # the file was read and checked once
    _embed(second, BANK)
    assert len(inner.texts) == checked  # the second neither re-read nor re-checked it
