"""The ONNX frontend: models exported by torch.onnx (both exporters) run on the
simulated IPU equal to onnxruntime; unsupported operators, dynamic shapes and
bad files are clear errors; tilefx-opt imports .onnx files."""

import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from models import MLP, PoolNormCNN, Transformer, TutorialCNN
from onnx import helper

from tilefx import popart
from tilefx.errors import Error
from tilefx.lowering.from_onnx import OnnxModule, import_onnx


def export(model, x, dynamo: bool) -> bytes:
    model.eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, (x,), f, dynamo=dynamo)
        finally:
            logging.disable(logging.NOTSET)
    return f.getvalue()


def run_session(proto: bytes, x: np.ndarray, bps: int = 1):
    """Inference of the graph's output on the simulated IPU, batchesPerStep `bps`."""
    model = onnx.load_model_from_string(proto)
    out, inp = model.graph.output[0].name, model.graph.input[0].name
    s = popart.InferenceSession(proto, popart.DataFlow(bps, {out: popart.AnchorReturnType("ALL")}),
                                popart.DeviceManager().createIpuModelDevice({"numIPUs": 1}))
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({inp: x}, anchors))
    return anchors[out], ort.InferenceSession(proto), inp


CASES = [
    ("mlp", lambda: MLP(), lambda: torch.randn(4, 12), False),
    ("mlp", lambda: MLP(), lambda: torch.randn(4, 12), True),
    ("cnn", lambda: TutorialCNN(), lambda: torch.randn(2, 1, 28, 28), False),
    ("poolnorm", lambda: PoolNormCNN(), lambda: torch.randn(2, 3, 8, 8), False),
    ("transformer", lambda: Transformer(), lambda: torch.randint(0, 20, (2, 6)), False),
    ("transformer_mha", lambda: Transformer(torch_mha=True), lambda: torch.randint(0, 20, (2, 6)), True),
]


@pytest.mark.parametrize("name,make,data,dynamo", CASES,
                         ids=[f"{c[0]}-{'dynamo' if c[3] else 'legacy'}" for c in CASES])
def test_exported_models_equal_onnxruntime(name, make, data, dynamo):
    torch.manual_seed(0)
    model, x = make(), data()
    proto = export(model, x, dynamo)
    bps = 2
    xs = torch.cat([x, data()]).numpy()  # two batches per step
    got, ref_sess, inp = run_session(proto, xs.reshape((bps,) + tuple(x.shape)), bps)
    for i in range(bps):
        ref = ref_sess.run(None, {inp: xs.reshape((bps,) + tuple(x.shape))[i]})[0]
        np.testing.assert_allclose(got[i], ref, rtol=1e-5, atol=1e-5)


def test_legacy_export_shape_arithmetic_is_folded():
    """Shape -> Gather -> Concat -> Reshape chains are compile-time constants: no
    shape op reaches the IR, and the parameters keep their ONNX names."""
    model = Transformer(torch_mha=True)
    proto = export(model, torch.randint(0, 20, (2, 6)), dynamo=False)
    traced = import_onnx(proto)
    text = str(traced.module)
    assert "pos" in traced.params and "embed.weight" in traced.params
    assert 'tilefx.param = "embed.weight"' in text
    ops = {n.op_type for n in onnx.load_model_from_string(proto).graph.node}
    assert {"Shape", "Concat", "Mod"} <= ops  # the exporter's shape arithmetic ...
    assert "aten.cat" not in text and "aten.remainder" not in text  # ... is not in the IR


def _model(nodes, inputs, outputs, inits=(), opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def test_unsupported_operator_names_op_node_and_opset():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    m = _model([helper.make_node("Hardmax", ["x"], ["y"], name="hm1")], [x], [y], opset=13)
    with pytest.raises(Error, match=r"ai\.onnx::Hardmax.*'hm1'.*opset 13"):
        OnnxModule(m)
    with pytest.raises(popart.popart_exception, match="Hardmax"):
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())


def test_dynamic_dimension_is_a_clear_error():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
    with pytest.raises(Error, match="dynamic dimension 'batch'"):
        OnnxModule(model)
    # the shape given to the session fixes it
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT", [4, 3]))
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice(), inputShapeInfo=info)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    data = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    s.run(popart.PyStepIO({"x": data}, anchors))
    np.testing.assert_allclose(anchors["y"], np.maximum(data, 0))


def test_slice_split_concat_and_reductions_equal_onnxruntime():
    """Opset-18 forms (axes as inputs, Split num_outputs) against onnxruntime."""
    f = onnx.TensorProto.FLOAT
    i64 = lambda n, v: helper.make_tensor(n, onnx.TensorProto.INT64, [len(v)], v)
    nodes = [
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
        helper.make_node("Concat", ["b", "a"], ["c"], axis=1),
        helper.make_node("ReduceMean", ["c", "rax"], ["r"], keepdims=1),
        helper.make_node("Transpose", ["s"], ["t"], perm=[1, 0]),
        helper.make_node("Sub", ["c", "r"], ["y"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [3, 6])],
               [helper.make_tensor_value_info("y", f, [3, 6]), helper.make_tensor_value_info("t", f, [3, 2])],
               [i64("st", [5, 0]), i64("en", [0, 3]), i64("ax", [1, 0]), i64("sp", [-2, 1]), i64("rax", [1])],
               opset=18)
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    mod = OnnxModule(m, outputs=["y", "t"])
    with torch.no_grad():
        got = [v.numpy() for v in mod(torch.from_numpy(x))]
    ref = ort.InferenceSession(m.SerializeToString()).run(["y", "t"], {"x": x})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_tilefx_opt_imports_onnx_files(tmp_path, capsys):
    from tilefx.tools.opt import main

    path = tmp_path / "mlp.onnx"
    path.write_bytes(export(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()),
                            torch.randn(2, 4), dynamo=False))
    assert main([str(path), "-p", "ipu-assign-stages,dce"]) == 0
    out = capsys.readouterr().out
    assert 'tilefx.param = "0.weight"' in out and "aten.relu" in out and "stage = 0" in out
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf")
    assert main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "cannot read the ONNX model" in err and "Traceback" not in err
