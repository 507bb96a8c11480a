"""More ONNX operators through a PopART session (graph IR, passes, executor)
against onnxruntime: transposed convolution, Resize, the index operators,
the recurrent operators and the rest of the default domain that exported
models use; and the models torch.onnx.export writes with them."""

import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from tilefx import popart

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(0)


def _run_both(model: onnx.ModelProto, feeds: dict, outs: list[str], reference: str = "onnxruntime"):
    """tilefx's outputs and the reference's: onnxruntime, or onnx's reference
    evaluator ("onnx") for operators onnxruntime lacks."""
    proto = model.SerializeToString()
    if reference == "onnx":
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(model).run(outs, feeds)
    else:
        ref = ort.InferenceSession(proto).run(outs, feeds)
    s = popart.InferenceSession(proto, popart.DataFlow(1, outs), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO(feeds, anchors))
    return [anchors[o] for o in outs], ref


def _model(nodes, inputs: dict, outs, inits, opset: int):
    """A one-graph model of `nodes` over `inputs` (their dtypes and shapes), outputs `outs`."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
          for n, a in inputs.items()]
    return helper.make_model(helper.make_graph(nodes, "g", vi, [helper.make_empty_tensor_value_info(o)
                                                               for o in outs], list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def check(nodes, inputs: dict, outs, inits=(), opset=18, rtol=1e-5, atol=1e-5, reference="onnxruntime"):
    """Build a graph of `nodes` over `inputs` and compare every output with the reference."""
    got, ref = _run_both(_model(nodes, inputs, outs, inits, opset), inputs, outs, reference)
    for name, g, r in zip(outs, got, ref):
        assert g.shape == r.shape, (name, g.shape, r.shape)
        np.testing.assert_allclose(g.astype(np.float64) if g.dtype != bool else g, r, rtol=rtol,
                                   atol=atol, err_msg=name)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def const(name, value):
    a = np.asarray(value)
    return helper.make_tensor(name, I64 if a.dtype.kind in "iu" else F32, list(a.shape),
                              a.reshape(-1).tolist())


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2]},
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
    {"strides": [2, 1], "pads": [0, 1, 2, 0]},  # asymmetric
    {"strides": [2, 2], "output_shape": [9, 10]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [1, 1], "dilations": [2, 2], "group": 2},
])
def test_conv_transpose(attrs):
    w = const("w", f32(4, 3 if attrs.get("group", 1) == 1 else 3, 3, 3))
    b = const("b", f32(3 * attrs.get("group", 1)))
    check([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], {"x": f32(2, 4, 5, 5)},
          ["y"], [w, b])


@pytest.mark.parametrize("mode,ctm,extra,sizes", [
    ("nearest", "asymmetric", {"nearest_mode": "floor"}, None),
    ("nearest", "half_pixel", {"nearest_mode": "round_prefer_ceil"}, None),
    ("linear", "half_pixel", {}, None),
    ("linear", "pytorch_half_pixel", {}, [2, 3, 7, 9]),
    ("linear", "align_corners", {}, [2, 3, 9, 12]),
    ("cubic", "half_pixel", {"cubic_coeff_a": -0.75}, None),
])
def test_resize(mode, ctm, extra, sizes):
    inits = [helper.make_tensor("roi", F32, [0], [])]
    if sizes is None:
        inits.append(const("scales", np.array([1, 1, 2, 1.5], np.float32)))
        ins = ["x", "roi", "scales"]
    else:
        inits.append(helper.make_tensor("scales", F32, [0], []))
        inits.append(const("sizes", np.array(sizes, np.int64)))
        ins = ["x", "roi", "scales", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=ctm, **extra)
    check([node], {"x": f32(2, 3, 4, 6)}, ["y"], inits, atol=1e-4)


@pytest.mark.parametrize("mode,ctm,nearest,opset", [
    ("nearest", "asymmetric", "round_prefer_floor", 13),
    ("nearest", "half_pixel", "floor", 13),
    ("nearest", "align_corners", "round_prefer_floor", 13),
    ("nearest", "tf_half_pixel_for_nn", "ceil", 13),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor", 13),
    ("linear", "asymmetric", None, 13),
    ("linear", "half_pixel_symmetric", None, 19),
])
@pytest.mark.parametrize("resize", [[1, 1, 2, 1.5], [2, 3, 3, 10]])  # scales up; sizes down and up
def test_resize_other_coordinate_transformations_and_nearest_modes(mode, ctm, nearest, opset, resize):
    """The coordinate transformations torch's interpolate does not compute, as static
    gathers (tilefx/lowering/onnx_resize.py), equal to onnxruntime."""
    extra = {"nearest_mode": nearest} if nearest else {}
    sizes = resize if isinstance(resize[-1], int) and resize[0] == 2 else None
    inits = [helper.make_tensor("roi", F32, [0], [])]
    if sizes is None:
        inits.append(const("scales", np.array(resize, np.float32)))
        ins = ["x", "roi", "scales"]
    else:
        inits += [helper.make_tensor("scales", F32, [0], []), const("sizes", np.array(sizes, np.int64))]
        ins = ["x", "roi", "scales", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=ctm, **extra)
    check([node], {"x": f32(2, 3, 4, 6)}, ["y"], inits, opset=opset, atol=1e-5)


@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.5], [1, 1, 1.8, 1.5], [1, 1, 0.75, 2.5]])
def test_resize_nearest_by_scales_sizes_and_opset10_rounding(opset, scales):
    """Nearest by scales: the output size is floor(input x scale) in float32 as onnxruntime
    computes it (5 x 1.8 is 9); Resize-10 (no nearest_mode) floors where an axis grows and
    takes the ceiling where it shrinks, as onnxruntime."""
    x = np.arange(2 * 3 * 5 * 6, dtype=np.float32).reshape(2, 3, 5, 6)
    inits = [const("scales", np.array(scales, np.float32))]
    ins = ["x", "scales"]
    attrs = {"mode": "nearest"}
    if opset >= 11:
        inits.append(helper.make_tensor("roi", F32, [0], []))
        ins = ["x", "roi", "scales"]
        attrs["coordinate_transformation_mode"] = "asymmetric"
    check_exact([helper.make_node("Resize", ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset)


def test_opset9_upsample_linear_export_and_scatter_equal_onnxruntime():
    """torch.onnx.export at opset 9 writes bilinear interpolation as Upsample linear
    (ONNX's asymmetric coordinates) and index_fill as the deprecated Scatter, folded at
    compile time."""
    import io

    class M(torch.nn.Module):
        def forward(self, x):
            up = torch.nn.functional.interpolate(x, size=(7, 9), mode="bilinear", align_corners=False)
            near = torch.nn.functional.interpolate(x, size=(7, 9), mode="nearest")  # scales 1.75, 1.8
            return (up + near).index_fill(3, torch.tensor([0, 2]), 3.0)

    f = io.BytesIO()
    torch.onnx.export(M().eval(), (torch.randn(1, 2, 4, 5),), f, dynamo=False, opset_version=9)
    model = onnx.load_model_from_string(f.getvalue())
    assert {"Upsample", "Scatter"} <= {n.op_type for n in model.graph.node}
    x = f32(1, 2, 4, 5)
    got, ref = _run_both(model, {model.graph.input[0].name: x}, [model.graph.output[0].name])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)


def test_index_operators():
    x = f32(3, 4, 5)
    idx = RNG.integers(-4, 4, (3, 2, 5)).astype(np.int64)
    upd = f32(3, 2, 5)
    nd = np.array([[0, 1], [2, -1], [1, 3]], np.int64)
    check([helper.make_node("GatherElements", ["x", "i"], ["ge"], axis=1),
           helper.make_node("ScatterElements", ["x", "i2", "u"], ["se"], axis=1, reduction="add"),
           helper.make_node("ScatterElements", ["x", "i2", "u"], ["se0"], axis=1),
           helper.make_node("GatherND", ["x", "nd"], ["gn"]),
           helper.make_node("ScatterND", ["x", "nd", "un"], ["sn"]),
           helper.make_node("ScatterND", ["x", "nd", "un"], ["sna"], reduction="add")],
          {"x": x, "i": idx, "u": upd}, ["ge", "se", "se0", "gn", "sn", "sna"],
          # distinct targets for the plain scatter: ONNX leaves duplicates undefined
          [const("i2", np.array([[[0] * 5, [2] * 5]] * 3, np.int64)), const("nd", nd),
           const("un", f32(3, 5))])


def test_one_hot_depth_space_hardmax_argmin():
    x = f32(2, 8, 4, 6)
    check([helper.make_node("OneHot", ["i", "depth", "vals"], ["oh"], axis=1),
           helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2, mode="DCR"),
           helper.make_node("DepthToSpace", ["x"], ["d2c"], blocksize=2, mode="CRD"),
           helper.make_node("SpaceToDepth", ["x"], ["s2d"], blocksize=2),
           helper.make_node("Hardmax", ["x"], ["hm"], axis=1),
           helper.make_node("ArgMin", ["x"], ["am"], axis=2, keepdims=0),
           helper.make_node("ArgMax", ["r"], ["al"], axis=1, select_last_index=1)],
          {"x": x, "i": np.array([[0, 3, -1], [5, 2, 1]], np.int64)},
          ["oh", "d2s", "d2c", "s2d", "hm", "am", "al"],
          [const("depth", np.array([4], np.int64)), const("vals", np.array([-1.0, 2.0], np.float32)),
           const("r", np.array([[1, 3, 3, 0], [2, 2, 1, 2]], np.float32))])


def test_activations_and_normalisations():
    x = f32(2, 6, 4, 4)
    x[0, 0, 0, 0] = np.inf
    x[0, 1, 0, 0] = -np.inf
    nodes = [helper.make_node(op, ["x"], [op.lower()], **at) for op, at in [
        ("Softsign", {}), ("Mish", {}), ("Celu", {"alpha": 0.7}), ("ThresholdedRelu", {"alpha": 0.3}),
        ("Shrink", {"lambd": 0.4, "bias": 0.1}), ("IsInf", {}), ("IsInf", {"detect_negative": 0}),
    ]]
    nodes[-1].output[0] = "isposinf"
    check(nodes, {"x": x}, ["softsign", "mish", "celu", "thresholdedrelu", "shrink", "isinf",
                            "isposinf"])
    y = f32(2, 6, 4, 4)
    check([helper.make_node("LRN", ["y"], ["lrn"], size=3, alpha=2e-4, beta=0.7, bias=1.5),
           helper.make_node("LpNormalization", ["y"], ["l2"], axis=1),
           helper.make_node("LpNormalization", ["y"], ["l1"], axis=-1, p=1),
           helper.make_node("MeanVarianceNormalization", ["y"], ["mvn"]),
           helper.make_node("ReduceL1", ["y", "ax"], ["rl1"], keepdims=0),
           helper.make_node("Asinh", ["y"], ["asinh"]),
           helper.make_node("EyeLike", ["m"], ["eye"], k=1),
           helper.make_node("CastLike", ["i", "y"], ["cl"])],
          {"y": y, "m": f32(3, 5), "i": np.array([1, 2], np.int64)},
          ["lrn", "l2", "l1", "mvn", "rl1", "asinh", "eye", "cl"], [const("ax", np.array([1, 3], np.int64))],
          rtol=1e-4, atol=1e-5)


def test_losses():
    scores = f32(4, 5)
    labels = np.array([0, 4, 2, 1], np.int64)
    check([helper.make_node("SoftmaxCrossEntropyLoss", ["s", "l"], ["ce", "lp"], reduction="mean"),
           helper.make_node("NegativeLogLikelihoodLoss", ["lp", "l", "w"], ["nll"], reduction="sum",
                            ignore_index=2)],
          {"s": scores, "l": labels}, ["ce", "lp", "nll"], [const("w", f32(5))])


@pytest.mark.parametrize("op,direction,extra", [
    ("LSTM", "forward", {}), ("LSTM", "bidirectional", {}), ("LSTM", "reverse", {"clip": 0.5}),
    ("GRU", "forward", {"linear_before_reset": 1}), ("GRU", "bidirectional", {}),
    ("RNN", "forward", {}), ("RNN", "bidirectional", {"activations": ["Relu", "Tanh"]}),
])
def test_recurrent_operators(op, direction, extra):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    dirs, hidden, inp, seq, batch = 2 if direction == "bidirectional" else 1, 5, 3, 4, 2
    w = const("w", f32(dirs, gates * hidden, inp) * 0.5)
    r = const("r", f32(dirs, gates * hidden, hidden) * 0.5)
    b = const("b", f32(dirs, 2 * gates * hidden) * 0.1)
    ins = ["x", "w", "r", "b", "", "h0"] + (["c0", "p"] if op == "LSTM" else [])
    inits = [w, r, b] + ([const("p", f32(dirs, 3 * hidden) * 0.1)] if op == "LSTM" else [])
    feeds = {"x": f32(seq, batch, inp), "h0": f32(dirs, batch, hidden)}
    if op == "LSTM":
        feeds["c0"] = f32(dirs, batch, hidden)
    outs = ["y", "yh"] + (["yc"] if op == "LSTM" else [])
    check([helper.make_node(op, ins, outs, hidden_size=hidden, direction=direction, **extra)],
          feeds, outs, inits, rtol=1e-4, atol=1e-5)


def _export(model, args) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model.eval(), args, f, dynamo=False)
        finally:
            logging.disable(logging.NOTSET)
    return f.getvalue()


class _Decoder(torch.nn.Module):
    """Upsampling decoder: transposed convolutions and interpolation."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.conv = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.up(x))
        y = torch.nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        y = torch.nn.functional.interpolate(y, size=(20, 24), mode="bilinear", align_corners=False)
        return self.conv(y)


class _Tagger(torch.nn.Module):
    """A sequence tagger: embedding, bidirectional LSTM, GRU, linear."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6)
        self.lstm = torch.nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = torch.nn.GRU(10, 4, batch_first=True)
        self.out = torch.nn.Linear(4, 3)

    def forward(self, tokens):
        y, _ = self.lstm(self.emb(tokens))
        y, _ = self.gru(y)
        return self.out(y)


@pytest.mark.parametrize("make,data", [
    (_Decoder, lambda: torch.randn(2, 4, 5, 6)),
    (_Tagger, lambda: torch.randint(0, 11, (2, 7))),
], ids=["conv-transpose-decoder", "lstm-gru-tagger"])
def test_exported_models_equal_onnxruntime_and_torch(make, data):
    torch.manual_seed(0)
    model, x = make(), data()
    proto = _export(model, (x,))
    m = onnx.load_model_from_string(proto)
    inp, out = m.graph.input[0].name, m.graph.output[0].name
    got, ref = _run_both(m, {inp: x.numpy()}, [out])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got[0], model(x).numpy(), rtol=1e-4, atol=1e-5)


def test_random_operators_follow_the_session_seed():
    """RandomNormal / RandomUniform(Like) draw from the session's streams: the
    moments are right, setRandomSeed makes runs repeat, a new seed changes them."""
    nodes = [helper.make_node("RandomNormal", [], ["n"], shape=[200, 50], mean=1.0, scale=2.0),
             helper.make_node("RandomUniformLike", ["x"], ["u"], low=-1.0, high=3.0),
             helper.make_node("Add", ["x", "u"], ["y"])]
    x = np.zeros((100, 40), np.float32)
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F32, [100, 40])],
        [helper.make_empty_tensor_value_info(o) for o in ("n", "y")]), opset_imports=[helper.make_opsetid("", 18)])
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["n", "y"]),
                                popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    runs = []
    for seed in (7, 7, 8):
        s.setRandomSeed(seed)
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO({"x": x}, anchors))
        runs.append(anchors)
    n, y = runs[0]["n"], runs[0]["y"]
    assert n.shape == (200, 50) and n.dtype == np.float32
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1
    assert y.min() >= -1.0 and y.max() <= 3.0 and abs(y.mean() - 1.0) < 0.1
    np.testing.assert_array_equal(runs[0]["n"], runs[1]["n"])
    assert not np.array_equal(runs[0]["n"], runs[2]["n"])
    with pytest.raises(popart.popart_exception, match="non-negative int"):
        s.setRandomSeed(-1)


@pytest.mark.parametrize("op,attrs", [
    ("Conv", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("Conv", {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ("Conv", {"auto_pad": "VALID", "strides": [1, 2]}),
    ("MaxPool", {"auto_pad": "SAME_UPPER", "kernel_shape": [3, 2], "strides": [2, 2]}),
    ("MaxPool", {"auto_pad": "SAME_LOWER", "kernel_shape": [2, 2], "strides": [1, 1]}),
    ("AveragePool", {"auto_pad": "SAME_UPPER", "kernel_shape": [3, 3], "strides": [2, 2]}),
    ("AveragePool", {"auto_pad": "SAME_LOWER", "kernel_shape": [2, 3], "strides": [1, 2],
                     "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 0, 0, 2], "count_include_pad": 1}),
])
def test_auto_pad_and_asymmetric_pool_padding(op, attrs):
    """TensorFlow-exported graphs pad by auto_pad SAME_*; the padding follows from the static shapes."""
    x = f32(2, 3, 9, 8)
    if op == "Conv":
        w = f32(4, 3, 3, 3)
        check([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], {"x": x}, ["y"],
              inits=[helper.make_tensor("w", F32, list(w.shape), w.reshape(-1).tolist())])
    else:
        check([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])


def test_pads_of_the_wrong_length_are_a_clear_error():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[0, 0, 0, 0, 0])], "g",
        [helper.make_tensor_value_info("x", F32, [1, 1, 8, 8])], [helper.make_empty_tensor_value_info("y")]),
        opset_imports=[helper.make_opsetid("", 18)])
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())
    with pytest.raises(popart.popart_exception, match="pads has 5 values; 2 spatial dimensions need 4"):
        s.prepareDevice()


def test_upsample_and_lp_pools():
    x = f32(2, 3, 5, 4)
    check([helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")], {"x": x}, ["y"],
          inits=[helper.make_tensor("s", F32, [4], [1, 1, 2, 3])], opset=9)
    check([helper.make_node("GlobalLpPool", ["x"], ["y"], p=3)], {"x": x}, ["y"])
    check([helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 2], p=2,
                            pads=[1, 0, 0, 1])], {"x": x}, ["y"])
    check([helper.make_node("ReduceLogSum", ["p", "a"], ["y"], keepdims=0)], {"p": np.abs(x) + 0.1},
          ["y"], inits=[helper.make_tensor("a", I64, [2], [1, 3])])


def test_quantize_dequantize_as_in_onnxruntime():
    x = f32(2, 4, 3) * 3
    scale = helper.make_tensor("scale", F32, [4], [0.02, 0.05, 0.1, 0.03])
    zp = helper.make_tensor("zp", TensorProto.INT8, [4], [0, 3, -2, 1])
    check([helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1),
           helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"], axis=1)],
          {"x": x}, ["y"], inits=[scale, zp])
    s1 = helper.make_tensor("s1", F32, [], [0.05])
    z1 = helper.make_tensor("z1", TensorProto.UINT8, [], [128])
    check([helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q"]),
           helper.make_node("DequantizeLinear", ["q", "s1", "z1"], ["y"])], {"x": x}, ["y"],
          inits=[s1, z1])


def test_reverse_sequence_max_unpool_col2im():
    x = f32(5, 3, 2)
    lens = helper.make_tensor("lens", I64, [3], [5, 2, 3])
    check([helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=1, time_axis=0)],
          {"x": x}, ["y"], inits=[lens])
    img = f32(2, 2, 4, 4)
    check([helper.make_node("MaxPool", ["img"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
           helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
          {"img": img}, ["y"])
    check([helper.make_node("MaxPool", ["img"], ["p", "i"], kernel_shape=[3, 2], strides=[1, 2],
                            pads=[1, 0, 1, 0], storage_order=1)], {"img": img}, ["p", "i"])
    cols = f32(2, 2 * 4, 9)
    check([helper.make_node("Col2Im", ["c", "shape", "block"], ["y"], strides=[1, 1])], {"c": cols},
          ["y"], inits=[helper.make_tensor("shape", I64, [2], [4, 4]),
                        helper.make_tensor("block", I64, [2], [2, 2])])


def test_newer_opset_operators_equal_the_reference():
    x = f32(2, 3, 6)
    check([helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[1, 2])], {"x": x}, ["y"],
          inits=[helper.make_tensor("shape", I64, [2], [5, 4])], reference="onnx")
    check([helper.make_node("RMSNormalization", ["x", "g"], ["y"], axis=-1, epsilon=1e-5)], {"x": x},
          ["y"], inits=[helper.make_tensor("g", F32, [6], [1, 2, 3, 0.5, 1, 1])], opset=23,
          reference="onnx")
    check([helper.make_node("AffineGrid", ["theta", "size"], ["y"], align_corners=0)],
          {"theta": f32(2, 2, 3)}, ["y"], inits=[helper.make_tensor("size", I64, [4], [2, 1, 3, 4])],
          opset=20, reference="onnx")
    check([helper.make_node("CumProd", ["x", "ax"], ["y"], exclusive=1, reverse=1)], {"x": x}, ["y"],
          inits=[helper.make_tensor("ax", I64, [], [2])], opset=26, reference="onnx")


def check_exact(nodes, inputs: dict, outs, inits=(), opset=18, reference="onnxruntime"):
    """As `check`, and the dtypes equal onnxruntime's (PopART's INT32 for index outputs:
    ArgMax/ArgMin, TopK's indices); integer and boolean results exactly."""
    from tilefx.popart.builder import popart_int32_indices

    model = _model(nodes, inputs, outs, inits, opset)
    got, ref = _run_both(model, inputs, outs, reference)
    int32 = popart_int32_indices(model)
    for name, g, r in zip(outs, got, ref):
        want = np.dtype(np.int32) if name in int32 and r.dtype == np.int64 else r.dtype
        assert g.dtype == want and g.shape == r.shape, (name, g.dtype, g.shape, r.dtype, r.shape)
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(g, r, err_msg=name)
        else:
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape,pads", [
    ((3, 4), [1, 2, 2, 1]),
    ((2, 3, 5), [0, 0, 2, 0, 0, 3]),                      # torch's ReflectionPad1d
    ((1, 1, 3, 4), [0, 0, 1, 1, 0, 0, 1, 1]),             # ReflectionPad2d / ReplicationPad2d exports
    ((1, 2, 3, 4, 4), [0, 0, 1, 2, 1, 0, 0, 2, 1, 3]),    # 3-d padding of a 5-d input
    ((3, 4, 3, 3), [1, 2, 0, 0, 2, 1, 0, 1]),             # batch and channel axes padded
    ((4, 5), [-1, 2, 1, -2]),                             # negative pads crop first
])
def test_pad_reflect_edge_wrap_any_axis(mode, shape, pads):
    x = f32(*shape)
    check_exact([helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)], {"x": x}, ["y"],
                inits=[const("p", np.array(pads, np.int64))], opset=19 if mode == "wrap" else 13)


def test_pad_opset_18_axes_and_constant_value():
    x = f32(2, 3, 4)
    ax = helper.make_tensor("ax", I64, [2], [-1, 0])
    check_exact([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"])], {"x": x}, ["y"],
                inits=[const("p", np.array([1, 2, 3, 0], np.int64)), ax])
    check_exact([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")], {"x": x}, ["y"],
                inits=[const("p", np.array([2, 1, 1, 0], np.int64)), ax])
    check_exact([helper.make_node("Pad", ["x", "p", "", "ax1"], ["y"], mode="edge")], {"x": x}, ["y"],
                inits=[const("p", np.array([1, 2], np.int64)), helper.make_tensor("ax1", I64, [1], [1])])
    i = np.arange(6, dtype=np.int64).reshape(2, 3) + 2**40
    check_exact([helper.make_node("Pad", ["i", "p", "v"], ["y"])], {"i": i}, ["y"],
                inits=[const("p", np.array([0, 1, 1, 0], np.int64)),
                       helper.make_tensor("v", I64, [], [2**40 + 3])], opset=13)


def test_pad_reflect_beyond_the_axis_is_a_clear_error():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")], "g",
        [helper.make_tensor_value_info("x", F32, [2, 3])], [helper.make_empty_tensor_value_info("y")],
        [const("p", np.array([0, 3, 0, 0], np.int64))]), opset_imports=[helper.make_opsetid("", 13)])
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())
    with pytest.raises(popart.popart_exception, match="must be smaller than its size 3"):
        s.prepareDevice()


def test_float_initializers_read_as_numbers_stay_compile_time_values():
    """A Pad value, Range's bounds, a Dropout ratio or a OneHot depth given as a float
    initializer is a setting, not a weight (a parameter is a traced tensor, not a number)."""
    x = f32(2, 3)
    check_exact([helper.make_node("Pad", ["x", "p", "v"], ["y"])], {"x": x}, ["y"],
                inits=[const("p", np.array([0, 1, 0, 1], np.int64)), helper.make_tensor("v", F32, [], [1.5])],
                opset=13)
    check_exact([helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
                {"x": f32(4)}, ["y"], inits=[helper.make_tensor(n, F32, [], [v])
                                             for n, v in [("s", 0.0), ("l", 1.0), ("d", 0.25)]], opset=11)
    check_exact([helper.make_node("Dropout", ["x", "ratio"], ["y"])], {"x": x}, ["y"],
                inits=[helper.make_tensor("ratio", F32, [], [0.25])], opset=13)
    check_exact([helper.make_node("OneHot", ["i", "depth", "vals"], ["y"])],
                {"i": np.array([0, 2, -1], np.int64)}, ["y"],
                inits=[helper.make_tensor("depth", F32, [], [4.0]), helper.make_tensor("vals", F32, [2], [0, 3])],
                opset=11)


def test_pad_value_and_dropout_ratio_from_graph_inputs_run_and_range_bounds_are_a_clear_error():
    """Pad's constant value and Dropout's ratio may be runtime values (they change no
    shape): equal to onnxruntime; Range's bounds set its output's shape, so one from a
    graph input is a clear error."""
    x = f32(2, 3)
    check_exact([helper.make_node("Pad", ["x", "p", "v"], ["y"])], {"x": x, "v": np.array(-2.5, np.float32)},
                ["y"], inits=[const("p", np.array([0, 1, -1, 2], np.int64))], opset=13)
    check_exact([helper.make_node("Dropout", ["x", "r"], ["y", "m"])], {"x": x, "r": np.array(0.4, np.float32)},
                ["y", "m"], opset=13)  # inference: the identity and an all-True mask
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["y"])], "g",
        [helper.make_tensor_value_info("l", F32, [])], [helper.make_empty_tensor_value_info("y")],
        [helper.make_tensor("s", F32, [], [0.0]), helper.make_tensor("d", F32, [], [1.0])]),
        opset_imports=[helper.make_opsetid("", 13)])
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["y"]),
                                popart.DeviceManager().createCpuDevice())
    with pytest.raises(popart.popart_exception, match="must be known at compile time"):
        s.prepareDevice()


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_integer_clip_keeps_the_type_and_exact_values(dtype):
    big = 16777217 if dtype != np.uint8 else 200  # not a float32
    x = np.array([big, 3, 0, 7, big - 2], dtype)
    lo = helper.make_tensor("lo", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [], [1])
    hi = helper.make_tensor("hi", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [],
                            [2**40 if dtype == np.int64 else big - 1])
    check_exact([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, ["y"], inits=[lo, hi], opset=13)
    check_exact([helper.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": x}, ["y"], inits=[hi], opset=13)
    check_exact([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                {"x": x, "lo": np.array(2, dtype), "hi": np.array(big - 1, dtype)}, ["y"], opset=13)
    if dtype == np.int64:  # beyond float64's integers too
        x = np.array([2**60 + 1, -(2**60) - 1, 5], np.int64)
        check_exact([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, ["y"], opset=13,
                    inits=[helper.make_tensor("lo", I64, [], [-(2**60)]),
                           helper.make_tensor("hi", I64, [], [2**61])])


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [1, 0])
def test_topk_ties_come_out_lowest_index_first(largest, axis):
    x = np.array([[1, 2, 2, 2, 0, 2], [5, 5, 5, 5, 5, 5], [0, 0, 2, 0, 1, 1]], np.float32)
    x = x if axis == 1 else np.ascontiguousarray(x.T)
    k = helper.make_tensor("k", I64, [1], [4])
    check_exact([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], {"x": x},
                ["v", "i"], inits=[k], opset=11)
    many = np.random.default_rng(1).integers(0, 5, (3, 2000)).astype(np.int64)  # ties everywhere
    check_exact([helper.make_node("TopK", ["m", "k"], ["v", "i"], largest=largest)], {"m": many},
                ["v", "i"], inits=[helper.make_tensor("k", I64, [1], [700])], opset=11)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_div_and_mod_by_a_graph_input(dtype):
    """The output shapes are found without the values: a divisor input is no 0."""
    a = np.array([7, -7, 9, -9, 0], dtype)
    b = np.array([2, 2, -4, -4, 3], dtype)
    check_exact([helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["r"]),
                 helper.make_node("Mod", ["a", "b"], ["f"], fmod=1)], {"a": a, "b": b}, ["q", "r", "f"],
                opset=13)


def test_size_is_the_static_element_count():
    check_exact([helper.make_node("Size", ["x"], ["n"]), helper.make_node("Cast", ["n"], ["nf"], to=F32),
                 helper.make_node("Div", ["x", "nf"], ["y"])], {"x": f32(2, 3, 4)}, ["y", "n"], opset=13)
    check_exact([helper.make_node("Size", ["x"], ["n"])], {"x": np.zeros((0, 3), np.float32)}, ["n"], opset=13)


def test_dropout_mask_output_in_inference_equals_onnxruntime():
    check_exact([helper.make_node("Dropout", ["x", "r"], ["y", "mask"])], {"x": f32(3, 4)}, ["y", "mask"],
                inits=[helper.make_tensor("r", F32, [], [0.3])], opset=13)
    # onnxruntime's opset-10 kernel gives an all-False mask; ONNX's reference all True
    check_exact([helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3)], {"x": f32(3, 4)},
                ["y", "mask"], opset=10, reference="onnx")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_cumsum_and_reductions_keep_the_type(dtype):
    """CumSum, ReduceSum/Prod/Max/Min keep an integer input's type; ReduceMean of integers
    truncates the mean, as onnxruntime."""
    x = np.array([[1, 2, 0], [-1, -2, 0], [-3, 0, 1], [7, 0, 0], [-7, 0, 0], [5, 0, 0], [-5, 0, 0],
                  [2**30, 2**30, 1]], dtype)
    ax = helper.make_tensor("ax", I64, [], [1])
    axes = helper.make_tensor("axes", I64, [1], [1])
    check_exact([helper.make_node("CumSum", ["x", "ax"], ["c"]),
                 helper.make_node("CumSum", ["x", "ax"], ["ce"], exclusive=1, reverse=1),
                 helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0),
                 helper.make_node("ReduceMean", ["x"], ["mall"], keepdims=1),
                 helper.make_node("ReduceMax", ["x"], ["mx"], axes=[0])],
                {"x": x}, ["c", "ce", "m", "mall", "mx"], inits=[ax, axes], opset=13)
    small = x[:-1]  # sums that fit the type (onnxruntime's int32 overflow saturates)
    check_exact([helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
                 helper.make_node("ReduceProd", ["x"], ["p"], axes=[0], keepdims=0)],
                {"x": small}, ["s", "p"], inits=[axes], opset=13)


class _Shifts(torch.nn.Module):
    """Shifts of an int64 tensor by constants: the dynamo exporter writes them through
    uint64 (Cast, BitShift, BitwiseOr with the sign bits, Cast; it exports no shift
    by a tensor)."""

    def forward(self, x):
        return (x >> 3) + (x << 2) - (x >> 62), ((x.float() * 7).long() >> 1).float()


def test_dynamo_exported_shifts_through_uint64_equal_onnxruntime_and_torch():
    x = torch.tensor([[-2 ** 40, -9, -1, 0], [1, 9, 2 ** 40, -(2 ** 62)]])
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(_Shifts(), (x,), f, dynamo=True, input_names=["x"])
        finally:
            logging.disable(logging.NOTSET)
    m = onnx.load_model_from_string(f.getvalue())
    assert TensorProto.UINT64 in {a.i for node in m.graph.node for a in node.attribute if node.op_type == "Cast"}
    outs = [o.name for o in m.graph.output]
    got, ref = _run_both(m, {"x": x.numpy()}, outs)
    want = _Shifts()(x)
    for g, r, w in zip(got, ref, want):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)
        np.testing.assert_array_equal(g, w.numpy())


def test_uint64_operators_equal_onnxruntime():
    """uint64 values carried as int64 bit patterns: a logical right shift (counts 0 to
    64), a left shift, comparisons and Max/Min in unsigned order, casts to float (top bit
    set), to int32 and back through CastLike, bitwise operators and a uint64 constant."""
    U64 = TensorProto.UINT64
    x = np.array([-1, -(2 ** 63), 2 ** 63 - 1, 0, 5, -6, 1 << 40, 12345], np.int64)
    n = np.array([0, 1, 63, 64, 2, 60, 33, 4], np.int64)
    mask = helper.make_tensor("mask", U64, [], [0xF0F0F0F0F0F0F0F0])
    nodes = [helper.make_node("Cast", ["x"], ["u"], to=U64), helper.make_node("Cast", ["n"], ["nu"], to=U64),
             helper.make_node("BitShift", ["u", "nu"], ["r"], direction="RIGHT"),
             helper.make_node("BitShift", ["u", "nu"], ["l"], direction="LEFT"),
             helper.make_node("BitwiseAnd", ["u", "mask"], ["a"]),
             helper.make_node("Less", ["u", "mask"], ["lt"]),
             helper.make_node("GreaterOrEqual", ["u", "r"], ["ge"]),
             helper.make_node("Max", ["u", "a"], ["mx"]),
             helper.make_node("Cast", ["mx"], ["mx_f64"], to=TensorProto.DOUBLE),
             helper.make_node("Cast", ["r"], ["r_f32"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["l"], ["l_i32"], to=TensorProto.INT32),
             helper.make_node("CastLike", ["l_i32", "u"], ["back"]),
             helper.make_node("Cast", ["back"], ["back_i64"], to=TensorProto.INT64),
             helper.make_node("Cast", ["a"], ["a_i64"], to=TensorProto.INT64)]
    outs = ["lt", "ge", "mx_f64", "r_f32", "l_i32", "back_i64", "a_i64"]
    check_exact(nodes, {"x": x, "n": n}, outs, inits=[mask])
    # onnxruntime has no uint64 Where: onnx's reference evaluator
    where = [helper.make_node("Where", ["lt", "r", "l"], ["w"]),
             helper.make_node("Cast", ["w"], ["w_i64"], to=TensorProto.INT64)]
    check_exact(nodes + where, {"x": x, "n": n}, outs + ["w_i64"], inits=[mask], reference="onnx")


def test_uint64_division_inputs_and_outputs_are_clear_errors():
    U64 = TensorProto.UINT64
    x = np.arange(1, 5, dtype=np.int64)
    div = _model([helper.make_node("Cast", ["x"], ["u"], to=U64),
                  helper.make_node("Div", ["u", "u"], ["q"], name="udiv"),
                  helper.make_node("Cast", ["q"], ["y"], to=TensorProto.INT64)], {"x": x}, ["y"], [], 18)
    with pytest.raises(popart.popart_exception, match=r"'udiv' \(Div\) on a uint64 tensor is not supported"):
        _run_both(div, {"x": x}, ["y"])
    out = _model([helper.make_node("Cast", ["x"], ["u"], to=U64)], {"x": x}, ["u"], [], 18)
    with pytest.raises(popart.popart_exception, match="'u' is uint64"):
        _run_both(out, {"x": x}, ["u"])
    given = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)], {"x": x.astype(np.uint64)},
                   ["y"], [], 18)
    with pytest.raises(popart.popart_exception, match="graph input 'x' is uint64"):
        _run_both(given, {"x": x.astype(np.uint64)}, ["y"])


ATTENTION_CASES = {
    "4d": ({}, [(2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)], None, False),
    "4d_scale_causal": ({"scale": 0.3, "is_causal": 1}, [(1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4)], None, False),
    "3d_gqa_float_mask": ({"q_num_heads": 4, "kv_num_heads": 2}, [(2, 3, 16), (2, 5, 8), (2, 5, 6)],
                          ("float", (3, 5)), False),
    "gqa_bool_mask_causal_past": ({"is_causal": 1}, [(1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)],
                                  ("bool", (1, 1, 3, 5)), True),
    "softcap_fully_masked_row": ({"softcap": 2.0}, [(1, 1, 3, 4), (1, 1, 4, 4), (1, 1, 4, 4)],
                                 ("rows", (3, 4)), False),
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_attention_equals_onnxruntime(case):
    """ONNX Attention (opset 23): rank 4 and 3 with its head counts, grouped-query
    heads, scale, causal masking aligned after a past key/value cache (returned as the
    present key/value), boolean and additive masks, softcap, and a query row with
    every key masked (zeros)."""
    attrs, shapes, mask, past = ATTENTION_CASES[case]
    feeds = {n: f32(*s) for n, s in zip("qkv", shapes)}
    ins = ["q", "k", "v"]
    if mask is not None:
        kind, shape = mask
        if kind == "float":
            feeds["m"] = f32(*shape)
        elif kind == "bool":
            feeds["m"] = RNG.random(shape) < 0.7
            feeds["m"][..., 0] = True
        else:  # the middle query row masks every key
            feeds["m"] = np.zeros(shape, np.float32)
            feeds["m"][1] = -np.inf
        ins.append("m")
    outs = ["y"]
    if past:
        feeds["pk"], feeds["pv"] = f32(1, 2, 2, 4), f32(1, 2, 2, 4)
        ins += ["pk", "pv"]
        outs += ["present_k", "present_v"]
    node = helper.make_node("Attention", ins, outs, **attrs)
    check([node], feeds, outs, opset=23, rtol=1e-5, atol=1e-6)


class _Attend(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x, src_mask=torch.nn.Transformer.generate_square_subsequent_mask(4), is_causal=True)


def test_dynamo_opset_23_attention_runs_and_trains_like_torch():
    """The dynamo exporter at opset 23 writes a transformer layer's attention as one
    Attention node: equal to onnxruntime and torch, and in a TrainingSession the
    gradient of the input equals torch's."""
    torch.manual_seed(0)
    model, x = _Attend().eval(), torch.randn(2, 4, 8)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(model, (x,), f, dynamo=True, opset_version=23, input_names=["x"])
        finally:
            logging.disable(logging.NOTSET)
    m = onnx.load_model_from_string(f.getvalue())
    assert "Attention" in {n.op_type for n in m.graph.node}
    out = m.graph.output[0].name
    got, ref = _run_both(m, {"x": x.numpy()}, [out])
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got[0], model(x).numpy(), rtol=1e-5, atol=1e-5)
    b = popart.Builder(f.getvalue())
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul([out, out])], popart.ReductionType.Sum)
    g = popart.reservedGradientPrefix() + "x"
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [g]), loss, popart.ConstSGD(0.0),
                               deviceInfo=popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": x.numpy()}, anchors))
    xt = x.clone().requires_grad_(True)
    (model(xt) ** 2).sum().backward()
    np.testing.assert_allclose(anchors[g], xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_attention_mask_shorter_than_the_keys_and_the_probabilities_output():
    """A mask covering fewer keys than there are (the rest masked) and the
    probabilities as qk_matmul_output (mode 3): onnx's reference evaluator (onnxruntime
    asks the mask to cover every key)."""
    feeds = {"q": f32(1, 2, 3, 4), "k": f32(1, 2, 5, 4), "v": f32(1, 2, 5, 4), "m": RNG.random((3, 3)) < 0.7}
    feeds["m"][:, 0] = True
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y", "", "", "p"], qk_matmul_output_mode=3)
    check([node], feeds, ["y", "p"], opset=23, rtol=1e-5, atol=1e-6, reference="onnx")


@pytest.mark.parametrize("utype", [TensorProto.UINT32, TensorProto.UINT16])
def test_uint32_and_uint16_operators_equal_onnxruntime(utype):
    """uint32 / uint16 values as int64 in range: casts in (negative integers wrap),
    arithmetic wrapping modulo 2^bits, division and remainder, shifts, comparisons,
    casts out to float, int32 and uint64."""
    bits = 32 if utype == TensorProto.UINT32 else 16
    x = np.array([-1, 0, 7, 2 ** (bits - 1) + 5, 3 * 2 ** (bits - 2), 12345 % 2 ** bits], np.int64)
    y = np.array([3, 1, 2 ** (bits - 1), 9, 2, 7], np.int64)
    nodes = [helper.make_node("Cast", ["x"], ["ux"], to=utype), helper.make_node("Cast", ["y"], ["uy"], to=utype),
             helper.make_node("Add", ["ux", "uy"], ["add"]), helper.make_node("Sub", ["uy", "ux"], ["sub"]),
             helper.make_node("Mul", ["ux", "uy"], ["mul"]), helper.make_node("Div", ["ux", "uy"], ["div"]),
             helper.make_node("Mod", ["ux", "uy"], ["mod"]),
             helper.make_node("BitShift", ["ux", "three"], ["shl"], direction="LEFT"),
             helper.make_node("BitShift", ["ux", "three"], ["shr"], direction="RIGHT"),
             helper.make_node("Greater", ["ux", "uy"], ["gt"])]
    outs = ["gt"]
    for name in ("add", "sub", "mul", "div", "mod", "shl", "shr"):
        nodes.append(helper.make_node("Cast", [name], [name + "_i64"], to=TensorProto.INT64))
        outs.append(name + "_i64")
    nodes += [helper.make_node("Cast", ["mul"], ["mul_f"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["add"], ["add_i32"], to=TensorProto.INT32),
              helper.make_node("Cast", ["sub"], ["sub_u64"], to=TensorProto.UINT64),
              helper.make_node("Cast", ["sub_u64"], ["sub_u64_f"], to=TensorProto.DOUBLE)]
    outs += ["mul_f", "add_i32", "sub_u64_f"]
    three = helper.make_tensor("three", utype, [], [3])
    check_exact(nodes, {"x": x, "y": y}, outs, inits=[three])
