"""``--vector-cache``: a labelled set's vectors kept between runs, by hash, never the text;
a file that no longer matches its embedder is emptied, and one it cannot use costs
only the time it would have saved."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragsift.cli import app
from ragsift.evaluation.vector_cache import CANARIES, CachedVectors, with_vector_cache
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.embedders.base import FloatMatrix
from tests.unit.evaluation.test_probe_vectors import CountingEmbedder
from tests.unit.evaluation.test_squad_eval import OUTSIDE, TOPICS, write_squad

TEXTS = ["What is the capital of Peru?", "Lima is the capital of Peru.", "x\ud800y", ""]


def embed(cached: CachedVectors, texts: list[str]) -> FloatMatrix:
    return asyncio.run(cached.embed(texts))


def cached(embedder: CountingEmbedder, folder: Path) -> CachedVectors:
    wrapped = with_vector_cache(embedder, folder)
    assert isinstance(wrapped, CachedVectors)
    return wrapped


def test_a_second_run_embeds_only_the_canaries_and_gets_the_same_vectors(tmp_path: Path) -> None:
    first = CountingEmbedder()
    run = cached(first, tmp_path)
    got = embed(run, [*TEXTS, TEXTS[0]])  # a repeat within the batch is embedded once
    want = asyncio.run(HashingEmbedder().embed([*TEXTS, TEXTS[0]]))
    np.testing.assert_array_equal(got, want)
    assert sorted(first.texts) == sorted([*CANARIES, *TEXTS])
    assert (run.hits, run.misses) == (0, len(TEXTS) + 1)  # the repeat was not kept before
    run.close()
    second = CountingEmbedder()
    again = cached(second, tmp_path)
    np.testing.assert_array_equal(embed(again, TEXTS[::-1]), want[: len(TEXTS)][::-1])
    assert second.texts == list(CANARIES)  # checked, then nothing embedded
    assert (again.hits, again.misses) == (len(TEXTS), 0)
    assert with_vector_cache(second, None) is second  # off: the embedder as it is


def test_the_file_holds_hashes_and_vectors_never_the_text(tmp_path: Path) -> None:
    run = cached(CountingEmbedder(), tmp_path)
    embed(run, TEXTS)
    run.close()
    raw = run.path.read_bytes()
    for text in TEXTS[:2]:
        assert text.encode() not in raw
    rows = sqlite3.connect(run.path).execute("SELECT length(key) FROM vectors").fetchall()
    assert rows == [(32,)] * len(TEXTS)


def test_a_file_from_another_model_under_the_same_id_is_emptied(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = cached(CountingEmbedder(), tmp_path)
    embed(run, TEXTS)
    run.close()
    other = CountingEmbedder(shift=0.5)
    moved = cached(other, tmp_path)
    with caplog.at_level(logging.WARNING):
        got = embed(moved, TEXTS)
    assert "no longer matches" in caplog.text
    np.testing.assert_allclose(got, asyncio.run(HashingEmbedder().embed(TEXTS)) + 0.5)
    assert other.texts == [*CANARIES, *sorted(TEXTS, key=lambda t: moved_key(t))]


def moved_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@pytest.mark.parametrize("damage", ["garbage", "not a folder", "wrong rows"])
def test_a_file_it_cannot_use_costs_only_the_embedding(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    folder = tmp_path / "cache"
    run = cached(CountingEmbedder(), folder)
    if damage == "garbage":
        folder.mkdir()
        run.path.write_bytes(b"\x00not sqlite" * 100)
    elif damage == "not a folder":
        folder.write_text("a file where the folder should be")
    else:
        embed(run, TEXTS)
        run.close()
        db = sqlite3.connect(run.path)
        with db:
            db.execute("UPDATE vectors SET v = x'00'")  # a vector of the wrong length
        db.close()
    with caplog.at_level(logging.WARNING):
        got = embed(run, TEXTS)
    np.testing.assert_array_equal(got, asyncio.run(HashingEmbedder().embed(TEXTS)))
    if damage != "wrong rows":
        assert "unusable" in caplog.text


def test_eval_and_calibrate_keep_vectors_with_the_flag_and_say_so(tmp_path: Path) -> None:
    labelled = write_squad(tmp_path / "dev.json", TOPICS, answers=True)
    outside = write_squad(tmp_path / "other.json", OUTSIDE, answers=False)
    data = ["--labelled", str(labelled), "--out-of-scope", str(outside)]
    folder = tmp_path / "vectors"
    runner = CliRunner()
    plain = runner.invoke(app, ["eval", *data, "--json"])
    first = runner.invoke(app, ["eval", *data, "--json", "--vector-cache", str(folder)])
    again = runner.invoke(app, ["eval", *data, "--json", "--vector-cache", str(folder)])
    for result in (plain, first, again):
        assert result.exit_code == 0, result.output
    assert " 0 vectors read from it" in first.stderr
    assert " 0 texts embedded now" in again.stderr
    figures = [json.loads(r.stdout)["scorers"] for r in (plain, first, again)]
    assert figures[0] == figures[1] == figures[2]
    out = ["--out", str(tmp_path / "a.json"), "--vector-cache", str(folder)]
    fit = runner.invoke(app, ["calibrate", *data, "--half", "1", *out])
    assert fit.exit_code == 0, fit.output
    kept = re.search(r"vector cache \S+: (\d+) vectors read", fit.stderr)
    assert kept is not None
    assert int(kept[1]) > 0  # the documents and questions eval embedded
    wrong = runner.invoke(app, ["calibrate", "--collection", "docs", "--vector-cache", "v"])
    assert wrong.exit_code == 2
    assert "not with --collection" in wrong.output


def test_two_runs_share_a_file(tmp_path: Path) -> None:
    one, two = cached(CountingEmbedder(), tmp_path), cached(CountingEmbedder(), tmp_path)
    embed(one, TEXTS[:2])
    embed(two, TEXTS[2:])  # both open at once: SQLite's write-ahead log takes turns
    embed(one, TEXTS[2:])
    assert (one.hits, one.misses) == (2, 2)  # what the other run wrote
    one.close()
    two.close()
    third = CountingEmbedder()
    embed(cached(third, tmp_path), TEXTS)
    assert third.texts == list(CANARIES)
