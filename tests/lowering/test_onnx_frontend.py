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
from onnx_export import export
from onnx import helper, numpy_helper

from tilefx import popart
from tilefx.errors import Error
from tilefx.lowering.from_onnx import OnnxModule, import_onnx


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


class _FlattenHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, x):
        y = x.view(x.size(0), -1)
        a, _ = torch.split(y, [4, 8], dim=1)
        return self.fc(y) + y.unsqueeze(1).squeeze(1).sum(dim=1, keepdim=True) + a.sum(1, keepdim=True)


def test_opset_11_export_with_dynamic_axes_folds_at_its_own_opset():
    """An opset-11 export with a dynamic batch computes x.size(0) with Shape -> Gather
    -> Unsqueeze(axes=[0]): folded at opset 11, where axes is an attribute."""
    torch.manual_seed(0)
    model, x = _FlattenHead().eval(), torch.randn(4, 3, 4)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, dynamo=False, opset_version=11, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
    proto = f.getvalue()
    assert {"Shape", "Unsqueeze", "Concat"} <= {n.op_type for n in onnx.load_model_from_string(proto).graph.node}
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT", [4, 3, 4]))
    s = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), popart.DeviceManager().createCpuDevice(),
                                inputShapeInfo=info)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": x.numpy()}, anchors))
    ref = ort.InferenceSession(proto).run(["y"], {"x": x.numpy()})[0]
    np.testing.assert_allclose(anchors["y"], ref, rtol=1e-6, atol=1e-6)
    # Squeeze, ReduceSum and Split of constants with their opset-11 attributes fold too
    c = helper.make_tensor("c", onnx.TensorProto.INT64, [1, 2], [3, 4])
    nodes = [helper.make_node("Squeeze", ["c"], ["sq"], axes=[0]),
             helper.make_node("Split", ["sq"], ["a", "b"], axis=0, split=[1, 1]),
             helper.make_node("ReduceSum", ["c"], ["n"], axes=[1], keepdims=0),  # [7]
             helper.make_node("Concat", ["b", "a"], ["shape"], axis=0),          # [4, 3]
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Cast", ["n"], ["nf"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Mul", ["r", "nf"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4])],
               [helper.make_empty_tensor_value_info("y")], [c], opset=11)
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": data}, anchors))
    np.testing.assert_array_equal(anchors["y"], ort.InferenceSession(m.SerializeToString()).run(
        ["y"], {"x": data})[0])


def _model(nodes, inputs, outputs, inits=(), opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def test_unsupported_operator_names_op_node_and_opset():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    m = _model([helper.make_node("Det", ["x"], ["y"], name="hm1")], [x], [y], opset=13)
    with pytest.raises(Error, match=r"ai\.onnx::Det.*'hm1'.*opset 13"):
        OnnxModule(m)
    with pytest.raises(popart.popart_exception, match="Det"):
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())


def test_if_on_shape_and_data_conditions_equals_onnxruntime():
    """The TorchScript exporter writes If nodes testing shapes (F.local_response_norm's
    Squeeze when a dimension is 1): the condition is known at compile time and the chosen
    branch runs inline, seeing the outer scope; equal to onnxruntime. An If on a value
    computed from the inputs runs both branches and selects (equal to onnxruntime per
    batch); branches whose outputs differ in shape are then a clear error."""
    model = torch.nn.LocalResponseNorm(3).eval()
    x = torch.randn(1, 5, 4, 4)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, dynamo=False, opset_version=13)
    proto = f.getvalue()
    assert "If" in {n.op_type for n in onnx.load_model_from_string(proto).graph.node}
    got, ref, inp = run_session(proto, x.numpy())
    np.testing.assert_allclose(got, ref.run(None, {inp: x.numpy()})[0], rtol=1e-5, atol=1e-6)

    xi = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2, 3])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [2, 3])])
    data_cond = _model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                        helper.make_node("Greater", ["s", "zero"], ["c"]),
                        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="pick")],
                       [xi], [y], opset=13)
    data_cond.graph.initializer.append(numpy_helper.from_array(np.float32(0), "zero"))
    s = popart.InferenceSession(data_cond.SerializeToString(), popart.DataFlow(2, ["y"]),
                                popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    xs = np.stack([np.full((2, 3), 0.5, np.float32), np.full((2, 3), -0.5, np.float32)])
    xs[:, 0, 0] = [-1.0, 2.0]  # batch 0 sums positive, batch 1 negative
    s.run(popart.PyStepIO({"x": xs}, anchors))
    ref = ort.InferenceSession(data_cond.SerializeToString())
    for k in range(2):  # each batch takes its own branch: Neg, then Abs
        np.testing.assert_array_equal(anchors["y"][k], ref.run(None, {"x": xs[k]})[0])
    np.testing.assert_array_equal(anchors["y"][0], -xs[0])
    np.testing.assert_array_equal(anchors["y"][1], np.abs(xs[1]))
    # both branches run, so their outputs must agree in shape and type
    shorter = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1)], "else", [],
                                [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, None)])
    mismatch = _model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                       helper.make_node("Greater", ["s", "zero"], ["c"]),
                       helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=shorter,
                                        name="pick")], [xi], [y], opset=13)
    mismatch.graph.initializer.append(numpy_helper.from_array(np.float32(0), "zero"))
    with pytest.raises(popart.popart_exception, match=r"'pick' \(If\): its condition depends on graph "
                                                      r"inputs.*\[2, 3\] in then_branch.*\[1, 1\] in else"):
        popart.InferenceSession(mismatch.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice()).prepareDevice()
    # an unsupported operator inside a branch is named as any other
    bad = helper.make_graph([helper.make_node("Det", ["x"], ["t"], name="inner")], "then", [],
                            [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [])])
    nested = _model([helper.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=other)], [xi], [y],
                    opset=13)
    nested.graph.initializer.append(numpy_helper.from_array(np.array(True), "c"))
    with pytest.raises(Error, match=r"ai\.onnx::Det.*'inner'"):
        OnnxModule(nested)


def test_dynamic_dimension_is_a_clear_error():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
    with pytest.raises(Error, match=r"'x' must be specified in InputShapeInfo.*\[batch, 3\].*unknown value 'batch'"):
        OnnxModule(model)
    negative = _model([helper.make_node("Relu", ["x"], ["y"])],
                      [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [-1, 3])], [y])
    with pytest.raises(Error, match=r"shape \[-1, 3\], which uses an unknown value '-1'"):
        OnnxModule(negative)
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


def test_tilefx_run_binds_an_onnx_files_inputs_and_initializers_by_their_names(tmp_path, capsys):
    """The IR of an ONNX file names its graph inputs as the file does (%x) and keeps a
    scalar initializer scalar (tensor<f32>; it was tensor<1xf32>), so tilefx-run runs it
    on the file's initializers and inputs, by name, equal to onnxruntime."""
    from tilefx.tools.opt import main as opt
    from tilefx.tools.run import main as run

    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    inits = [numpy_helper.from_array(np.float32(1.5), "scale"),
             numpy_helper.from_array(np.arange(3, dtype=np.float32), "bias")]
    m = _model([helper.make_node("Mul", ["x", "scale"], ["t"]), helper.make_node("Add", ["t", "bias"], ["y"])],
               [x], [y], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    assert opt([str(path)]) == 0
    ir = capsys.readouterr().out
    assert '%x: tensor<2x3xf32> {tilefx.input = 0 : i64}' in ir
    assert 'tensor<f32> {tilefx.param = "scale"}' in ir
    (tmp_path / "m.mlir").write_text(ir)
    data = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "in.npz", x=data, scale=np.float32(1.5), bias=np.arange(3, dtype=np.float32))
    assert run([str(tmp_path / "m.mlir"), "--inputs", str(tmp_path / "in.npz"),
                "--output", str(tmp_path / "out.npz")]) == 0
    want = ort.InferenceSession(m.SerializeToString()).run(["y"], {"x": data})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-6)


def test_more_operators_equal_onnxruntime():
    """Normalisation, activations, reductions, CumSum, TopK, Einsum and Trilu through a
    session (graph IR, passes, executor) against onnxruntime."""
    f, rng = onnx.TensorProto.FLOAT, np.random.default_rng(0)

    def i64(n, v):
        return helper.make_tensor(n, onnx.TensorProto.INT64, [len(v)], v)

    inits = [helper.make_tensor("w", f, [3, 2, 3, 3], rng.standard_normal(54).astype(np.float32)),
             helper.make_tensor("sc", f, [3], [1.0, 2.0, 0.5]), helper.make_tensor("bi", f, [3], [0.1, -0.2, 0.3]),
             helper.make_tensor("sl", f, [3, 1, 1], [0.1, 0.2, 0.3]), i64("ax", [2]), i64("c1", [2]), i64("k", [3])]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["ct"], pads=[1, 1, 1, 1]),
        helper.make_node("InstanceNormalization", ["ct", "sc", "bi"], ["in"]),
        helper.make_node("PRelu", ["in", "sl"], ["pr"]),
        helper.make_node("Selu", ["pr"], ["se"]),
        helper.make_node("HardSwish", ["se"], ["hs"]),
        helper.make_node("GlobalMaxPool", ["hs"], ["gm"]),
        helper.make_node("ReduceL2", ["hs", "ax"], ["l2"], keepdims=0),
        helper.make_node("ReduceLogSumExp", ["hs", "ax"], ["lse"], keepdims=0),
        helper.make_node("CumSum", ["l2", "c1"], ["cs"], exclusive=1),
        helper.make_node("TopK", ["cs", "k"], ["tv", "ti"]),
        helper.make_node("Einsum", ["l2", "lse"], ["es"], equation="ncw,ncw->nc"),
        helper.make_node("Trilu", ["lse"], ["tr"], upper=0),
    ]
    outs = ["gm", "tv", "ti", "es", "tr"]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [2, 2, 4, 4])],
               [helper.make_empty_tensor_value_info(o) for o in outs], inits, opset=18)
    x = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString()).run(outs, {"x": x})
    s = popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, outs),
                                popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": x}, anchors))
    for name, want in zip(outs, ref):
        np.testing.assert_allclose(anchors[name], want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("family,dynamo", [("bert", True), ("whisper", False), ("resnet", False)])
def test_hugging_face_exports_equal_onnxruntime(family, dynamo):
    """Hugging Face models (tiny configs) as torch.onnx.export writes them, run by a
    PopART InferenceSession, against onnxruntime and against the torch model."""
    from hf_families import FAMILIES

    fam = FAMILIES[family]
    model, ex = fam.model().eval(), fam.example(training=False)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, tuple(ex), f, dynamo=dynamo)
        finally:
            logging.disable(logging.NOTSET)
    proto = f.getvalue()
    graph = onnx.load_model_from_string(proto).graph
    feeds = {i.name: x.numpy() for i, x in zip(graph.input, ex)}
    out = graph.output[0].name
    s = popart.InferenceSession(proto, popart.DataFlow(1, [out]), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO(feeds, anchors))
    ref = ort.InferenceSession(proto).run([out], feeds)[0]
    assert ref.std() > 0  # a real output, not a constant
    np.testing.assert_allclose(anchors[out], ref, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(anchors[out], model(*ex).numpy(), rtol=1e-4, atol=1e-5)


class _Wrapped(torch.nn.Module):
    """A module whose forward is `fn(mods, x)` (exports of a few layers)."""

    def __init__(self, fn, *mods):
        super().__init__()
        self.fn, self.mods = fn, torch.nn.ModuleList(mods)

    def forward(self, x):
        return self.fn(self.mods, x)


@pytest.mark.parametrize("name,make,shape", [
    ("gru", lambda: _Wrapped(lambda m, x: m[0](x)[0], torch.nn.GRU(6, 5, batch_first=True)), (2, 4, 6)),
    ("conv_groupnorm_bilinear", lambda: _Wrapped(
        lambda m, x: torch.nn.functional.interpolate(torch.nn.functional.silu(m[1](m[0](x))), scale_factor=2,
                                                     mode="bilinear"),
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.GroupNorm(2, 4)), (2, 3, 5, 5)),
])
def test_legacy_exports_train_like_pytorch(name, make, shape):
    """Exported layers (opset 13) extended with a loss train in a TrainingSession as the
    torch module trains: the loss of every step equal (the GRU's gates as ONNX's
    reordered W/R/B initializers: SGD updates them element by element as torch's)."""
    torch.manual_seed(0)
    model = make()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.train(), (torch.randn(*shape),), f, dynamo=False, opset_version=13,
                          input_names=["x"], output_names=["y"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    b = popart.Builder(f.getvalue())
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul(["y", "y"])], popart.ReductionType.Mean)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss, popart.ConstSGD(0.1),
                               deviceInfo=popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(*shape)
        s.run(popart.PyStepIO({"x": x.numpy()}, anchors))
        opt.zero_grad()
        ref = (model(x) ** 2).mean()
        ref.backward()
        opt.step()
        np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-5)
