"""tilefx.popart: the PopART session API (PopART user guide, 5 "Executing graphs") on the simulated IPU.

Training is compared with PyTorch step by step; every anchor return type and
buffer shape (batchesPerStep x accumulationFactor x replicas) is checked
against PopART's documented layout; bad buffers, anchors and optimizers are
popart_exceptions naming the tensor and the shapes."""

import os

import numpy as np
import onnx
import pytest
import torch

from kernel_tolerance import assert_float32_close
from tilefx import popart

RNG = np.random.default_rng(0)
W0 = RNG.standard_normal((8, 5)).astype(np.float32) * 0.3
B0 = RNG.standard_normal(5).astype(np.float32) * 0.1


def classifier(batch=4):
    """x @ w + b -> softmax -> nll loss (mean), as in PopART's examples."""
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [batch, 8]), "x")
    lbl = builder.addInputTensor(popart.TensorInfo("INT32", [batch]), "label")
    w = builder.addInitializedInputTensor(W0, "w")
    b = builder.addInitializedInputTensor(B0, "b")
    y = builder.aiOnnx.gemm([x, w, b])
    probs = builder.aiOnnx.softmax([y], axis=1)
    loss = builder.aiGraphcore.nllloss([probs, lbl], popart.ReductionType.Mean)
    builder.addOutputTensor(loss)
    return builder, y, loss


def cpu():
    return popart.DeviceManager().createCpuDevice()


def torch_steps(xs, labels, make_opt, grad_scale=1.0, dtype=torch.float32):
    """PyTorch reference: one update per batch, gradients summed over its micro-batches
    (PopART's default Sum reduction), optionally scaled; in `dtype`."""
    w = torch.nn.Parameter(torch.tensor(W0, dtype=dtype))
    b = torch.nn.Parameter(torch.tensor(B0, dtype=dtype))
    opt = make_opt([w, b])
    losses = []
    for xb, lb in zip(xs, labels):  # [micro-batches, ...]
        opt.zero_grad()
        total = 0
        for xm, lm in zip(xb, lb):
            loss = torch.nn.functional.nll_loss(torch.log_softmax(torch.tensor(xm, dtype=dtype) @ w + b, 1),
                                                torch.tensor(lm).long())
            total = total + loss * grad_scale
            losses.append(loss.item())
        total.backward()
        opt.step()
    return np.array(losses), w.detach().numpy(), b.detach().numpy()


# -- the seed's examples --------------------------------------------------------
def test_seed_pystepio_example(tmp_path):
    builder = popart.Builder()
    a = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]), "a")
    b = builder.addInputTensor(popart.TensorInfo("FLOAT", [1]), "b")
    o = builder.aiOnnx.add([a, b])
    builder.addOutputTensor(o)
    path = tmp_path / "onnx.pb"
    path.write_bytes(builder.getModelProto())

    df = popart.DataFlow(1, {o: popart.AnchorReturnType("ALL")})
    device = popart.DeviceManager().createCpuDevice()
    session = popart.InferenceSession(str(path), deviceInfo=device, dataFlow=df)
    session.prepareDevice()
    # Create buffers to receive results from the execution
    anchors = session.initAnchorArrays()
    # Generate some random input data
    data_a = np.random.rand(1).astype(np.float32)
    data_b = np.random.rand(1).astype(np.float32)
    stepio = popart.PyStepIO({'a': data_a, 'b': data_b}, anchors)
    session.run(stepio)
    np.testing.assert_allclose(anchors[o], data_a + data_b, rtol=1e-6)
    assert builder.getTensorShape(o) == [1]


def test_training_equals_pytorch_with_accumulation_and_lr_updates():
    builder, _y, loss = classifier()
    bps, af = 2, 2
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = af
    df = popart.DataFlow(bps, {loss: popart.AnchorReturnType("ALL")})
    learningRate = [0.1, 0.05, 0.02]
    session = popart.TrainingSession(builder.getModelProto(), df, loss,
                                     popart.SGD({"defaultLearningRate": (learningRate[0], False),
                                                 "defaultMomentum": (0.9, True)}),
                                     deviceInfo=cpu(), userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    assert anchors[loss].shape == (bps, af)
    xs = RNG.standard_normal((3, bps, af, 4, 8)).astype(np.float32)
    ls = RNG.integers(0, 5, (3, bps, af, 4)).astype(np.int32)
    w = torch.nn.Parameter(torch.tensor(W0))
    b = torch.nn.Parameter(torch.tensor(B0))
    ref_opt = torch.optim.SGD([w, b], lr=learningRate[0], momentum=0.9)
    for step in range(3):
        # Update learning rate parameter between training steps
        stepLr = learningRate[step]
        session.updateOptimizerFromHost(popart.SGD({"defaultLearningRate": (stepLr, False),
                                                    "defaultMomentum": (0.9, True)}))
        session.run(popart.PyStepIO({"x": xs[step], "label": ls[step]}, anchors))
        for g in ref_opt.param_groups:
            g["lr"] = stepLr
        for d in range(bps):
            ref_opt.zero_grad()
            total = 0
            for g in range(af):
                ref = torch.nn.functional.nll_loss(torch.log_softmax(torch.tensor(xs[step, d, g]) @ w + b, 1),
                                                   torch.tensor(ls[step, d, g]).long())
                np.testing.assert_allclose(anchors[loss][d, g], ref.item(), rtol=1e-5)
                total = total + ref
            total.backward()
            ref_opt.step()
    session.weightsToHost()
    weights = {"w": np.empty((8, 5), np.float32), "b": np.empty(5, np.float32)}
    session.readWeights(popart.PyWeightsIO(weights))
    np.testing.assert_allclose(weights["w"], w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weights["b"], b.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode,wd_mode,ref", [
    (popart.AdamMode.Adam, popart.WeightDecayMode.Decay,
     lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (popart.AdamMode.Adam, popart.WeightDecayMode.L2Regularization,
     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
])
def test_adam_and_replication_equal_pytorch(mode, wd_mode, ref):
    """Two replicas, each on its own data; gradients summed over the replicas."""
    builder, _, loss = classifier()
    opts = popart.SessionOptions()
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 2
    adam = popart.Adam({"defaultLearningRate": (0.01, False), "defaultBeta1": (0.8, True),
                        "defaultBeta2": (0.99, True), "defaultWeightDecay": (0.1, True)},
                       mode=mode, weight_decay_mode=wd_mode)
    session = popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, {loss: popart.AnchorReturnType("ALL")}),
                                     loss, adam, deviceInfo=popart.DeviceManager().acquireAvailableDevice(2),
                                     userOptions=opts)
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    assert anchors[loss].shape == (2,)
    xs = RNG.standard_normal((3, 2, 4, 8)).astype(np.float32)
    ls = RNG.integers(0, 5, (3, 2, 4)).astype(np.int32)
    got = []
    for step in range(3):
        session.run(popart.PyStepIO({"x": xs[step], "label": ls[step]}, anchors))
        got.append(anchors[loss].copy())
    session.deviceInfo.detach()
    want, w, _ = torch_steps(xs, ls, ref)
    np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-5)
    session.weightsToHost()
    out = {"w": np.empty((8, 5), np.float32)}
    session.readWeights(popart.PyWeightsIO(out))
    # Adam divides by sqrt(v) + eps: where a weight's gradient nearly cancels
    # (g + decay * w ~ eps), the step amplifies the gradient's rounding by
    # ~lr / eps, and one summation order of the replicas' gradients against
    # another (or another CPU's) moves that weight by up to 1e-4. The rule of
    # tests/kernel_tolerance.py scales the bound with PyTorch's own error.
    _, w64, _ = torch_steps(xs, ls, ref, dtype=torch.float64)
    assert_float32_close(out["w"], w, w64, what="w")


def test_exported_torch_model_trains_like_pytorch():
    """A torch.onnx export, extended with a loss by popart.Builder(proto), trains as PyTorch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 3 * 3, 5))
    x = torch.randn(2, 1, 8, 8)
    import io
    import warnings

    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, dynamo=False, input_names=["image"], output_names=["logits"])
    builder = popart.Builder(f.getvalue())
    label = builder.addInputTensor(popart.TensorInfo("INT64", [2]), "label")
    probs = builder.aiOnnx.softmax(["logits"], axis=1)
    loss = builder.aiGraphcore.nllloss([probs, label])
    session = popart.TrainingSession(builder.getModelProto(),
                                     popart.DataFlow(1, {loss: popart.AnchorReturnType("ALL")}), loss,
                                     popart.ConstSGD(0.05), deviceInfo=cpu())
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        xb, lb = torch.randn(2, 1, 8, 8), torch.randint(0, 5, (2,))
        session.run(popart.PyStepIO({"image": xb.numpy(), "label": lb.numpy()}, anchors))
        opt.zero_grad()
        ref = torch.nn.functional.cross_entropy(model(xb), lb)
        ref.backward()
        opt.step()
        np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-5)


def test_exported_mlp_with_batchnorm_trains_like_pytorch(tmp_path):
    """Batch statistics in training and the running statistics as buffers: after
    three steps the saved model holds PyTorch's weights and running mean/var."""
    import io
    import warnings

    from models import MLP

    torch.manual_seed(0)
    model = MLP()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(4, 12),), f, dynamo=False, input_names=["x"],
                          output_names=["out"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    builder = popart.Builder(f.getvalue())
    label = builder.addInputTensor(popart.TensorInfo("INT64", [4]), "label")
    logp = builder.aiOnnx.logsoftmax(["out"], axis=1)
    loss = builder.aiGraphcore.nllloss([logp, label], inputIsLogProbability=True)
    session = popart.TrainingSession(builder.getModelProto(),
                                     popart.DataFlow(1, {loss: popart.AnchorReturnType("ALL")}), loss,
                                     popart.SGD({"defaultLearningRate": (0.05, False),
                                                 "defaultMomentum": (0.9, True)}), deviceInfo=cpu())
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for _ in range(3):
        xb, lb = torch.randn(4, 12), torch.randint(0, 5, (4,))
        session.run(popart.PyStepIO({"x": xb.numpy(), "label": lb.numpy()}, anchors))
        opt.zero_grad()
        ref = torch.nn.functional.cross_entropy(model(xb), lb)
        ref.backward()
        opt.step()
        np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-5)
    session.modelToHost(str(tmp_path / "mlp.onnx"))
    saved = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "mlp.onnx")).graph.initializer}
    for name, value in model.state_dict().items():
        if name in saved:
            np.testing.assert_allclose(saved[name], value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert {"bn.running_mean", "bn.running_var", "fc1.weight"} <= set(saved)


def test_batchnorm_running_statistics_derived_from_weights_train_like_pytorch():
    """The legacy exporter without constant folding shares equal initializers: the
    fresh running_var is Identity(bn.weight), running_mean Identity(bn.bias). Those
    statistics are not weights (no gradient through them); the training steps equal PyTorch's."""
    import io
    import warnings

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Tanh())
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (torch.randn(5, 4),), f, dynamo=False, do_constant_folding=False,
                          input_names=["x"], output_names=["y"])
    proto = onnx.load_model_from_string(f.getvalue())
    assert ["1.weight"] in [list(n.input) for n in proto.graph.node if n.op_type == "Identity"]
    builder = popart.Builder(f.getvalue())
    loss = builder.aiGraphcore.identityloss(["y"])
    session = popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, [loss]), loss,
                                     popart.ConstSGD(0.1), deviceInfo=cpu())
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(3):
        xb = torch.randn(5, 4)
        session.run(popart.PyStepIO({"x": xb.numpy()}, anchors))
        opt.zero_grad()
        ref = model(xb).mean()
        ref.backward()
        opt.step()
        np.testing.assert_allclose(anchors[loss], ref.item(), rtol=1e-5, atol=1e-6)
    weights = {n: np.zeros(v.shape, np.float32) for n, v in model.state_dict().items() if "running" not in n
               and "num_batches" not in n}
    session.weightsToHost()
    session.readWeights(popart.PyWeightsIO(weights))
    for name, value in weights.items():
        np.testing.assert_allclose(value, model.state_dict()[name].numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


# -- anchors and buffer shapes --------------------------------------------------
def scaled_model():
    """y = x * w (w = 2), z = y + 1: z is the output, y an intermediate anchor."""
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "x")
    w = builder.addInitializedInputTensor(np.full([3], 2.0, np.float32), "w")
    y = builder.aiOnnx.mul([x, w], "y")
    one = builder.aiOnnx.constant(np.ones([1], np.float32))
    z = builder.aiOnnx.add([y, one], "z")
    builder.addOutputTensor(z)
    return builder, x, y, z


@pytest.mark.parametrize("bps,rf", [(1, 1), (4, 1), (1, 2), (4, 2)])
@pytest.mark.parametrize("art", [("ALL",), ("EVERYN", 2), ("FINAL",), ("SUM",)])
def test_inference_anchor_types_and_buffer_shapes(bps, rf, art):
    if art[0] == "EVERYN" and bps % 2:
        pytest.skip("EVERYN(2) needs an even batchesPerStep")
    builder, x, y, z = scaled_model()
    opts = popart.SessionOptions()
    if rf > 1:
        opts.enableReplicatedGraphs = True
        opts.replicatedGraphCount = rf
    anchor = popart.AnchorReturnType(*art)
    s = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(bps, {y: anchor, z: anchor}),
                                popart.DeviceManager().createIpuModelDevice({"numIPUs": rf}), userOptions=opts)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    lead = [d for d in ([bps, rf] if art[0] in ("ALL",) else [bps // 2, rf] if art[0] == "EVERYN" else [rf])
            if d != 1]
    assert anchors[y].shape == tuple(lead + [2, 3]) and anchors[z].shape == anchors[y].shape
    data = RNG.standard_normal([d for d in (bps, rf) if d != 1] + [2, 3]).astype(np.float32)
    s.run(popart.PyStepIO({x: data}, anchors))
    for name, full in ((y, data.reshape(bps, rf, 2, 3) * 2.0), (z, data.reshape(bps, rf, 2, 3) * 2.0 + 1)):
        want = {"ALL": full, "EVERYN": full[1::2], "FINAL": full[-1], "SUM": full.sum(0)}[art[0]]
        np.testing.assert_allclose(anchors[name], want.reshape(anchors[name].shape), rtol=1e-6)


def test_training_buffer_shapes_with_accumulation_and_replicas():
    builder, y, loss = classifier(batch=2)
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 3
    opts.enableReplicatedGraphs = True
    opts.replicatedGraphCount = 2
    df = popart.DataFlow(4, {loss: popart.AnchorReturnType("ALL"), y: popart.AnchorReturnType("EVERYN", 2),
                             "w": popart.AnchorReturnType("FINAL"), "b": popart.AnchorReturnType("SUM")})
    s = popart.TrainingSession(builder.getModelProto(), df, loss, popart.ConstSGD(0.01),
                               deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
                               userOptions=opts)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    assert anchors[loss].shape == (4, 3, 2)
    assert anchors[y].shape == (2, 3, 2, 2, 5)
    assert anchors["w"].shape == (2, 8, 5)
    assert anchors["b"].shape == (2, 5)
    with pytest.raises(popart.popart_exception, match=r"'x'.*\(4, 2, 8\).*\(4, 3, 2, 2, 8\)"):
        s.run(popart.PyStepIO({"x": np.zeros((4, 2, 8), np.float32),
                               "label": np.zeros((4, 3, 2, 2), np.int32)}, anchors))
    s.run(popart.PyStepIO({"x": RNG.standard_normal((4, 3, 2, 2, 8)).astype(np.float32),
                           "label": RNG.integers(0, 5, (4, 3, 2, 2)).astype(np.int32)}, anchors))
    assert np.isfinite(anchors[loss]).all()
    # the weights as they were in the final batch (each replica's copy), biases summed over 12 batches
    s.weightsToHost()
    assert not np.allclose(anchors["w"][0], W0)


def test_pystepio_callback_feeds_and_collects_per_batch():
    builder, x, _y, z = scaled_model()
    s = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(3, {z: popart.AnchorReturnType("ALL")}),
                                cpu())
    s.prepareDevice()
    data = [RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    fed, out, done = iter(data), [], []

    def output(tensor):
        out.append(np.empty((2, 3), np.float32))
        return out[-1]

    s.run(popart.PyStepIOCallback(lambda t, prefetch: next(fed), lambda t: done.append(t),
                                  output, lambda t: done.append("out:" + t)))
    assert done == [x] * 3 + ["out:" + z] * 3
    for got, want in zip(out, data):
        np.testing.assert_allclose(got, want * 2 + 1, rtol=1e-6)


# -- saving and loading weights -------------------------------------------------
def test_model_to_host_round_trips(tmp_path):
    builder, y, loss = classifier()
    train = popart.TrainingSession(builder.getModelProto(), popart.DataFlow(2, {y: popart.AnchorReturnType("ALL")}),
                                   loss, popart.SGD(0.1), deviceInfo=cpu())
    train.prepareDevice()
    train.weightsFromHost()
    anchors = train.initAnchorArrays()
    xs = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    train.run(popart.PyStepIO({"x": xs, "label": RNG.integers(0, 5, (2, 4)).astype(np.int32)}, anchors))
    path = str(tmp_path / "trained_model.onnx")
    train.modelToHost(path)
    saved = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    assert not np.allclose(saved["w"], W0)

    # reload for inference: the saved weights give the trained model's outputs
    infer = popart.InferenceSession(path, popart.DataFlow(1, {y: popart.AnchorReturnType("ALL")}), cpu())
    infer.prepareDevice()
    out = infer.initAnchorArrays()
    infer.run(popart.PyStepIO({"x": xs[0], "label": np.zeros(4, np.int32)}, out))
    np.testing.assert_allclose(out[y], xs[0] @ saved["w"] + saved["b"], rtol=1e-5, atol=1e-6)

    # a fresh training session takes them with resetHostWeights + weightsFromHost
    fresh = popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, {y: popart.AnchorReturnType("ALL")}),
                                   loss, popart.SGD(0.1), deviceInfo=cpu())
    fresh.prepareDevice()
    fresh.resetHostWeights(path)
    fresh.weightsFromHost()
    fresh.weightsToHost()
    got = {"w": np.empty((8, 5), np.float32)}
    fresh.readWeights(popart.PyWeightsIO(got))
    np.testing.assert_allclose(got["w"], saved["w"])
    # writeWeights + weightsFromHost puts given values on the device
    fresh.writeWeights(popart.PyWeightsIO({"w": np.zeros((8, 5), np.float32)}))
    fresh.weightsFromHost()
    fresh.run(popart.PyStepIO({"x": xs[0], "label": np.zeros(4, np.int32)}, out))
    np.testing.assert_allclose(out[y], np.broadcast_to(saved["b"], (4, 5)), rtol=1e-5)
    with pytest.raises(popart.popart_exception, match=r"'w'.*\(3,\).*\(8, 5\)"):
        fresh.writeWeights(popart.PyWeightsIO({"w": np.zeros(3, np.float32)}))


# -- bad input ------------------------------------------------------------------
def test_bad_buffers_anchors_and_optimizers_are_popart_exceptions():
    builder, y, loss = classifier()
    proto = builder.getModelProto()
    df = popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")})
    with pytest.raises(popart.popart_exception, match="'nonexistent'.*not in the model"):
        popart.InferenceSession(proto, popart.DataFlow(1, {"nonexistent": popart.AnchorReturnType("ALL")}), cpu())
    with pytest.raises(popart.popart_exception, match="EVERYN.*period|return period 3"):
        popart.DataFlow(4, {y: popart.AnchorReturnType("EVERYN", 3)})
    s = popart.TrainingSession(proto, df, loss, popart.SGD({"defaultLearningRate": (0.1, False),
                                                           "defaultMomentum": (0.5, True)}), deviceInfo=cpu())
    anchors = s.initAnchorArrays()
    good = {"x": np.zeros((2, 4, 8), np.float32), "label": np.zeros((2, 4), np.int32)}
    with pytest.raises(popart.popart_exception, match="prepareDevice"):
        s.run(popart.PyStepIO(good, anchors))
    s.prepareDevice()
    with pytest.raises(popart.popart_exception, match=r"'x' has shape \(4, 8\), expected \(2, 4, 8\)"):
        s.run(popart.PyStepIO({**good, "x": np.zeros((4, 8), np.float32)}, anchors))
    with pytest.raises(popart.popart_exception, match=r"no input buffer for tensor 'label'.*\(2, 4\)"):
        s.run(popart.PyStepIO({"x": good["x"]}, anchors))
    with pytest.raises(popart.popart_exception, match=r"anchor 'Nll:0' has shape \(3,\), expected \(2,\)"):
        s.run(popart.PyStepIO(good, {loss: np.zeros(3, np.float32)}))
    with pytest.raises(popart.popart_exception, match="SGD.*Adam"):
        s.updateOptimizerFromHost(popart.Adam({"defaultLearningRate": (0.1, False)}))
    with pytest.raises(popart.popart_exception, match="defaultMomentum"):
        s.updateOptimizerFromHost(popart.SGD({"defaultLearningRate": (0.1, False),
                                              "defaultMomentum": (0.9, True)}))
    with pytest.raises(popart.popart_exception, match="unknown hyper-parameter 'defaultMomentom'"):
        popart.SGD({"defaultMomentom": (0.9, True)})
    with pytest.raises(popart.popart_exception, match="needs a loss"):
        popart.TrainingSession(proto, df, "", popart.SGD(0.1), deviceInfo=cpu())
    with pytest.raises(popart.popart_exception, match="needs a deviceInfo"):
        popart.InferenceSession(proto, df)
    with pytest.raises(AttributeError, match="enableFoo"):
        popart.SessionOptions().enableFoo = True
    # the session still runs after the errors; the size-1 dimensions may be written out
    s.run(popart.PyStepIO({"x": good["x"].reshape(2, 1, 1, 4, 8), "label": good["label"]}, anchors))
    assert np.isfinite(anchors[loss]).all()


def test_builder_checks_tensors_and_attributes():
    builder = popart.Builder()
    x = builder.addInputTensor("FLOAT", [2, 3], "x")
    with pytest.raises(popart.popart_exception, match="no tensor 'nope'"):
        builder.aiOnnx.add([x, "nope"])
    with pytest.raises(popart.popart_exception, match="unknown attribute 'axes'.*Softmax"):
        builder.aiOnnx.softmax([x], axes=1)
    t = builder.aiOnnx.transpose([x], [1, 0])
    s = builder.aiOnnx.split([t], 3, 0, [1, 1, 1])
    assert len(s) == 3 and builder.getTensorShape(s[0]) == [1, 2]
    assert builder.getTensorShape(builder.aiGraphcore.identityloss([t])) == []


def test_example_trains_saves_reloads_and_infers(tmp_path):
    import importlib.util
    import os

    from repo_paths import REPO

    path = os.path.join(REPO, "examples",
                        "popart_session.py")
    spec = importlib.util.spec_from_file_location("popart_session", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = tmp_path / "trained.onnx"
    result = example.main(["--steps", "12", "--model", str(model)])
    assert model.exists()
    assert result["losses"][-1] < result["losses"][0] / 2
    assert result["accuracy"] > 0.85


def test_loss_must_be_scalar_and_options_are_checked():
    builder, _x, _y, z = scaled_model()
    with pytest.raises(popart.popart_exception, match=r"loss 'z:0' has shape \(2, 3\).*scalar"):
        popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, [z]), z, popart.SGD(0.1),
                               deviceInfo=cpu())
    opts = popart.SessionOptions()
    opts.enableOutlining = False  # a real-machine option: accepted, no effect on the simulation
    opts.outlineThreshold = 10.0
    with pytest.raises(AttributeError, match="replicationCount"):
        opts.replicationCount = 2


def test_gradient_anchors_of_weights_inputs_per_micro_batch():
    """Anchoring reservedGradientPrefix() + a weight or an input returns, per
    batch and micro-batch, the gradient of that micro-batch's loss (before the
    update of the step, with accumulation), equal to torch's autograd."""
    builder, _y, loss = classifier()
    bps, af = 2, 2
    g = popart.reservedGradientPrefix()
    assert g == "Gradient___"
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = af
    df = popart.DataFlow(bps, {loss: popart.AnchorReturnType("ALL"), g + "w": popart.AnchorReturnType("ALL"),
                               g + "x": popart.AnchorReturnType("ALL"), g + "b": popart.AnchorReturnType("FINAL")})
    session = popart.TrainingSession(builder.getModelProto(), df, loss, popart.ConstSGD(0.1),
                                     deviceInfo=cpu(), userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()
    assert anchors[g + "w"].shape == (bps, af, 8, 5) and anchors[g + "x"].shape == (bps, af, 4, 8)
    assert anchors[g + "b"].shape == (5,)
    xs = RNG.standard_normal((bps, af, 4, 8)).astype(np.float32)
    ls = RNG.integers(0, 5, (bps, af, 4)).astype(np.int32)
    session.run(popart.PyStepIO({"x": xs, "label": ls}, anchors))
    w, b = torch.nn.Parameter(torch.tensor(W0)), torch.nn.Parameter(torch.tensor(B0))
    opt = torch.optim.SGD([w, b], lr=0.1)
    for d in range(bps):
        opt.zero_grad()
        for m in range(af):
            x = torch.tensor(xs[d, m], requires_grad=True)
            ref = torch.nn.functional.nll_loss(torch.log_softmax(x @ w + b, 1), torch.tensor(ls[d, m]).long())
            gw, gb, gx = torch.autograd.grad(ref, [w, b, x], retain_graph=True)
            np.testing.assert_allclose(anchors[g + "w"][d, m], gw.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(anchors[g + "x"][d, m], gx.numpy(), rtol=1e-5, atol=1e-7)
            if (d, m) == (bps - 1, af - 1):
                np.testing.assert_allclose(anchors[g + "b"], gb.numpy(), rtol=1e-5, atol=1e-7)
            ref.backward()
        opt.step()
    with pytest.raises(popart.popart_exception, match="only a TrainingSession"):
        popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, [g + "w"]), cpu())
    with pytest.raises(popart.popart_exception, match="must name a tensor of the graph"):
        popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, [g + "nope"]), loss,
                               popart.ConstSGD(0.1), deviceInfo=cpu())
    bad = popart.TrainingSession(builder.getModelProto(), popart.DataFlow(1, [loss, g + "label"]), loss,
                                 popart.ConstSGD(0.1), deviceInfo=cpu())
    with pytest.raises(popart.popart_exception, match="not a float"):
        bad.prepareDevice()


@pytest.mark.parametrize("op", ["softsign", "lstm_like", "convtranspose"])
def test_training_session_gradients_of_inputs_and_outputs_in_op_test_style(op):
    """The way PopART's operator tests train one operator: the output reduced by an
    identity loss, anchors on the output, its gradient and the input's gradient
    (reservedGradientPrefix() + id), patterns from a level, then the weights read
    back; all equal to torch."""
    builder = popart.Builder(opsets={"ai.onnx": 13, "ai.graphcore": 1})
    x_np = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w_np = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    i1 = builder.addInputTensor(x_np)
    if op == "softsign":
        o = builder.aiOnnx.softsign([i1])
        ref_fn = lambda x, w: torch.nn.functional.softsign(x)  # noqa: E731
    elif op == "lstm_like":
        o = builder.aiOnnx.tanh([builder.aiOnnx.sigmoid([i1])])
        ref_fn = lambda x, w: torch.tanh(torch.sigmoid(x))  # noqa: E731
    else:
        w_id = builder.addInitializedInputTensor(w_np)
        o = builder.aiOnnx.convtranspose([i1, w_id], strides=[2, 2], pads=[1, 1, 1, 1])
        ref_fn = lambda x, w: torch.nn.functional.conv_transpose2d(x, w, stride=2, padding=1)  # noqa: E731
    builder.addOutputTensor(o)
    loss = builder.aiGraphcore.identityloss([o], reduction=popart.ReductionType.Mean)
    g = popart.reservedGradientPrefix()
    anchors = {t: popart.AnchorReturnType("All") for t in (o, g + i1, g + o)}
    opts = popart.SessionOptions()
    opts.opxAliasChecking = True
    patterns = popart.Patterns(popart.PatternsLevel.Minimal)
    patterns.InPlace = True
    session = popart.TrainingSession(fnModel=builder.getModelProto(), dataFlow=popart.DataFlow(1, anchors),
                                     loss=loss, optimizer=popart.ConstSGD(0.01), deviceInfo=cpu(),
                                     patterns=patterns, userOptions=opts)
    anchor_map = session.initAnchorArrays()
    session.prepareDevice()
    session.weightsFromHost()
    session.run(popart.PyStepIO({i1: x_np}, anchor_map))
    session.weightsToHost()
    x = torch.tensor(x_np, requires_grad=True)
    w = torch.nn.Parameter(torch.tensor(w_np))
    out = ref_fn(x, w)
    out.retain_grad()
    out.mean().backward()
    np.testing.assert_allclose(anchor_map[o], out.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(anchor_map[g + o], out.grad.numpy(), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(anchor_map[g + i1], x.grad.numpy(), rtol=1e-5, atol=1e-8)
    if op == "convtranspose":
        weights = {w_id: np.empty(w_np.shape, np.float32)}
        session.readWeights(popart.PyWeightsIO(weights))
        np.testing.assert_allclose(weights[w_id], (w - 0.01 * w.grad).detach().numpy(), rtol=1e-5, atol=1e-7)


def test_patterns_levels_names_and_errors():
    assert popart.Patterns().InPlace and popart.Patterns().PreUniRepl
    none = popart.Patterns(popart.PatternsLevel.NoPatterns)
    assert not none.InPlace and not none.PreUniRepl
    assert popart.Patterns(popart.PatternsLevel.All).TiedGather
    named = popart.Patterns(["PostNRepl", "InPlace"])
    assert named.PostNRepl and named.InPlace and not named.SoftMaxGradDirect
    chained = popart.Patterns(popart.PatternsLevel.NoPatterns).enableRuntimeAsserts(False)
    assert isinstance(chained, popart.Patterns) and not chained.runtimeAssertsOn
    with pytest.raises(popart.popart_exception, match="unknown pattern 'Nope'"):
        popart.Patterns(["Nope"])
    with pytest.raises(AttributeError, match="no pattern"):
        popart.Patterns().Nope = True
    builder, _y, loss = classifier()
    with pytest.raises(popart.popart_exception, match="patterns must be a popart.Patterns"):
        popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, [loss]), cpu(), patterns=3)


def test_compile_and_export_load_executable_and_engine_cache(tmp_path, monkeypatch):
    """session.compileAndExport writes an executable a new session loads with
    loadExecutable instead of compiling, with the same results; enableEngineCaching
    stores then reuses one per graph (another graph, even with the same weights'
    shapes, misses)."""
    from tilefx.runner import compiling as compile_path  # the compile path traces

    traced = []
    real_trace = compile_path.trace
    monkeypatch.setattr(compile_path, "trace", lambda *a, **k: traced.append(1) or real_trace(*a, **k))
    builder, _y, loss = classifier()
    xs = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    ls = RNG.integers(0, 5, (2, 4)).astype(np.int32)

    def session(opts=None, proto=None):
        return popart.TrainingSession(proto or builder.getModelProto(),
                                      popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")}), loss,
                                      popart.ConstSGD(0.1), deviceInfo=cpu(), userOptions=opts)

    def run(s):
        s.prepareDevice()
        s.weightsFromHost()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO({"x": xs, "label": ls}, anchors))
        return anchors[loss]

    path = tmp_path / "classifier.popef"
    session().compileAndExport(str(path))
    loaded = session()
    loaded.loadExecutable(str(path))
    assert len(traced) == 1
    np.testing.assert_allclose(run(loaded), run(session()), rtol=1e-6)
    assert len(traced) == 2  # the loaded session did not trace
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(popart.popart_exception):
        session().loadExecutable(str(path))

    opts = popart.SessionOptions()
    opts.enableEngineCaching = True
    opts.cachePath = str(tmp_path / "cache")
    traced.clear()
    first = run(session(opts))
    second = run(session(opts))
    np.testing.assert_allclose(first, second, rtol=1e-6)
    entries = lambda: [n for n in os.listdir(opts.cachePath) if n.endswith(".tilefx")]  # (each with its .mac)
    assert len(traced) == 1 and len(entries()) == 1
    other = popart.Builder()
    x = other.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    lbl = other.addInputTensor(popart.TensorInfo("INT32", [4]), "label")
    w = other.addInitializedInputTensor(W0, "w")
    b = other.addInitializedInputTensor(B0, "b")
    y = other.aiOnnx.relu([other.aiOnnx.gemm([x, w, b])])  # another graph, same weights
    other_loss = other.aiGraphcore.nllloss([other.aiOnnx.softmax([y], axis=1), lbl], popart.ReductionType.Mean)
    popart.TrainingSession(other.getModelProto(), popart.DataFlow(2, [other_loss]), other_loss,
                           popart.ConstSGD(0.1), deviceInfo=cpu(), userOptions=opts).prepareDevice()
    assert len(traced) == 2 and len(entries()) == 2  # another graph: a miss


def test_popart_operator_conventions():
    """Conventions PopART's own operator tests rely on: builder.aiOnnx is opset 10
    (Clip takes min/max attributes), Clip-11 bounds may be one-element constants,
    ai.graphcore Gelu is poplibs' tanh form (GeluErf the exact one), GroupedGather
    gathers per group, a one-element loss trains, fp16 Nll has no 0/0 gradient."""
    assert popart.defaultAiOnnxOpset == 10
    b = popart.Builder()
    x_np = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    x = b.addInputTensor(popart.TensorInfo(x_np))
    c10 = b.aiOnnx.clip([x], min=-1.5, max=1.5)
    ge, gx = b.aiGraphcore.gelu([x]), b.aiGraphcore.geluerf([x])
    idx = b.aiOnnx.constant(np.array([[2, 0], [1, 1], [0, 3]], np.int32))
    gg = b.aiGraphcore.groupedgather([x, idx], axis=1, group_size=3)
    outs = [c10, ge, gx, gg]
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, outs), cpu())
    s.prepareDevice()
    a = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: x_np}, a))
    t = torch.tensor(x_np)
    np.testing.assert_allclose(a[c10], np.clip(x_np, -1.5, 1.5))
    b11 = popart.Builder(opsets={"ai.onnx": 11, "ai.graphcore": 1})
    x11 = b11.addInputTensor(popart.TensorInfo(x_np))
    c11 = b11.aiOnnx.clip([x11, b11.aiOnnx.constant(np.array([-1.0], np.float32)),
                           b11.aiOnnx.constant(np.array([2.0], np.float32))])
    s11 = popart.InferenceSession(b11.getModelProto(), popart.DataFlow(1, [c11]), cpu())
    s11.prepareDevice()
    a11 = s11.initAnchorArrays()
    s11.run(popart.PyStepIO({x11: x_np}, a11))
    np.testing.assert_allclose(a11[c11], np.clip(x_np, -1.0, 2.0))
    np.testing.assert_allclose(a[ge], torch.nn.functional.gelu(t, approximate="tanh").numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a[gx], torch.nn.functional.gelu(t).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a[gg], np.stack([x_np[g][[[2, 0], [1, 1], [0, 3]][g]] for g in range(3)]))

    b = popart.Builder()
    p_np = np.array([[1.0, 0.0], [0.5, 0.5]], np.float16)
    p = b.addInputTensor(popart.TensorInfo(p_np))
    lbl = b.addInputTensor(popart.TensorInfo("INT32", [2]))
    loss = b.aiGraphcore.nllloss([p, lbl], popart.ReductionType.Sum)
    one = b.aiOnnx.unsqueeze([loss], axes=[0])  # a loss of shape [1]
    g = popart.reservedGradientPrefix() + p
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [one, g]), one, popart.ConstSGD(0.1),
                               deviceInfo=cpu())
    s.prepareDevice()
    a = s.initAnchorArrays()
    s.run(popart.PyStepIO({p: p_np, lbl: np.array([0, 1], np.int32)}, a))
    assert np.isfinite(a[g]).all()
    np.testing.assert_allclose(a[g].astype(np.float32), [[-1, 0], [0, -2]])
    with pytest.raises(popart.popart_exception, match="must be a scalar tensor"):
        popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [p]), p, popart.ConstSGD(0.1),
                               deviceInfo=cpu())


def test_builder_node_attributes_are_read_added_and_removed():
    """PopART's Builder names a node by its outputs for attribute access."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 1, 6, 6]))
    o = b.aiOnnx.averagepool([x], kernel_shape=[3, 3], count_include_pad=1, pads=[1, 1, 1, 1],
                             strides=[2, 2])
    assert b.nodeHasAttribute("count_include_pad", {o})
    assert b.getInt64NodeAttribute("count_include_pad", {o}) == 1
    assert b.getInt64VectorNodeAttribute("kernel_shape", {o}) == [3, 3]
    assert {"kernel_shape", "pads", "strides"} <= set(b.getAllNodeAttributeNames({o}))
    b.removeNodeAttribute("count_include_pad", {o})
    assert not b.nodeHasAttribute("count_include_pad", {o})
    with pytest.raises(popart.popart_exception, match="has no attribute 'count_include_pad'"):
        b.removeNodeAttribute("count_include_pad", {o})
    b.addNodeAttribute("my_scale", 0.5, {o})
    b.addNodeAttribute("my_tags", ["a", "b"], {o})
    assert b.getFloatNodeAttribute("my_scale", {o}) == 0.5
    assert b.getStringVectorNodeAttribute("my_tags", {o}) == ["a", "b"]
    with pytest.raises(popart.popart_exception, match="already has attribute"):
        b.addNodeAttribute("my_scale", 1.0, {o})
    with pytest.raises(popart.popart_exception, match="is FLOAT"):
        b.getInt64NodeAttribute("my_scale", {o})
    with pytest.raises(popart.popart_exception, match="no single node"):
        b.nodeHasAttribute("pads", {x})
    b.removeNodeAttribute("my_scale", {o})
    b.removeNodeAttribute("my_tags", {o})
    # the edited model still runs: count_include_pad now takes its default, 0
    b.addOutputTensor(o)
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, [o]), cpu())
    s.prepareDevice()
    a = s.initAnchorArrays()
    data = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    s.run(popart.PyStepIO({x: data}, a))
    ref = torch.nn.functional.avg_pool2d(torch.from_numpy(data), 3, 2, 1, count_include_pad=False)
    np.testing.assert_allclose(a[o], ref.numpy(), rtol=1e-6)


@pytest.mark.parametrize("bps", [1, 3])
def test_scalar_inputs_take_one_value_per_batch(bps):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    s_ = b.addInputTensor(popart.TensorInfo("FLOAT", []))
    y = b.aiOnnx.mul([x, s_])
    b.addOutputTensor(y)
    sess = popart.InferenceSession(b.getModelProto(), popart.DataFlow(bps, [y]), cpu())
    sess.prepareDevice()
    a = sess.initAnchorArrays()
    xs = np.random.default_rng(0).standard_normal((bps, 2, 3)).astype(np.float32)
    scales = np.arange(1, bps + 1, dtype=np.float32)
    feed = {x: xs[0] if bps == 1 else xs, s_: np.float32(scales[0]) if bps == 1 else scales}
    sess.run(popart.PyStepIO(feed, a))
    want = xs * scales[:, None, None]
    np.testing.assert_allclose(a[y], want[0] if bps == 1 else want, rtol=1e-6)


def test_anchored_identity_of_an_initializer():
    """Identity(weight) as an anchor: its shape comes without reading the parameter's
    value (a tensor that requires grad), in inference and in training."""
    builder, y, loss = classifier()
    wcopy = builder.aiOnnx.identity(["w"])
    proto = builder.getModelProto()
    s = popart.InferenceSession(proto, popart.DataFlow(1, {wcopy: popart.AnchorReturnType("ALL")}), cpu())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": np.zeros((4, 8), np.float32), "label": np.zeros(4, np.int32)}, anchors))
    np.testing.assert_array_equal(anchors[wcopy], W0)
    t = popart.TrainingSession(proto, popart.DataFlow(1, {wcopy: popart.AnchorReturnType("FINAL"),
                                                          loss: popart.AnchorReturnType("ALL")}),
                               loss, popart.ConstSGD(0.1), deviceInfo=cpu())
    t.prepareDevice()
    anchors = t.initAnchorArrays()
    assert anchors[wcopy].shape == (8, 5) and anchors[wcopy].dtype == np.float32
    t.run(popart.PyStepIO({"x": RNG.standard_normal((4, 8)).astype(np.float32),
                           "label": np.array([0, 1, 2, 3], np.int32)}, anchors))
    np.testing.assert_array_equal(anchors[wcopy], W0)  # the value the step read, before its update


def test_external_data_of_a_model_given_as_bytes_is_a_clear_error(tmp_path, monkeypatch):
    """External weights are found next to the .onnx file: from bytes there is no file."""
    builder, y, loss = classifier()
    model = onnx.load_model_from_string(builder.getModelProto())
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    raw = path.read_bytes()
    monkeypatch.chdir(tmp_path)  # even where the working directory holds the file: no guessing
    for given in (raw, onnx.load(str(path), load_external_data=False)):
        with pytest.raises(popart.popart_exception,
                           match=r"'w' keeps its data in the external file 'weights.bin'.*pass the "
                                 r"model's file path"):
            popart.InferenceSession(given, popart.DataFlow(1, [y]), cpu())
    with pytest.raises(popart.popart_exception, match="weights.bin"):
        popart.Builder(raw)
    s = popart.InferenceSession(str(path), popart.DataFlow(1, [y]), cpu())  # the path works
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    s.run(popart.PyStepIO({"x": x, "label": np.zeros(4, np.int32)}, anchors))
    np.testing.assert_allclose(anchors[y], x @ W0 + B0, rtol=1e-5, atol=1e-6)


def test_dropout_mask_output_in_inference_and_training():
    """Dropout's mask: all True in inference; in training the keep-mask of the very
    draw applied (the output is x * mask / (1 - ratio), the same draw as without it)."""
    def model(with_mask: bool):
        b = popart.Builder()
        x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), "x")
        w = b.addInitializedInputTensor(np.full((6, 6), 0.5, np.float32), "w")
        h = b.aiOnnx.matmul([x, w])
        outs = b.aiOnnx.dropout([h], num_outputs=2 if with_mask else 1, ratio=0.25)
        y, mask = (outs[0], outs[1]) if with_mask else (outs[0], None)
        loss = b.aiGraphcore.identityloss([y])
        return b.getModelProto(), h, y, mask, loss

    proto, h, y, mask, loss = model(True)
    x = RNG.standard_normal((4, 6)).astype(np.float32) + 3
    s = popart.InferenceSession(proto, popart.DataFlow(1, [y, mask]), cpu())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({"x": x}, anchors))
    assert anchors[mask].dtype == np.bool_ and anchors[mask].all()
    np.testing.assert_allclose(anchors[y], x @ np.full((6, 6), 0.5, np.float32), rtol=1e-6)

    def train(proto, anchored):
        t = popart.TrainingSession(proto, popart.DataFlow(1, anchored), loss, popart.ConstSGD(0.0),
                                   deviceInfo=cpu())
        t.prepareDevice()
        t.setRandomSeed(7)
        anchors = t.initAnchorArrays()
        t.run(popart.PyStepIO({"x": x}, anchors))
        return anchors

    got = train(proto, [h, y, mask])
    keep = got[mask]
    assert keep.dtype == np.bool_ and 0 < keep.sum() < keep.size
    np.testing.assert_allclose(got[y], np.where(keep, got[h] / 0.75, 0), rtol=1e-6)
    proto1, _, y1, _, _ = model(False)
    np.testing.assert_array_equal(train(proto1, [h, y1])[y1], got[y])  # the same draw
