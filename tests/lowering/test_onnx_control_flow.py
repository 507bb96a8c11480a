"""ONNX Loop, Scan and the sequence operators (lowering/onnx_control_flow.py):
unrolled at compile time, equal to onnxruntime in inference, and training
through them as PyTorch trains the same loop; trip counts and conditions
computed from the graph inputs are clear PopART errors naming the node."""

import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from kernel_tolerance import assert_float32_close
from tilefx import popart

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(0)


def cpu():
    return popart.DeviceManager().createCpuDevice()


def infer(proto: bytes, feeds: dict, outs: list[str], bps: int = 1, shapes=None) -> dict:
    """tilefx's anchors of `outs` for `feeds` (a leading batches-per-step axis if bps > 1)."""
    s = popart.InferenceSession(proto, popart.DataFlow(bps, outs), cpu(), inputShapeInfo=shapes)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO(feeds, anchors))
    return anchors


def assert_equal_to_onnxruntime(proto: bytes, feeds: dict, rtol=1e-6, atol=1e-7):
    """Equal to onnxruntime within float rounding. A float result is a sum
    of terms of about the output's largest magnitude (a scan's products,
    softmaxes, recurrences), and two correct summation orders (one kernel
    thread or two, onnxruntime's, another CPU's vector width) differ by a few
    units in the last place of those terms, not of the element: atol is at
    least 4 ulp of the largest |reference|. A recurrence carries each step's
    rounding into the next, so where that is not enough the rule of
    tests/kernel_tolerance.py decides: onnxruntime runs the graph once more
    in float64, and ours must be as close to that as onnxruntime's float32
    result is."""
    outs = [o.name for o in onnx.load_model_from_string(proto).graph.output]
    got = infer(proto, feeds, outs)
    ref = ort.InferenceSession(proto).run(outs, feeds)
    ref64 = None
    for name, r in zip(outs, ref):
        assert got[name].shape == r.shape, (name, got[name].shape, r.shape)
        tol = atol
        if r.dtype.kind == "f" and r.size and np.isfinite(r).any():
            tol = max(atol, 4 * float(np.finfo(r.dtype).eps) * float(np.abs(r[np.isfinite(r)]).max()))
        try:
            np.testing.assert_allclose(got[name], r, rtol=rtol, atol=tol, err_msg=name)
        except AssertionError:
            if r.dtype != np.float32:
                raise
            if ref64 is None:
                ref64 = dict(zip(outs, float64_onnxruntime(proto, feeds, outs)))
            assert_float32_close(got[name], r, ref64[name], what=name, reference="onnxruntime")


def float64_onnxruntime(proto: bytes, feeds: dict, outs: list[str]) -> list[np.ndarray]:
    """onnxruntime's results of the graph with every float32 tensor (inputs,
    initializers, constants, casts, value infos, subgraphs) made float64."""
    m = onnx.load_model_from_string(proto)

    def widen_type(t):
        if t.HasField("tensor_type") and t.tensor_type.elem_type == F32:
            t.tensor_type.elem_type = TensorProto.DOUBLE
        for inner in (t.sequence_type.elem_type, t.optional_type.elem_type):
            if inner.ByteSize():
                widen_type(inner)

    def widen_tensor(t):
        if t.data_type == F32:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))

    def widen(g):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            widen_type(v.type)
        for t in g.initializer:
            widen_tensor(t)
        for n in g.node:
            for a in n.attribute:
                if a.name == "to" and n.op_type in ("Cast", "CastLike") and a.i == F32:
                    a.i = TensorProto.DOUBLE
                if a.type == onnx.AttributeProto.TENSOR:
                    widen_tensor(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    widen(a.g)
                for sub in a.graphs:
                    widen(sub)

    widen(m.graph)
    wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    return ort.InferenceSession(m.SerializeToString()).run(outs, wide)


def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


class RecurrentLoop(torch.nn.Module):
    """A scripted `for` over the first axis: a loop-carried state and a list of the
    states (the TorchScript exporter's Loop with a SequenceInsert scan of them)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = torch.zeros_like(x[0])
        states: list[torch.Tensor] = []
        for i in range(x.size(0)):
            h = torch.tanh(self.lin(x[i]) + h)
            states.append(h)
        return h, torch.stack(states)


class RowLoop(torch.nn.Module):
    """`for row in x`: a Loop whose body gathers the row by its iteration number."""

    def forward(self, x):
        h = torch.zeros_like(x[0])
        for row in x:
            h = h * 0.5 + row
        return h


def export_scripted(module, x, opset, **kw) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(module), (x,), f, dynamo=False, opset_version=opset,
                          input_names=["x"], **kw)
    return f.getvalue()


@pytest.mark.parametrize("make", [RecurrentLoop, RowLoop])
@pytest.mark.parametrize("opset", [13, 17])
def test_scripted_for_loops_equal_onnxruntime(make, opset):
    torch.manual_seed(0)
    x = torch.randn(5, 2, 4)
    proto = export_scripted(make().eval(), x, opset)
    ops = {n.op_type for n in onnx.load_model_from_string(proto).graph.node}
    assert "Loop" in ops
    assert_equal_to_onnxruntime(proto, {"x": x.numpy()})


def test_loop_over_a_dynamic_axis_fixed_by_input_shape_info():
    """With a dynamic first axis the trip count is Shape(x)[0]: the session's
    InputShapeInfo makes it known at compile time, and the loop unrolls."""
    torch.manual_seed(0)
    x = torch.randn(3, 2, 4)
    proto = export_scripted(RecurrentLoop().eval(), x, 17, dynamic_axes={"x": {0: "steps"}})
    info = popart.InputShapeInfo()
    info.add("x", popart.TensorInfo("FLOAT", [3, 2, 4]))
    outs = [o.name for o in onnx.load_model_from_string(proto).graph.output]
    got = infer(proto, {"x": x.numpy()}, outs, shapes=info)
    for name, r in zip(outs, ort.InferenceSession(proto).run(outs, {"x": x.numpy()})):
        np.testing.assert_allclose(got[name], r, rtol=1e-6, atol=1e-7)


def _counting_loop(trip_count_init: bool, cond_limit: int | None) -> onnx.ModelProto:
    """A Loop built with onnx.helper: trip count 4 (a Constant node or an initializer),
    two loop-carried values (a running product with x and the iteration number summed
    in, a counter), a scan output of each step's state, a body initializer and a body If
    on the iteration number; optionally an exit condition on the counter (known at
    compile time: `i < cond_limit`)."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=F32),
        helper.make_node("Mul", ["h", "x"], ["hx"]),
        helper.make_node("Add", ["hx", "i_f"], ["h1"]),
        helper.make_node("Mul", ["h1", "scale"], ["h_out"]),
        helper.make_node("Add", ["count", "one"], ["count_out"]),
        helper.make_node("Mod", ["i", "two"], ["odd"]),
        helper.make_node("Cast", ["odd"], ["odd_b"], to=BOOL),
        helper.make_node("If", ["odd_b"], ["step"],
                         then_branch=helper.make_graph([helper.make_node("Neg", ["h_out"], ["t"])], "then",
                                                       [], [vi("t", F32, [2, 3])]),
                         else_branch=helper.make_graph([helper.make_node("Abs", ["h_out"], ["e"])], "else",
                                                       [], [vi("e", F32, [2, 3])])),
    ]
    if cond_limit is None:
        body_nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"]))
    else:
        body_nodes.append(helper.make_node("Less", ["count_out", "limit"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes, "body", [vi("i", I64, []), vi("cond", BOOL, []), vi("h", F32, [2, 3]), vi("count", I64, [])],
        [vi("cond_out", BOOL, []), vi("h_out", F32, [2, 3]), vi("count_out", I64, []), vi("step", F32, [2, 3])],
        [numpy_helper.from_array(np.float32(0.75), "scale"), numpy_helper.from_array(np.int64(1), "one"),
         numpy_helper.from_array(np.int64(2), "two")])
    inits = [numpy_helper.from_array(np.zeros((2, 3), np.float32) + 1, "h0"),
             numpy_helper.from_array(np.int64(0), "c0"), numpy_helper.from_array(np.array(True), "go")]
    nodes = []
    if trip_count_init:
        inits.append(numpy_helper.from_array(np.int64(4), "M"))
    else:
        nodes.append(helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.int64(4))))
    if cond_limit is not None:
        inits.append(numpy_helper.from_array(np.int64(cond_limit), "limit"))
    nodes.append(helper.make_node("Loop", ["M", "go", "h0", "c0"], ["h_final", "count_final", "steps"],
                                  body=body, name="loop"))
    return model(nodes, [vi("x", F32, [2, 3])],
                 [vi("h_final", F32, [2, 3]), vi("count_final", I64, []), vi("steps", F32, None)], inits)


@pytest.mark.parametrize("trip_count_init,cond_limit", [(False, None), (True, None), (True, 3), (False, 9)])
def test_helper_built_loop_equals_onnxruntime(trip_count_init, cond_limit):
    """Trip count from a Constant or an initializer; an exit condition known at compile
    time stops the loop early (3) or not at all (9 > 4); the scan output stacks the
    steps that ran."""
    proto = _counting_loop(trip_count_init, cond_limit).SerializeToString()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    assert_equal_to_onnxruntime(proto, {"x": x})
    steps = infer(proto, {"x": x}, ["steps"])["steps"]
    assert steps.shape == (3 if cond_limit == 3 else 4, 2, 3)


def test_nested_loops_and_a_loop_of_zero_iterations():
    """A Loop in a Loop's body (the inner one sees the outer body's values), and a
    trip count of 0: the loop-carried values are the initial ones and the scan output
    is empty, with its element shape from the body's declared output."""
    inner = helper.make_graph(
        [helper.make_node("Add", ["a", "row"], ["a_out"]), helper.make_node("Identity", ["ci"], ["ci_out"])],
        "inner", [vi("j", I64, []), vi("ci", BOOL, []), vi("a", F32, [3])],
        [vi("ci_out", BOOL, []), vi("a_out", F32, [3])])
    outer = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Loop", ["three", "", "acc"], ["acc_out"], body=inner),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "outer", [vi("i", I64, []), vi("c", BOOL, []), vi("acc", F32, [3])],
        [vi("c_out", BOOL, []), vi("acc_out", F32, [3]), vi("sq", F32, [3])])
    inits = [numpy_helper.from_array(np.int64(2), "M"), numpy_helper.from_array(np.int64(3), "three"),
             numpy_helper.from_array(np.int64(0), "zero"), numpy_helper.from_array(np.zeros(3, np.float32), "a0")]
    m = model([helper.make_node("Loop", ["M", "", "a0"], ["y", "sqs"], body=outer),
               helper.make_node("Gather", ["x", "zero"], ["x_row"], axis=0),
               helper.make_node("Loop", ["zero", "", "x_row"], ["same", "none"], body=outer)],
              [vi("x", F32, [2, 3])], [vi("y", F32, [3]), vi("sqs", F32, None), vi("same", F32, [3]),
                                       vi("none", F32, None)], inits)
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    proto = m.SerializeToString()
    assert_equal_to_onnxruntime(proto, {"x": x})
    got = infer(proto, {"x": x}, ["none", "same"])
    assert got["none"].shape == (0, 3)
    np.testing.assert_array_equal(got["same"], x[0])


def test_scan_axes_and_directions_equal_onnxruntime():
    """Scan (opsets 9 and 16): two states, two scan inputs (one along axis 1, one
    reversed), two scan outputs (one along axis 1, one reversed)."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["a_t", "w"], ["aw"]),
         helper.make_node("Add", ["h", "aw"], ["hs"]),
         helper.make_node("Mul", ["hs", "b_t"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["h_out"]),
         helper.make_node("Add", ["n", "b_t"], ["n_out"]),
         helper.make_node("Relu", ["h_out"], ["y_t"]),
         helper.make_node("Sigmoid", ["n_out"], ["z_t"])],
        "body", [vi("h", F32, [2, 3]), vi("n", F32, [2, 3]), vi("a_t", F32, [2, 4]), vi("b_t", F32, [2, 3])],
        [vi("h_out", F32, [2, 3]), vi("n_out", F32, [2, 3]), vi("y_t", F32, [2, 3]), vi("z_t", F32, [2, 3])])
    w = numpy_helper.from_array(RNG.standard_normal((4, 3)).astype(np.float32), "w")
    for opset in (9, 16):
        attrs = dict(num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[0, 1],
                     scan_output_axes=[1, 0], scan_output_directions=[0, 1])
        m = model([helper.make_node("Scan", ["h0", "n0", "a", "b"], ["h", "n", "ys", "zs"], body=body, **attrs)],
                  [vi("h0", F32, [2, 3]), vi("n0", F32, [2, 3]), vi("a", F32, [2, 5, 4]), vi("b", F32, [5, 2, 3])],
                  [vi(o, F32, None) for o in ("h", "n", "ys", "zs")], [w], opset=opset)
        feeds = {"h0": RNG.standard_normal((2, 3)).astype(np.float32),
                 "n0": RNG.standard_normal((2, 3)).astype(np.float32),
                 "a": RNG.standard_normal((2, 5, 4)).astype(np.float32),
                 "b": RNG.standard_normal((5, 2, 3)).astype(np.float32)}
        assert_equal_to_onnxruntime(m.SerializeToString(), feeds)


def test_sequence_operators_equal_onnxruntime():
    """SplitToSequence (sizes, chunk size, keepdims), SequenceAt / Insert / Erase /
    Length / Construct and ConcatFromSequence (concatenated, stacked)."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
        helper.make_node("SplitToSequence", ["x", "two"], ["chunks"], axis=1),
        helper.make_node("SequenceAt", ["parts", "minus_one"], ["last"]),
        helper.make_node("SequenceErase", ["rows", "zero"], ["tail"]),
        helper.make_node("SequenceInsert", ["tail", "y", "zero"], ["front"]),
        helper.make_node("SequenceLength", ["chunks"], ["n_chunks"]),
        helper.make_node("ConcatFromSequence", ["front"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("ConcatFromSequence", ["chunks"], ["again"], axis=1),
        helper.make_node("SequenceConstruct", ["last", "last"], ["pair"]),
        helper.make_node("ConcatFromSequence", ["pair"], ["doubled"], axis=0),
    ]
    inits = [numpy_helper.from_array(np.array([2, 3], np.int64), "sizes"),
             numpy_helper.from_array(np.int64(2), "two"), numpy_helper.from_array(np.int64(-1), "minus_one"),
             numpy_helper.from_array(np.int64(0), "zero")]
    m = model(nodes, [vi("x", F32, [3, 5]), vi("y", F32, [5])],
              [vi(o, F32, None) for o in ("last", "stacked", "again", "doubled")] + [vi("n_chunks", I64, None)],
              inits)
    feeds = {"x": RNG.standard_normal((3, 5)).astype(np.float32), "y": RNG.standard_normal(5).astype(np.float32)}
    assert_equal_to_onnxruntime(m.SerializeToString(), feeds, rtol=0, atol=0)


def test_training_through_a_scripted_loop_equals_pytorch():
    """The exported RecurrentLoop with a loss trains in a TrainingSession as the torch
    module trains: the gradient flows through every unrolled iteration to the shared
    weights (loss of each step, the weights after three SGD steps)."""
    torch.manual_seed(0)
    module = RecurrentLoop()
    x0 = torch.randn(4, 2, 4)
    proto = export_scripted(module, x0, 17, output_names=["h", "states"], do_constant_folding=False)
    b = popart.Builder(proto)
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul(["states", "states"])], popart.ReductionType.Mean)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss, popart.ConstSGD(0.1),
                               deviceInfo=cpu())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(4, 2, 4)
        s.run(popart.PyStepIO({"x": x.numpy()}, anchors))
        opt.zero_grad()
        ref = (module(x)[1] ** 2).mean()
        ref.backward()
        opt.step()
        np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-6)
    weights = {"lin.weight": np.empty((4, 4), np.float32), "lin.bias": np.empty(4, np.float32)}
    s.weightsToHost()
    s.readWeights(popart.PyWeightsIO(weights))
    np.testing.assert_allclose(weights["lin.weight"], module.lin.weight.detach().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(weights["lin.bias"], module.lin.bias.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_training_through_scan_gives_torchs_gradients():
    """A Scan over the time axis with a weight inside the body: the gradients of the
    weight and of the scanned input (anchored as PopART names them) equal torch's."""
    w_np = RNG.standard_normal((4, 3)).astype(np.float32)
    x_np = RNG.standard_normal((5, 2, 4)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "w"], ["xw"]), helper.make_node("Add", ["h", "xw"], ["s"]),
         helper.make_node("Tanh", ["s"], ["h_out"]), helper.make_node("Identity", ["h_out"], ["y_t"])],
        "body", [vi("h", F32, [2, 3]), vi("x_t", F32, [2, 4])], [vi("h_out", F32, [2, 3]), vi("y_t", F32, [2, 3])])
    m = model([helper.make_node("Scan", ["h0", "x"], ["h", "ys"], body=body, num_scan_inputs=1),
               helper.make_node("Mul", ["ys", "ys"], ["sq"])],
              [vi("x", F32, [5, 2, 4])], [vi("sq", F32, [5, 2, 3])],
              [numpy_helper.from_array(w_np, "w"), numpy_helper.from_array(np.zeros((2, 3), np.float32), "h0")])
    b = popart.Builder(m.SerializeToString())
    loss = b.aiGraphcore.identityloss(["sq"], popart.ReductionType.Mean)
    g = popart.reservedGradientPrefix()
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss, g + "w", g + "x"]), loss,
                               popart.ConstSGD(0.0), deviceInfo=cpu())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": x_np}, anchors))
    x = torch.tensor(x_np, requires_grad=True)
    w = torch.tensor(w_np, requires_grad=True)
    h, ys = torch.zeros(2, 3), []
    for t in range(5):
        h = torch.tanh(h + x[t] @ w)
        ys.append(h)
    ref = (torch.stack(ys) ** 2).mean()
    ref.backward()
    np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-6)
    np.testing.assert_allclose(anchors[g + "w"], w.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(anchors[g + "x"], x.grad.numpy(), rtol=1e-5, atol=1e-7)


def _data_dependent(trip_from_input: bool) -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["h", "x"], ["h_out"]),
         helper.make_node("ReduceSum", ["h_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "ten"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("c", BOOL, []), vi("h", F32, [3])], [vi("cond_out", BOOL, []), vi("h_out", F32, [3])],
        [numpy_helper.from_array(np.float32(10), "ten")])
    inputs = [vi("x", F32, [3])] + ([vi("n", I64, [])] if trip_from_input else [])
    inits = [numpy_helper.from_array(np.zeros(3, np.float32), "h0"), numpy_helper.from_array(np.array(True), "go")]
    if not trip_from_input:
        inits.append(numpy_helper.from_array(np.int64(100), "n"))
    return model([helper.make_node("Loop", ["n", "go", "h0"], ["y"], body=body, name="until_ten")],
                 inputs, [vi("y", F32, [3])], inits)


def test_data_dependent_trip_counts_and_conditions_are_popart_errors():
    with pytest.raises(popart.popart_exception, match=r"'until_ten' \(Loop\): its trip count M is computed "
                                                      r"from the graph inputs.*must be known at compile time"):
        infer(_data_dependent(True).SerializeToString(), {"x": np.ones(3, np.float32), "n": np.int64(3)}, ["y"])
    with pytest.raises(popart.popart_exception, match=r"'until_ten' \(Loop\): its condition \(the body's first "
                                                      r"output\) is computed from the graph inputs"):
        infer(_data_dependent(False).SerializeToString(), {"x": np.ones(3, np.float32)}, ["y"])


def test_malformed_control_flow_is_a_clear_error():
    """An endless loop, a body of the wrong arity, an unsupported operator inside a
    body, a sequence as a session output and a Scan of opset 8."""
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]),
                              helper.make_node("Neg", ["h"], ["h_out"])], "body",
                             [vi("i", I64, []), vi("c", BOOL, []), vi("h", F32, [3])],
                             [vi("c_out", BOOL, []), vi("h_out", F32, [3])])
    endless = model([helper.make_node("Loop", ["", "", "x"], ["y"], body=body, name="forever")],
                    [vi("x", F32, [3])], [vi("y", F32, [3])])
    with pytest.raises(popart.popart_exception, match=r"'forever' \(Loop\): it has neither a trip count nor a "
                                                      "condition"):
        infer(endless.SerializeToString(), {"x": np.ones(3, np.float32)}, ["y"])
    too_long = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="long")],
                     [vi("x", F32, [3])], [vi("y", F32, [3])], [numpy_helper.from_array(np.int64(10**6), "M")])
    with pytest.raises(popart.popart_exception, match=r"'long' \(Loop\): it runs more than the 4096 iterations "
                                                      r"tilefx unrolls at compile time \(trip count 1000000\)"):
        infer(too_long.SerializeToString(), {"x": np.ones(3, np.float32)}, ["y"])
    arity = model([helper.make_node("Loop", ["M", "", "x", "x"], ["y", "z"], body=body, name="arity")],
                  [vi("x", F32, [3])], [vi("y", F32, [3])], [numpy_helper.from_array(np.int64(2), "M")])
    with pytest.raises(popart.popart_exception, match=r"'arity' \(Loop\): the body takes 3 inputs, the node "
                                                      r"gives it 2 \+ 2"):
        infer(arity.SerializeToString(), {"x": np.ones(3, np.float32)}, ["y"])
    unsupported = helper.make_graph([helper.make_node("Det", ["h"], ["h_out"], name="inner_det"),
                                     helper.make_node("Identity", ["c"], ["c_out"])], "body",
                                    [vi("i", I64, []), vi("c", BOOL, []), vi("h", F32, [3])],
                                    [vi("c_out", BOOL, []), vi("h_out", F32, [3])])
    det = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=unsupported)],
                [vi("x", F32, [3])], [vi("y", F32, [3])], [numpy_helper.from_array(np.int64(2), "M")])
    with pytest.raises(popart.popart_exception, match=r"unsupported ONNX operator ai\.onnx::Det.*'inner_det'"):
        infer(det.SerializeToString(), {"x": np.ones(3, np.float32)}, ["y"])
    seq = model([helper.make_node("SplitToSequence", ["x"], ["parts"])], [vi("x", F32, [3])],
                [helper.make_tensor_sequence_value_info("parts", F32, None)])
    with pytest.raises(popart.popart_exception, match="'parts' is a sequence of tensors"):
        infer(seq.SerializeToString(), {"x": np.ones(3, np.float32)}, ["parts"])
    scan_body = helper.make_graph([helper.make_node("Add", ["s", "x_t"], ["s_out"])], "body",
                                  [vi("s", F32, [3]), vi("x_t", F32, [3])], [vi("s_out", F32, [3])])
    old = model([helper.make_node("Scan", ["", "s0", "x"], ["s"], body=scan_body, num_scan_inputs=1, name="old")],
                [vi("s0", F32, [1, 3]), vi("x", F32, [1, 2, 3])], [vi("s", F32, [1, 3])], opset=8)
    with pytest.raises(popart.popart_exception, match=r"'old' \(Scan\): Scan of opset 8"):
        infer(old.SerializeToString(), {"s0": np.ones((1, 3), np.float32), "x": np.ones((1, 2, 3), np.float32)},
              ["s"])


class _CountedWhile(torch.nn.Module):
    """torch's while_loop with a counter: the dynamo exporter's Loop without a trip
    count, its condition computed from the counter (known at compile time)."""

    def forward(self, x):
        def cond(i, x):
            return i < 3

        def body(i, x):
            return i + 1, x * 2 + 1

        return torch._higher_order_ops.while_loop(cond, body, (torch.tensor(0), x))[1]


class _DataWhile(torch.nn.Module):
    """A while_loop until the data is large: a data-dependent exit."""

    def forward(self, x):
        def cond(x):
            return x.abs().sum() < 100

        def body(x):
            return (x * 2 + 1,)

        return torch._higher_order_ops.while_loop(cond, body, (x,))[0]


def _dynamo(module, x) -> bytes:
    import logging

    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            torch.onnx.export(module, (x,), f, dynamo=True, input_names=["x"])
        finally:
            logging.disable(logging.NOTSET)
    return f.getvalue()


def test_dynamo_exported_while_loops():
    x = torch.randn(2, 3)
    proto = _dynamo(_CountedWhile(), x)
    loop = next(n for n in onnx.load_model_from_string(proto).graph.node if n.op_type == "Loop")
    assert loop.input[0] == ""  # no trip count: the condition ends it
    assert_equal_to_onnxruntime(proto, {"x": x.numpy()})
    out = onnx.load_model_from_string(proto).graph.output[0].name
    np.testing.assert_allclose(infer(proto, {"x": x.numpy()}, [out])[out], (x * 8 + 7).numpy(), rtol=1e-6)
    data = _dynamo(_DataWhile(), x)
    with pytest.raises(popart.popart_exception, match=r"\(Loop\): its condition is computed from the graph "
                                                      "inputs"):
        infer(data, {"x": x.numpy()}, [onnx.load_model_from_string(data).graph.output[0].name])


def test_builder_subgraphs_loop_scan_and_if_equal_onnxruntime():
    """PopART's way of building control flow: createSubgraphBuilder for a Loop body
    (untyped carried inputs, a weight of the parent graph), a Scan body and If branches
    (addInputTensorFromParentGraph), aiOnnx.loop / scan / logical_if; then training
    through the loop equals torch's unrolled loop."""
    w_np = RNG.standard_normal((3, 3)).astype(np.float32) * 0.5
    x_np = RNG.standard_normal((2, 3)).astype(np.float32)
    b = popart.Builder(opsets={"ai.onnx": 13, "ai.graphcore": 1})
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = b.addInitializedInputTensor(w_np, "w")
    trips = b.aiOnnx.constant(np.array(3, np.int64), "trips")
    go = b.aiOnnx.constant(np.array(True), "go")
    body = b.createSubgraphBuilder()
    body.setGraphName("body")
    body.addInputTensor(popart.TensorInfo("INT64", []), "i")
    keep_going = body.addInputTensor(popart.TensorInfo("BOOL", []), "keep_going")
    h_in = body.addUntypedInputTensor("h")
    body.addInputTensorFromParentGraph(w)
    h_out = body.aiOnnx.tanh([body.aiOnnx.matmul([h_in, w])])
    body.addOutputTensor(keep_going)
    body.addOutputTensor(h_out)
    one = body.aiOnnx.constant(np.array([1], np.int64), "one")
    body.addOutputTensor(body.aiOnnx.reducesum([h_out, one], keepdims=0))
    h, sums = b.aiOnnx.loop([trips, go, x], 2, body)

    scan = b.createSubgraphBuilder()
    acc = scan.addUntypedInputTensor("acc")
    row = scan.addUntypedInputTensor("row")
    total = scan.aiOnnx.add([acc, row])
    scan.addOutputTensor(total)
    scan.addOutputTensor(scan.aiOnnx.mul([total, row]))
    zero = b.aiOnnx.constant(np.zeros(2, np.float32), "zero")
    acc_final, prods = b.aiOnnx.scan([zero, sums], num_outputs=2, body=scan, num_scan_inputs=1)

    then, other = b.createSubgraphBuilder(), b.createSubgraphBuilder()
    for branch, op in ((then, "add"), (other, "sub")):
        branch.addInputTensorFromParentGraph(h)
        branch.addInputTensorFromParentGraph(x)
        branch.addOutputTensor(getattr(branch.aiOnnx, op)([h, x]))
    positive = b.aiOnnx.greater([b.aiOnnx.reducesum([acc_final], keepdims=0),
                                 b.aiOnnx.constant(np.array(0.0, np.float32))])
    picked = b.aiOnnx.logical_if([positive], 1, other, then)[0]
    outs = [h, sums, acc_final, prods, picked]
    for o in outs:
        b.addOutputTensor(o)
    proto = b.getModelProto()
    assert b.getTensorShape(prods) == [3, 2]
    got = infer(proto, {x: x_np}, outs)
    ref = ort.InferenceSession(proto).run(outs, {x: x_np})
    for name, r in zip(outs, ref):
        np.testing.assert_allclose(got[name], r, rtol=1e-6, atol=1e-6, err_msg=name)

    loss = b.aiGraphcore.identityloss([prods], popart.ReductionType.Sum)
    g = popart.reservedGradientPrefix()
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss, g + w, g + x]), loss,
                               popart.ConstSGD(0.0), deviceInfo=cpu())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: x_np}, anchors))
    xt, wt = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    state, acc_t, prod_list = xt, torch.zeros(2), []
    for _ in range(3):
        state = torch.tanh(state @ wt)
        acc_t = acc_t + state.sum(1)
        prod_list.append(acc_t * state.sum(1))
    ref_loss = torch.stack(prod_list).sum()
    ref_loss.backward()
    np.testing.assert_allclose(anchors[loss], ref_loss.item(), rtol=1e-6)
    np.testing.assert_allclose(anchors[g + w], wt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(anchors[g + x], xt.grad.numpy(), rtol=1e-5, atol=1e-6)

    with pytest.raises(popart.popart_exception, match="addUntypedInputTensor"):
        popart.Builder().addUntypedInputTensor()
    empty = b.createSubgraphBuilder()
    with pytest.raises(popart.popart_exception, match="has no outputs"):
        b.aiOnnx.loop([trips, go, x], 1, empty)


@pytest.mark.parametrize("inputs", ["untyped", "with_info", "from_parent"])
def test_graphcore_call_runs_its_subgraph_inline(inputs):
    """aiGraphcore.call (PopART's subgraph call) with the callee's inputs untyped, typed
    or taken from the parent graph (which makes them its inputs, as PopART counts them),
    a weight of the parent used inside: inference and the gradients through two calls
    equal torch's; PopART's message when the counts do not match the callee's."""
    d = [RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    b = popart.Builder(opsets={"ai.onnx": 13, "ai.graphcore": 1})
    i0, i1, i2 = (b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), f"i{k}") for k in range(3))
    w = b.addInitializedInputTensor(np.full((2, 3), 0.5, np.float32), "w")
    sub = b.createSubgraphBuilder()
    if inputs == "untyped":
        a, c = sub.addUntypedInputTensor(), sub.addUntypedInputTensor()
    elif inputs == "with_info":
        a, c = (sub.addInputTensor(popart.TensorInfo("FLOAT", [2, 3])) for _ in range(2))
    else:
        sub.addInputTensorFromParentGraph(i0)
        sub.addInputTensorFromParentGraph(i1)
        a, c = i0, i1
    sub.addOutputTensor(sub.aiOnnx.mul([sub.aiOnnx.add([a, c]), w]))
    first = b.aiGraphcore.call([i0, i1], 1, sub)[0]
    second = b.aiGraphcore.call([first, i2], 1, sub)[0]
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul([second, second])], popart.ReductionType.Sum)
    g = popart.reservedGradientPrefix()
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [second, g + w, g + i0]), loss,
                               popart.ConstSGD(0.0), deviceInfo=cpu())
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({i0: d[0], i1: d[1], i2: d[2]}, anchors))
    x0, wt = torch.tensor(d[0], requires_grad=True), torch.full((2, 3), 0.5, requires_grad=True)
    ref = ((x0 + torch.tensor(d[1])) * wt + torch.tensor(d[2])) * wt
    (ref * ref).sum().backward()
    np.testing.assert_allclose(anchors[second], ref.detach().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(anchors[g + w], wt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(anchors[g + i0], x0.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(popart.popart_exception, match=r"For CallOp 'c', number of inputs \(3\) does not match "
                                                      r"that of the callee subgraph \(2\)"):
        b.aiGraphcore.call([i0, i1, i2], 1, sub, "c")
