"""PopART conventions its own integration tests rely on (anchor, StepIO and
Builder behaviour that PopART user guide, 5 "Executing graphs" implies but does not spell out), checked
against numpy and PyTorch: accumulator anchors, EVERYN with gradient
accumulation, buffers checked by element count, AnchorReturnType's messages,
Builder.reshape_const."""

import numpy as np
import onnx
import pytest
import torch

from tilefx import popart

RNG = np.random.default_rng(3)


def ipus(n):
    return popart.DeviceManager().createIpuModelDevice({"numIPUs": n})


def linear_nll(batch, w0):
    """x @ w -> softmax -> nll (mean): a weight whose gradient is easy to recompute in torch."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [batch, 3]), "x")
    lbl = b.addInputTensor(popart.TensorInfo("INT32", [batch]), "label")
    w = b.addInitializedInputTensor(w0, "w")
    probs = b.aiOnnx.softmax([b.aiOnnx.matmul([x, w])], axis=1)
    return b, x, lbl, w, b.aiGraphcore.nllloss([probs, lbl])


def torch_grad(w, x, lbl):
    w = torch.tensor(w, requires_grad=True)
    torch.nn.functional.nll_loss(torch.log_softmax(torch.tensor(x) @ w, 1), torch.tensor(lbl).long()).backward()
    return w.grad.numpy()


def test_accumulator_anchor_is_each_replicas_running_gradient_sum():
    """popart.reservedAccumPrefix() + weight: the accumulator after every micro-batch
    (ALL: [batchesPerStep, accumulationFactor, replicas, *shape]); the next step's weight is
    the last one minus lr x the replicas' accumulators summed (PopART's anchor_output_test)."""
    bps, af, rf, lr = 2, 3, 2, 0.5
    w0 = RNG.standard_normal((3, 4)).astype(np.float32)
    b, x, lbl, w, loss = linear_nll(2, w0)
    accum = popart.reservedAccumPrefix() + w
    assert accum == "Accum___w"
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = af
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = rf
    art = popart.AnchorReturnType("ALL")
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(bps, {accum: art, w: art}),
                               loss, popart.ConstSGD(lr), deviceInfo=ipus(rf), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    assert anchors[accum].shape == (bps, af, rf, 3, 4)
    xs = RNG.standard_normal((bps, af, rf, 2, 3)).astype(np.float32)
    ls = RNG.integers(0, 4, (bps, af, rf, 2)).astype(np.int32)
    s.run(popart.PyStepIO({x: xs, lbl: ls}, anchors))
    weight = w0
    for step in range(bps):
        want = np.zeros((rf, 3, 4), np.float32)
        for m in range(af):
            for r in range(rf):
                np.testing.assert_allclose(anchors[w][step, m, r], weight, rtol=1e-5, atol=1e-6)
                want[r] += torch_grad(weight, xs[step, m, r], ls[step, m, r])
            np.testing.assert_allclose(anchors[accum][step, m], want, rtol=1e-5, atol=1e-6)
        weight = weight - lr * want.sum(0)


def test_accumulator_anchor_needs_accumulation_and_a_weight():
    b, _x, _lbl, _w, loss = linear_nll(2, np.ones((3, 4), np.float32))
    proto = b.getModelProto()
    df = popart.DataFlow(1, [popart.reservedAccumPrefix() + "w"])
    with pytest.raises(popart.popart_exception, match="Accum___w.*gradient accumulation"):
        popart.TrainingSession(proto, df, loss, popart.ConstSGD(0.1), deviceInfo=ipus(1))
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    with pytest.raises(popart.popart_exception, match="Accum___x.*must name a weight"):
        popart.TrainingSession(proto, popart.DataFlow(1, ["Accum___x"]), loss, popart.ConstSGD(0.1),
                               deviceInfo=ipus(1), userOptions=opts)


def test_everyn_with_accumulation_counts_micro_batches():
    """PopART's batch counter counts micro-batches: EVERYN(2) with batchesPerStep 2 and
    accumulation 2 returns micro-batches 2 and 4 (its anchorreturntype test), in
    (batchesPerStep / N) x accumulationFactor slots."""
    b = popart.Builder()
    i = b.addInputTensor(popart.TensorInfo("FLOAT", [2]))
    o = b.aiOnnx.add([i, b.addInitializedInputTensor(np.zeros(2, np.float32), "w")])
    loss = b.aiGraphcore.l1loss([o], 0.0)
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    data = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 2)
    for art, want in [(popart.AnchorReturnType("EVERYN", 2), [[3, 4], [7, 8]]),
                      (popart.AnchorReturnType("EVERYN", 1), data),
                      (popart.AnchorReturnType("FINAL"), [7, 8]), (popart.AnchorReturnType("SUM"), [16, 20])]:
        s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, {o: art}), loss, popart.ConstSGD(0.01),
                                   deviceInfo=ipus(1), userOptions=opts)
        s.prepareDevice()
        s.weightsFromHost()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO({i: data}, anchors))
        np.testing.assert_array_equal(anchors[o], want)


def test_buffers_are_checked_by_their_number_of_elements():
    """PopART's StepIO checks element counts: a label buffer [bps, accumulation, replicas]
    for a [1]-shaped tensor runs, a wrong count names the tensor, both shapes and the count."""
    b, x, lbl, _w, loss = linear_nll(1, np.ones((3, 4), np.float32))
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(3, {loss: popart.AnchorReturnType("ALL")}),
                               loss, popart.ConstSGD(0.1), deviceInfo=ipus(1), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    anchors = s.initAnchorArrays()
    xs = RNG.standard_normal((3, 2, 1, 3)).astype(np.float32)
    s.run(popart.PyStepIO({x: xs, lbl: np.zeros((3, 2), np.int32)}, anchors))
    first = anchors[loss].copy()
    s.weightsFromHost()  # the same weights again: the same losses from a flat, differently shaped buffer
    s.run(popart.PyStepIO({x: xs.reshape(6, 3), lbl: np.zeros(6, np.int32)}, {loss: np.zeros((2, 3), np.float32)}))
    with pytest.raises(popart.popart_exception, match=r"'label'.*\(5,\).*\(3, 2, 1\).*6 elements"):
        s.run(popart.PyStepIO({x: xs, lbl: np.zeros(5, np.int32)}, anchors))
    with pytest.raises(popart.popart_exception, match=r"anchor 'Nll:0'.*\(7,\).*\(3, 2\).*6 elements"):
        s.run(popart.PyStepIO({x: xs, lbl: np.zeros(6, np.int32)}, {loss: np.zeros(7, np.float32)}))
    assert np.isfinite(first).all()


def test_anchor_return_type_errors_are_popart_messages():
    for args, msg in [(("INVALID",), "Invalid anchor return type ID supplied: INVALID"),
                      (("ALL", 2), "A return period should not be supplied for this anchor return type"),
                      (("EveryN", -1), "Anchor return period must be greater than zero"),
                      (("EveryN",), "Must specify return period with option 'EVERYN'")]:
        with pytest.raises(popart.popart_exception) as e:
            popart.AnchorReturnType(*args)
        assert e.value.args[0] == msg
    assert popart.AnchorReturnType("everyn", 4).rp() == 4 and popart.AnchorReturnType("final").str() == "FINAL"


def test_builder_reshape_const():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3, 4]))
    y = b.reshape_const(b.aiOnnx, [x], [6, 4])
    assert b.getTensorShape(y) == [6, 4]
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]),
                                popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    data = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    s.run(popart.PyStepIO({x: data}, anchors))
    np.testing.assert_array_equal(anchors[y], data.reshape(6, 4))


def test_strided_step_buffers_are_refused_as_popart_does():
    """PyStepIO reads and writes its arrays in place: a transposed (not C-contiguous)
    input or output array is a popart_exception saying so, from PyStepIO and from the
    callbacks of PyStepIOCallback; a transposed initializer or constant is fine."""
    b = popart.Builder()
    i = b.addInputTensor("INT32", [2, 2])
    v = RNG.integers(0, 100, (2, 2)).astype(np.int32).T
    o = b.aiOnnx.add([b.aiOnnx.identity([i]), b.aiOnnx.constant(v)])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [o]), ipus(1))
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    good = np.arange(4, dtype=np.int32).reshape(2, 2)
    with pytest.raises(popart.popart_exception, match="input array for tensor 'input'.*not c-contiguous"):
        popart.PyStepIO({i: good.T}, anchors)
    with pytest.raises(popart.popart_exception, match="output array for tensor 'Add:0'.*not c-contiguous"):
        popart.PyStepIO({i: good}, {o: np.zeros((2, 2), np.int32).T})
    for inp, out in [(good.T, np.zeros((2, 2), np.int32)), (good, np.zeros((2, 2), np.int32).T)]:
        with pytest.raises(popart.popart_exception, match="not c-contiguous"):
            s.run(popart.PyStepIOCallback(lambda _id, _p, x=inp: x, lambda _id: None,
                                          lambda _id, y=out: y, lambda _id: None))
    s.run(popart.PyStepIO({i: good}, anchors))
    np.testing.assert_array_equal(anchors[o], good + v)


def test_session_construction_errors_are_popart_messages(tmp_path):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    b.addOutputTensor(b.aiOnnx.relu([x]))
    with pytest.raises(popart.popart_exception) as e:
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, {}), ipus(1))
    assert e.value.args[0] == "User must specify an anchor tensor when doing inference."
    with pytest.raises(popart.popart_exception) as e:
        popart.InferenceSession(str(tmp_path / "nothing"), popart.DataFlow(1, {}), ipus(1))
    assert e.value.args[0].startswith("Failed to load a ModelProto from the string")


def test_out_of_memory_exception_has_the_summary_and_writes_it_to_the_report_directory(tmp_path):
    """A program that does not fit 4 tiles: OutOfMemoryException (a popart_exception) whose
    getSummaryReport() names the tile and the bytes, written to autoReport.directory."""
    b = popart.Builder()
    xs = [b.addInputTensor(popart.TensorInfo("FLOAT", [100, 100])) for _ in range(8)]
    out = b.aiOnnx.sum([b.aiOnnx.matmul([p, q]) for p in xs for q in xs])
    opts = popart.SessionOptions()
    opts.engineOptions = {"autoReport.outputGraphProfile": "true", "autoReport.directory": str(tmp_path / "r")}
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [out]),
                                popart.DeviceManager().createIpuModelDevice({"numIPUs": 1, "tilesPerIPU": 4}),
                                userOptions=opts)
    with pytest.raises(popart.popart_exception) as e:
        s.prepareDevice()
    assert type(e.value) is popart.OutOfMemoryException
    assert "tile" in e.value.getSummaryReport() and "bytes" in e.value.getSummaryReport()
    with open(e.value.getProfilePath()) as f:
        assert f.read().strip() == e.value.getSummaryReport()


def test_prepare_device_without_loading_the_engine(capfd):
    """prepareDevice(loadEngine=False) compiles ("Graph compiled" at INFO); the engine is loaded
    ("Engine loaded") by loadEngineAndConnectStreams or the first run; before a compile there
    is no engine to load. Log lines reach the stderr of the moment (here the capture)."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]))
    o = b.aiOnnx.add([x, x])
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(2, [o]), ipus(1))

    def logged():
        err = capfd.readouterr().err
        return "Graph compiled" in err, "Engine loaded" in err

    popart.getLogger().setLevel("INFO")
    try:
        with pytest.raises(popart.popart_exception, match="no compiled engine"):
            s.loadEngineAndConnectStreams()
        s.prepareDevice(loadEngine=False)
        assert logged() == (True, False)
        anchors = s.initAnchorArrays()
        data = RNG.standard_normal((2, 3)).astype(np.float32)
        s.run(popart.PyStepIO({x: data}, anchors))
        assert logged() == (False, True)
        s.run(popart.PyStepIO({x: data}, anchors))
        assert logged() == (False, False)
    finally:
        popart.getLogger().setLevel("OFF")
    np.testing.assert_array_equal(anchors[o], data + data)


def test_accumulation_options_are_checked_as_popart_does():
    b, _x, _lbl, _w, loss = linear_nll(2, np.ones((3, 4), np.float32))
    opts = popart.SessionOptions()
    opts.accumulationFactor = 4
    with pytest.raises(popart.popart_exception) as e:
        popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss, popart.ConstSGD(0.1),
                               deviceInfo=ipus(1), userOptions=opts)
    assert e.value.args[0].startswith("enableGradientAccumulation is false, but accumulationFactor > 1.")
    opts.enableGradientAccumulation = True
    with pytest.raises(popart.popart_exception) as e:
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [loss]), ipus(1), userOptions=opts)
    assert e.value.args[0].startswith("Gradient Accumulation only available when training")


def test_scalar_weights_stay_scalars(tmp_path):
    """A 0-d initializer is a 0-d weight: its info, gradient anchor, readWeights buffer
    and the file modelToHost writes keep shape [] (they became [1])."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4]))
    s0 = b.addInitializedInputTensor(np.float32(0.5), "s")
    loss = b.aiGraphcore.identityloss([b.aiOnnx.mul([x, s0])], popart.ReductionType.Sum)
    grad = popart.reservedGradientPrefix() + s0
    sess = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [grad]), loss, popart.ConstSGD(0.1),
                                  deviceInfo=ipus(1))
    assert sess.getInfo(s0).shape() == []
    sess.prepareDevice()
    sess.weightsFromHost()
    anchors = sess.initAnchorArrays()
    data = np.array([1.0, 2.0, 3.0, -2.0], np.float32)
    sess.run(popart.PyStepIO({x: data}, anchors))
    assert anchors[grad].shape == () and anchors[grad] == np.float32(data.sum())
    sess.weightsToHost()
    out = np.zeros((), np.float32)
    sess.readWeights(popart.PyWeightsIO({s0: out}))
    np.testing.assert_allclose(out, np.float32(0.5) - np.float32(0.1) * data.sum(), rtol=1e-6, atol=1e-7)
    sess.modelToHost(str(tmp_path / "m.onnx"))
    saved = {t.name: t for t in onnx.load(str(tmp_path / "m.onnx")).graph.initializer}
    assert list(saved["s"].dims) == []


def test_bad_model_bytes_and_sparse_constants_are_popart_messages():
    b = popart.Builder()
    x = b.addInputTensor("FLOAT", [4, 4])
    b.addOutputTensor(b.aiOnnx.matmul([x, b.aiOnnx.constant(np.ones((4, 4), np.float32))]))
    proto = bytearray(b.getModelProto())
    proto[::10] = bytes([10]) * len(proto[::10])  # corrupt every tenth byte
    with pytest.raises(popart.popart_exception) as e:
        popart.Builder(bytes(proto))
    assert e.value.args[0].startswith("Failed to load a ModelProto from the string ")
    assert e.value.args[0].endswith("Check that it is either a valid path to an existing onnx model file, "
                                    "or is a valid onnx ModelProto string.")
    values = onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [2], [0.5, 1.5])
    index = onnx.helper.make_tensor("i", onnx.TensorProto.INT64, [2], [0, 3])
    node = onnx.helper.make_node("Constant", [], ["c"], sparse_value=onnx.helper.make_sparse_tensor(values, index, [4]))
    g = onnx.helper.make_graph([node, onnx.helper.make_node("Identity", ["c"], ["y"])], "g", [],
                               [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 13)])
    with pytest.raises(popart.popart_exception) as e:
        popart.InferenceSession(m.SerializeToString(), popart.DataFlow(1, ["y"]), ipus(1))
    assert e.value.args[0] == "The Constant op attribute 'sparse_value' is not supported."


def test_builder_logs_each_operator_at_trace(capfd):
    capfd.readouterr()
    try:
        popart.getLogger().setLevel("TRACE")
        b = popart.Builder()
        b.aiOnnx.abs([b.addInputTensor(popart.TensorInfo("FLOAT", [1, 2, 3]))])
        assert "popart:builder" in capfd.readouterr().err.split("Adding ai.onnx.Abs")[0].splitlines()[-1]
        popart.getLogger().setLevel("OFF")
        b.aiOnnx.abs([b.addInputTensor(popart.TensorInfo("FLOAT", [1]))])
        assert capfd.readouterr().err == ""
    finally:
        popart.getLogger().setLevel("OFF")


def test_reset_host_weights_with_a_weight_the_session_lacks(tmp_path):
    """A file with an initializer the session has no weight for: PopART's message, or the
    weight is skipped with ignoreWeightsInModelWithoutCorrespondingHostWeight=True while
    the others load."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 2]))
    w = b.addInitializedInputTensor(np.ones((2, 2), np.float32), "w")
    y = b.aiOnnx.matmul([x, w])
    m = onnx.load_model_from_string(b.getModelProto())
    m.graph.initializer.extend([onnx.numpy_helper.from_array(np.full((2, 2), 3.0, np.float32), "w"),
                                onnx.numpy_helper.from_array(np.zeros(2, np.float32), "extra")])
    del m.graph.initializer[0]
    onnx.save(m, str(tmp_path / "other.onnx"))
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [y]), ipus(1))
    s.prepareDevice()
    with pytest.raises(popart.popart_exception) as e:
        s.resetHostWeights(str(tmp_path / "other.onnx"))
    assert e.value.args[0].startswith("resetWeights, no tensor 'extra' in tensors")
    s.weightsFromHost()  # nothing was loaded: the session's own weights
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.eye(2, dtype=np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[y], np.ones((2, 2), np.float32))
    s.resetHostWeights(str(tmp_path / "other.onnx"), ignoreWeightsInModelWithoutCorrespondingHostWeight=True)
    s.weightsFromHost()
    s.run(popart.PyStepIO({x: np.eye(2, dtype=np.float32)}, anchors))
    np.testing.assert_array_equal(anchors[y], np.full((2, 2), 3.0, np.float32))


def test_builder_logical_ops_input_counts_and_subsample():
    """builder.aiOnnx.logical_and/or/xor/not are PopART's names for And/Or/Xor/Not; a wrong
    number of inputs is PopART's error at once; aiGraphcore.subsample keeps every
    strides[d]-th element (rounding up, as PopART's op)."""
    b = popart.Builder()
    p = b.addInputTensor(popart.TensorInfo("BOOL", [4]))
    q = b.addInputTensor(popart.TensorInfo("BOOL", [4]))
    outs = [b.aiOnnx.logical_and([p, q]), b.aiOnnx.logical_or([p, q]), b.aiOnnx.logical_xor([p, q]),
            b.aiOnnx.logical_not([p])]
    for name, args in [("Abs", []), ("Add", [p]), ("Not", [p, q])]:
        with pytest.raises(popart.popart_exception) as e:
            getattr(b.aiOnnx, {"Abs": "abs", "Add": "add", "Not": "logical_not"}[name])(args)
        assert e.value.args[0].startswith(f"{name} has invalid number of inputs")
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [10, 9, 8, 7]))
    sub = b.aiGraphcore.subsample([x], strides=[2, 3, 4, 5])
    assert b.getTensorShape(sub) == [5, 3, 2, 2]
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, outs + [sub]), ipus(1))
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    pv, qv = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    xv = RNG.standard_normal((10, 9, 8, 7)).astype(np.float32)
    s.run(popart.PyStepIO({p: pv, q: qv, x: xv}, anchors))
    for o, want in zip(outs, [pv & qv, pv | qv, pv ^ qv, ~pv]):
        np.testing.assert_array_equal(anchors[o], want)
    np.testing.assert_array_equal(anchors[sub], xv[::2, ::3, ::4, ::5])


def test_index_outputs_are_int32_as_popart_types_them():
    """PopART's ArgMax / ArgMin outputs and TopK indices are INT32 (its ArgExtremaOp and
    TopKOp), where ONNX says INT64: the Builder and the sessions report and return them as
    INT32 (also through shape-only operators), with onnxruntime's values; the graph still
    computes with them (a Gather by the ArgMax indices)."""
    import onnxruntime as ort

    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 7]), "x")
    amax = b.aiOnnx.argmax([x], axis=1, keepdims=0)
    amin = b.aiOnnx.argmin([x], axis=0, keepdims=1)
    k = b.aiOnnx.constant(np.array([2], np.int64))
    values, idx = b.aiOnnx.topk([x, k], axis=1)
    flat = b.aiOnnx.reshape([idx, b.aiOnnx.constant(np.array([-1], np.int64))])
    picked = b.aiOnnx.gather([b.aiOnnx.transpose([x]), amax], axis=0)
    b.addOutputTensor(amax)
    proto = b.getModelProto()
    # the model itself stays ONNX: its ArgMax output is INT64
    (out,) = onnx.load_from_string(proto).graph.output
    assert out.type.tensor_type.elem_type == onnx.TensorProto.INT64
    for t in (amax, amin, idx, flat):
        assert b.getTensorDtypeString(t) == "int32"
    assert b.getTensorDtypeString(values) == "float32"

    anchors_ = [amax, amin, values, idx, flat, picked]
    s = popart.InferenceSession(proto, popart.DataFlow(1, anchors_), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    xv = RNG.standard_normal((3, 7)).astype(np.float32)
    s.run(popart.PyStepIO({x: xv}, anchors))
    model = onnx.load_from_string(proto)
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in anchors_)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {x: xv})
    for t, w in zip(anchors_, want):
        assert anchors[t].dtype == (np.int32 if t in (amax, amin, idx, flat) else np.float32), t
        assert s.getInfo(t).data_type_lcase() == anchors[t].dtype.name
        np.testing.assert_array_equal(anchors[t], w.astype(anchors[t].dtype), err_msg=t)


def test_print_tensor_prints_the_value_and_in_training_the_gradient(capfd):
    """aiGraphcore.printtensor printed nothing (it ran as an identity): it
    prints the tensor when the program runs and, training with
    print_gradient, its gradient as `<title>_gradient` (PopART's title)."""
    import numpy as np

    from tilefx import popart

    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    w = b.addInitializedInputTensor(np.ones((3, 2), np.float32))
    y = b.aiGraphcore.printtensor([b.aiOnnx.matmul([x, w])], print_gradient=1, title="act")
    loss = b.aiGraphcore.identityloss([b.aiOnnx.relu([y])], reduction=popart.ReductionType.Sum)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss,
                               popart.ConstSGD(0.0), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.array([[1, 2, 3], [-4, -5, -6]], np.float32)}, anchors))
    out = capfd.readouterr().out
    assert "act: ((  6.,   6.),\n (-15., -15.))" in out
    assert "act_gradient: ((1., 1.),\n (0., 0.))" in out
    np.testing.assert_allclose(anchors[loss], 12.0)


def test_print_tensor_without_a_title_prints_the_tensors_id(capfd):
    """PopART titles an untitled print with the printed tensor's id (tilefx
    printed `tensor:`), and its gradient's print `<id>_gradient`."""
    import numpy as np

    from tilefx import popart

    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 2]))
    w = b.addInitializedInputTensor(np.ones((2, 2), np.float32))
    h = b.aiOnnx.matmul([x, w])
    y = b.aiGraphcore.printtensor([h], print_gradient=1)
    loss = b.aiGraphcore.identityloss([y], reduction=popart.ReductionType.Sum)
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss,
                               popart.ConstSGD(0.0), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    s.run(popart.PyStepIO({x: np.array([[1, 2]], np.float32)}, s.initAnchorArrays()))
    out = capfd.readouterr().out
    assert f"{h}: ((3., 3.))" in out and f"{h}_gradient: ((1., 1.))" in out, out
