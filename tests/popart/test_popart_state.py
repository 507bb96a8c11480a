"""The state a PopART session saves and restores besides its weights
(tilefx/popart/state.py): the optimizer state modelToHost writes as PopART's
`Accl___` / `Accl1___` / `Accl2___` / `Step___` initializers, which a
TrainingSession built from the file resumes from (bit for bit the
uninterrupted run), and the random generators' state (getRNGState /
setRNGState: the same dropout masks again)."""

import numpy as np
import onnx
import pytest

from tilefx import popart

RNG = np.random.default_rng(3)
W0 = RNG.standard_normal((8, 5)).astype(np.float32) * 0.3
B0 = RNG.standard_normal(5).astype(np.float32) * 0.1
XS = RNG.standard_normal((5, 2, 4, 8)).astype(np.float32)   # 5 steps of batchesPerStep 2
LS = RNG.integers(0, 5, (5, 2, 4)).astype(np.int32)


def classifier():
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    lbl = builder.addInputTensor(popart.TensorInfo("INT32", [4]), "label")
    w = builder.addInitializedInputTensor(W0, "w")
    b = builder.addInitializedInputTensor(B0, "b")
    probs = builder.aiOnnx.softmax([builder.aiOnnx.gemm([x, w, b])], axis=1)
    loss = builder.aiGraphcore.nllloss([probs, lbl], popart.ReductionType.Mean)
    return builder.getModelProto(), loss


def cpu():
    return popart.DeviceManager().createCpuDevice()


OPTIMIZERS = {
    "sgd_separate": lambda: popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True),
                                        "defaultWeightDecay": (0.01, True)},
                                       accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate),
    "sgd": lambda: popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True),
                               "defaultDampening": (0.2, True), "defaultWeightDecay": (0.01, True)}),
    "adamw": lambda: popart.Adam({"defaultLearningRate": (0.02, False), "defaultBeta1": (0.8, True),
                                  "defaultWeightDecay": (0.1, True)}),
    "adam_l2": lambda: popart.Adam({"defaultLearningRate": (0.02, False)},
                                   weight_decay_mode=popart.WeightDecayMode.L2Regularization),
    "lamb": lambda: popart.Adam({"defaultLearningRate": (0.02, False)}, mode=popart.AdamMode.Lamb),
    "adamax": lambda: popart.Adam({"defaultLearningRate": (0.02, False)}, mode=popart.AdamMode.AdaMax),
}
STATE = {"sgd": ["Accl___"], "sgd_separate": ["Accl1___"], "adamw": ["Accl1___", "Accl2___"], "adam_l2": ["Accl1___", "Accl2___"],
         "lamb": ["Accl1___", "Accl2___"], "adamax": ["Accl1___", "Accl2___"]}


def session(model, loss, opt):
    s = popart.TrainingSession(model, popart.DataFlow(2, [loss]), loss, opt, deviceInfo=cpu())
    s.prepareDevice()
    s.weightsFromHost()
    return s


def run(s, loss, steps):
    out = []
    anchors = s.initAnchorArrays()
    for k in steps:
        s.run(popart.PyStepIO({"x": XS[k], "label": LS[k]}, anchors))
        out.append(anchors[loss].copy())
    return np.concatenate(out)


def weights(path):
    return {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def test_prefixes_are_popart_s():
    assert (popart.reservedAcclPrefix(), popart.reservedAccl1Prefix(), popart.reservedAccl2Prefix(),
            popart.reservedStepPrefix(), popart.reservedAccumPrefix()) == \
        ("Accl___", "Accl1___", "Accl2___", "Step___", "Accum___")


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_saved_optimizer_state_resumes_training_bit_for_bit(kind, tmp_path):
    model, loss = classifier()
    whole = session(model, loss, OPTIMIZERS[kind]())
    want = run(whole, loss, range(5))
    whole.modelToHost(str(tmp_path / "whole.onnx"))

    first = session(model, loss, OPTIMIZERS[kind]())
    got = [run(first, loss, range(2))]
    path = str(tmp_path / "after2.onnx")
    first.modelToHost(path)
    saved = weights(path)
    # PopART's names: the state of each weight, and the weight updates so far (2 steps x 2 batches)
    for w in ("w", "b"):
        for prefix in STATE[kind]:
            assert saved[prefix + w].shape == saved[w].shape and np.abs(saved[prefix + w]).sum() > 0
        assert saved["Step___" + w].shape == () and saved["Step___" + w] == 4.0
    assert {n for n in saved if "___" in n} == {p + w for p in STATE[kind] + ["Step___"] for w in "wb"}

    resumed = session(path, loss, OPTIMIZERS[kind]())
    got.append(run(resumed, loss, range(2, 5)))
    np.testing.assert_array_equal(np.concatenate(got), want)
    resumed.modelToHost(str(tmp_path / "resumed.onnx"))
    final, whole_final = weights(str(tmp_path / "resumed.onnx")), weights(str(tmp_path / "whole.onnx"))
    assert sorted(final) == sorted(whole_final)
    for name in final:
        np.testing.assert_array_equal(final[name], whole_final[name], err_msg=name)

    # without the state (weights only), training takes another path
    fresh = onnx.load(path)
    keep = [t for t in fresh.graph.initializer if "___" not in t.name]
    del fresh.graph.initializer[:]
    fresh.graph.initializer.extend(keep)
    restarted = session(fresh, loss, OPTIMIZERS[kind]())
    assert not np.array_equal(run(restarted, loss, range(2, 5)), want[4:])


@pytest.mark.parametrize("kind", ["adamw", "sgd"])
def test_saved_state_resumes_with_accumulation_and_replicas(kind, tmp_path):
    """Two replicas, gradients accumulated over two micro-batches: Step___ counts weight
    updates (one a run) and the resumed run equals the uninterrupted one (Adam, and
    PopART's combined SGD state)."""
    model, loss = classifier()

    def make(m):
        o = popart.SessionOptions()
        o.enableGradientAccumulation, o.accumulationFactor = True, 2
        o.enableReplicatedGraphs, o.replicatedGraphCount = True, 2
        s = popart.TrainingSession(m, popart.DataFlow(1, [loss]), loss, OPTIMIZERS[kind](),
                                   deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
                                   userOptions=o)
        s.prepareDevice()
        return s

    def steps(s, ks):
        anchors = s.initAnchorArrays()
        out = []
        for k in ks:  # [accumulation, replicas, 4, 8]
            s.run(popart.PyStepIO({"x": np.concatenate([XS[k], XS[k][::-1]]).reshape(2, 2, 4, 8),
                                   "label": np.concatenate([LS[k], LS[k][::-1]]).reshape(2, 2, 4)}, anchors))
            out.append(anchors[loss].copy())
        return np.stack(out)

    want = steps(make(model), range(4))
    first = make(model)
    got = [steps(first, range(2))]
    path = str(tmp_path / "acc.onnx")
    first.modelToHost(path)
    assert weights(path)["Step___w"] == 2.0
    got.append(steps(make(path), range(2, 4)))
    np.testing.assert_array_equal(np.concatenate(got), want)


def test_state_files_in_inference_reset_and_other_optimizers(tmp_path, capsys):
    model, loss = classifier()
    s = session(model, loss, OPTIMIZERS["adamw"]())
    run(s, loss, range(2))
    path = str(tmp_path / "adam.onnx")
    s.modelToHost(path)
    saved = weights(path)

    # an InferenceSession ignores the state, as PopART's inference graph has none
    infer = popart.InferenceSession(path, popart.DataFlow(1, ["w"]), cpu())
    infer.prepareDevice()

    # resetHostWeights in a training session loads the state too: it continues as the saver
    again = session(model, loss, OPTIMIZERS["adamw"]())
    again.resetHostWeights(path)
    again.weightsFromHost()
    np.testing.assert_array_equal(run(again, loss, range(2, 4)), run(s, loss, range(2, 4)))

    # an SGD session ignores Adam's state (PopART looks up only its own), with a warning
    popart.getLogger("session").setLevel("WARN")
    sgd = session(path, loss, OPTIMIZERS["sgd"]())
    run(sgd, loss, range(1))
    assert "Accl1___w" in capsys.readouterr().err

    # a state of the wrong shape or with differing steps is a popart_exception
    bad = onnx.load(path)
    for t in bad.graph.initializer:
        if t.name == "Accl1___b":
            t.CopyFrom(onnx.numpy_helper.from_array(np.zeros(3, np.float32), t.name))
    with pytest.raises(popart.popart_exception, match=r"Accl1___b.*\(3,\).*\(5,\)"):
        session(bad, loss, OPTIMIZERS["adamw"]())
    bad = onnx.load(path)
    for t in bad.graph.initializer:
        if t.name == "Step___b":
            t.CopyFrom(onnx.numpy_helper.from_array(np.asarray(7.0, np.float32), t.name))
    with pytest.raises(popart.popart_exception, match="step counts differ"):
        session(bad, loss, OPTIMIZERS["adamw"]())
    assert saved["Step___w"] == 4.0


def dropout_session(replicas=1, enable=True):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), "x")
    w = b.addInitializedInputTensor(np.full((6, 6), 0.5, np.float32), "w")
    y, mask = b.aiOnnx.dropout([b.aiOnnx.matmul([x, w])], num_outputs=2, ratio=0.5)
    loss = b.aiGraphcore.identityloss([y])
    opts = popart.SessionOptions()
    opts.enableLoadAndOffloadRNGState = enable
    if replicas > 1:
        opts.enableReplicatedGraphs = True
        opts.replicatedGraphCount = replicas
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, [mask]), loss, popart.ConstSGD(0.0),
                               deviceInfo=popart.DeviceManager().acquireAvailableDevice(replicas),
                               userOptions=opts)
    s.prepareDevice()
    return s, mask


@pytest.mark.parametrize("replicas", [1, 2])
def test_rng_state_restores_the_dropout_masks(replicas):
    s, mask = dropout_session(replicas)
    x = RNG.standard_normal([2, replicas, 4, 6]).astype(np.float32)
    anchors = s.initAnchorArrays()

    def masks():
        s.run(popart.PyStepIO({"x": x}, anchors))
        return anchors[mask].copy()

    masks()
    state = s.getRNGState()
    assert isinstance(state, list) and len(state) == 10 * replicas
    assert all(isinstance(v, int) and 0 <= v < 2 ** 32 for v in state)
    first, second = masks(), masks()
    assert not np.array_equal(first, second)  # the stream moves on
    if replicas > 1:
        assert not np.array_equal(first[:, 0], first[:, 1])  # each replica its own stream
    s.setRNGState(state)
    assert s.getRNGState() == state
    np.testing.assert_array_equal(masks(), first)  # the same masks again
    np.testing.assert_array_equal(masks(), second)
    s.deviceInfo.detach()

    # any words of the right size are taken and given back (PopART's test); a wrong size is not
    words = list(range(len(state)))
    s.setRNGState(words)
    assert s.getRNGState() == words
    n = 10 * replicas
    with pytest.raises(popart.popart_exception, match=f"received rngState of size {n + 1}; was expecting "
                                                      f"size {n}"):
        s.setRNGState(state + [0])
    with pytest.raises(popart.popart_exception, match="uint32"):
        s.setRNGState([-1] + state[1:])


def test_rng_state_needs_the_session_option():
    s, _ = dropout_session(enable=False)
    with pytest.raises(popart.popart_exception, match="enableLoadAndOffloadRNGState"):
        s.getRNGState()
    s.deviceInfo.detach()


# -- AdamMode.AdaMax -----------------------------------------------------------------
def adamax_reference(steps, lr, b1, b2, eps, wd, decoupled):
    """PopART's AdaMax in float64 (its AdamUpdater equations): m = b1 m + (1 - b1) g,
    u = max(b2 u, |g|), w -= lr ((m / (1 - b1^t)) / (u + eps) + wd w) (Decay) or the
    gradient plus wd w (L2Regularization); g the gradient of the classifier's mean
    NLL, one update per batch (batchesPerStep 2: two a run)."""
    w, b = W0.astype(np.float64), B0.astype(np.float64)
    state = {k: [np.zeros_like(v), np.zeros_like(v)] for k, v in (("w", w), ("b", b))}
    losses = []
    t = 0
    for k in steps:
        for x, lbl in zip(XS[k].astype(np.float64), LS[k]):
            t += 1
            z = x @ w + b
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            losses.append(-np.log(p[np.arange(4), lbl]).mean())
            dz = p.copy()
            dz[np.arange(4), lbl] -= 1
            dz /= 4
            new = {}
            for name, v, g in (("w", w, x.T @ dz), ("b", b, dz.sum(0))):
                m, u = state[name]
                if not decoupled:
                    g = g + wd * v
                m[:] = b1 * m + (1 - b1) * g
                u[:] = np.maximum(b2 * u, np.abs(g))
                upd = (m / (1 - b1 ** t)) / (u + eps) + (wd * v if decoupled else 0)
                new[name] = v - lr * upd
            w, b = new["w"], new["b"]
    return np.array(losses), w, b, state


@pytest.mark.parametrize("wd_mode", [popart.WeightDecayMode.Decay, popart.WeightDecayMode.L2Regularization])
def test_adamax_equals_popart_s_update_rule(wd_mode, tmp_path):
    model, loss = classifier()
    values = {"defaultLearningRate": (0.02, False), "defaultBeta1": (0.8, True), "defaultBeta2": (0.95, True),
              "defaultEps": (1e-3, True), "defaultWeightDecay": (0.05, True)}
    s = session(model, loss, popart.Adam(values, mode=popart.AdamMode.AdaMax, weight_decay_mode=wd_mode))
    got = run(s, loss, range(4))
    want, w, b, state = adamax_reference(range(4), 0.02, 0.8, 0.95, 1e-3, 0.05,
                                         wd_mode == popart.WeightDecayMode.Decay)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "adamax.onnx")
    s.modelToHost(path)
    saved = weights(path)
    np.testing.assert_allclose(saved["w"], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(saved["b"], b, rtol=1e-5, atol=1e-6)
    # its state is PopART's: the first moment and the infinity norm
    np.testing.assert_allclose(saved["Accl1___w"], state["w"][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(saved["Accl2___w"], state["w"][1], rtol=1e-5, atol=1e-6)
    assert saved["Step___w"] == 8.0
    # not Adam: the same values in AdamMode.Adam train differently
    adam = session(model, loss, popart.Adam(values, weight_decay_mode=wd_mode))
    assert np.abs(run(adam, loss, range(4)) - got).max() > 1e-3


# -- PopART's SGD state: Combined (Accl___) and Separate (Accl1___) --------------------
def _classifier_grads(w, b, x, lbl):
    """The loss and gradients of the classifier's mean NLL (float64)."""
    z = x @ w + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = p.copy()
    dz[np.arange(4), lbl] -= 1
    dz /= 4
    return -np.log(p[np.arange(4), lbl]).mean(), {"w": x.T @ dz, "b": dz.sum(0)}


def sgd_reference(steps, lr, mm, dm, wd, vs, combined, start=None):
    """PopART's SGD in float64, as its sgd.hpp writes the two implementations
    (one update per batch): Combined keeps a = mm v + (1 - dm) wd vs w (from
    a = (1 - dm) wd vs w0) and updates v = a + (1 - dm) vs g, w -= lr / vs v, then a
    again from the new w; Separate keeps v = mm v + (1 - dm) wd vs w + (1 - dm) vs g
    (from v = 0). `start`: (weights, state) to resume from. Returns the losses, the
    weights and the state as modelToHost writes it."""
    params = {"w": W0.astype(np.float64), "b": B0.astype(np.float64)}
    swd1, dpsf = (1 - dm) * wd * vs, (1 - dm) * vs
    state = {k: (swd1 * v if combined else np.zeros_like(v)) for k, v in params.items()}
    if start is not None:
        params = {k: v.astype(np.float64) for k, v in start[0].items()}
        state = {k: v.astype(np.float64) for k, v in start[1].items()}
    losses = []
    for k in steps:
        for x, lbl in zip(XS[k].astype(np.float64), LS[k]):
            loss, grads = _classifier_grads(params["w"], params["b"], x, lbl)
            losses.append(loss)
            for n, g in grads.items():
                if combined:
                    v = state[n] + dpsf * g
                    params[n] = params[n] - lr / vs * v
                    state[n] = mm * v + swd1 * params[n]
                else:
                    state[n] = mm * state[n] + swd1 * params[n] + dpsf * g
                    params[n] = params[n] - lr / vs * state[n]
    return np.array(losses), params, state


SGD_VALUES = {"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True),
              "defaultDampening": (0.2, True), "defaultWeightDecay": (0.05, True),
              "defaultVelocityScaling": (4.0, True)}


@pytest.mark.parametrize("form", ["Combined", "Separate"])
def test_sgd_state_is_popart_s_and_a_popart_file_resumes_as_popart(form, tmp_path):
    """SGD with momentum, dampening, weight decay and velocity scaling trains by
    PopART's equations (its first step damped, unlike PyTorch's), and modelToHost
    writes PopART's state: Combined's Accl___ with the next step's momentum and weight
    decay folded in, Separate's Accl1___ the scaled velocity. A file as PopART writes
    it mid-training (weights and that state, no Step___) resumes on PopART's path."""
    model, loss = classifier()
    combined = form == "Combined"
    prefix = "Accl___" if combined else "Accl1___"
    mode = getattr(popart.SGDAccumulatorAndMomentum, form)
    s = session(model, loss, popart.SGD(SGD_VALUES, accumulatorAndMomentum=mode))
    got = run(s, loss, range(2))
    want, params, state = sgd_reference(range(2), 0.1, 0.9, 0.2, 0.05, 4.0, combined)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "sgd.onnx")
    s.modelToHost(path)
    saved = weights(path)
    for n in ("w", "b"):
        np.testing.assert_allclose(saved[n], params[n], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(saved[prefix + n], state[n], rtol=1e-5, atol=1e-6)
    assert {t for t in saved if "___" in t} == {p + n for p in (prefix, "Step___") for n in "wb"}

    # PopART's file: the reference's weights and state after two steps, no step count
    popart_file = onnx.load(path)
    for t in popart_file.graph.initializer:
        if t.name in params or t.name[len(prefix):] in params and t.name.startswith(prefix):
            value = params[t.name] if t.name in params else state[t.name[len(prefix):]]
            t.CopyFrom(onnx.numpy_helper.from_array(value.astype(np.float32), t.name))
    keep = [t for t in popart_file.graph.initializer if not t.name.startswith("Step___")]
    del popart_file.graph.initializer[:]
    popart_file.graph.initializer.extend(keep)
    resumed = session(popart_file, loss, popart.SGD(SGD_VALUES, accumulatorAndMomentum=mode))
    want_more, _, _ = sgd_reference(range(2, 4), 0.1, 0.9, 0.2, 0.05, 4.0, combined,
                                    start=({n: params[n].astype(np.float32) for n in params},
                                           {n: state[n].astype(np.float32) for n in state}))
    np.testing.assert_allclose(run(resumed, loss, range(2, 4)), want_more, rtol=1e-5, atol=1e-6)
    # the same file read as the other form's is another optimizer's state (ignored, with a warning)
    other = popart.SGDAccumulatorAndMomentum.Separate if combined else popart.SGDAccumulatorAndMomentum.Combined
    fresh = session(popart_file, loss, popart.SGD(SGD_VALUES, accumulatorAndMomentum=other))
    assert not np.allclose(run(fresh, loss, range(2, 4)), want_more, rtol=1e-5, atol=1e-6)


def test_sgd_combined_state_before_training_and_form_checks(tmp_path):
    """Before any update the combined state is not written (a reader starts it from
    the weights, as PopART does); the form is structural: updateOptimizerFromHost
    cannot change it, and a wrong value is a popart_exception. Without dampening,
    PopART's SGD equals PyTorch's."""
    model, loss = classifier()
    s = session(model, loss, popart.SGD(SGD_VALUES))
    path = str(tmp_path / "fresh.onnx")
    s.modelToHost(path)
    assert not {t for t in weights(path) if t.startswith("Accl")}
    again = session(path, loss, popart.SGD(SGD_VALUES))
    np.testing.assert_array_equal(run(again, loss, range(2)), run(s, loss, range(2)))
    with pytest.raises(popart.popart_exception, match="SGD/Combined.*SGD/Separate"):
        s.updateOptimizerFromHost(popart.SGD(SGD_VALUES,
                                             accumulatorAndMomentum=popart.SGDAccumulatorAndMomentum.Separate))
    with pytest.raises(popart.popart_exception, match="accumulatorAndMomentum"):
        popart.SGD(SGD_VALUES, accumulatorAndMomentum="Combined")

    import torch

    plain = session(model, loss, popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True),
                                             "defaultWeightDecay": (0.05, True)}))
    got = run(plain, loss, range(3))
    w, b = torch.nn.Parameter(torch.tensor(W0)), torch.nn.Parameter(torch.tensor(B0))
    opt = torch.optim.SGD([w, b], lr=0.1, momentum=0.9, weight_decay=0.05)
    want = []
    for k in range(3):
        for x, lbl in zip(XS[k], LS[k]):
            opt.zero_grad()
            ref = torch.nn.functional.nll_loss(torch.log_softmax(torch.tensor(x) @ w + b, 1),
                                               torch.tensor(lbl).long())
            ref.backward()
            opt.step()
            want.append(ref.item())
    np.testing.assert_allclose(got, want, rtol=1e-5)


# -- runtime operands: Pad's constant value, Dropout's ratio ---------------------------
def test_pad_constant_value_from_a_graph_input_equals_onnxruntime():
    """Pad's constant_value computed from a graph input (a runtime value: the shapes do
    not depend on it), with growing and cropping pads; in training its gradient is the
    loss's over the padding (one per padded element for a summed loss)."""
    import onnxruntime as ort

    b = popart.Builder(opsets={"ai.onnx": 13, "ai.graphcore": 1})
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 4]), "x")
    c = b.addInputTensor(popart.TensorInfo("FLOAT", []), "c")
    cv = b.aiOnnx.mul([c, b.aiOnnx.constant(np.array(2.0, np.float32))])  # computed from the input
    pads = b.aiOnnx.constant(np.array([1, -1, 2, 3], np.int64))  # rows +1/+2, columns -1/+3
    y = b.aiOnnx.pad([x, pads, cv], mode="constant")
    b.addOutputTensor(y)
    proto = b.getModelProto()
    loss = b.aiGraphcore.identityloss([y], popart.ReductionType.Sum)
    xv = RNG.standard_normal((3, 4)).astype(np.float32)
    ref = ort.InferenceSession(proto, providers=["CPUExecutionProvider"])
    s = popart.InferenceSession(proto, popart.DataFlow(2, [y]), cpu())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    cs = np.array([1.5, -0.25], np.float32)  # one value per batch, the same program
    s.run(popart.PyStepIO({x: np.stack([xv, xv]), c: cs}, anchors))
    for k in range(2):
        (want,) = ref.run([y], {x: xv, c: np.asarray(cs[k])})
        assert anchors[y][k].shape == (6, 6)
        np.testing.assert_array_equal(anchors[y][k], want)

    t = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, ["Gradient___c", "Gradient___x"]), loss,
                               popart.ConstSGD(0.0), deviceInfo=cpu())
    t.prepareDevice()
    grads = t.initAnchorArrays()
    t.run(popart.PyStepIO({x: xv, c: np.array(1.0, np.float32)}, grads))
    assert grads["Gradient___c"] == 2.0 * (36 - 3 * 3)  # 27 padded elements, d(2c)/dc = 2
    np.testing.assert_array_equal(grads["Gradient___x"], np.where(np.arange(4) >= 1, 1.0, 0.0)[None]
                                  .repeat(3, 0).astype(np.float32))


def test_dropout_ratio_from_a_graph_input():
    """Dropout's ratio given at run time: inference is the identity whatever it is; in
    training each element is kept with probability 1 - ratio and scaled by 1 / (1 - ratio),
    the mask telling which, ratio 0 keeping everything."""
    b = popart.Builder(opsets={"ai.onnx": 13, "ai.graphcore": 1})
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [64, 32]), "x")
    r = b.addInputTensor(popart.TensorInfo("FLOAT", []), "r")
    w = b.addInitializedInputTensor(np.ones((32, 32), np.float32) / 32, "w")
    h = b.aiOnnx.matmul([x, w])
    y, mask = b.aiOnnx.dropout([h, r], num_outputs=2)
    loss = b.aiGraphcore.identityloss([y])
    proto = b.getModelProto()
    xv = RNG.standard_normal((3, 64, 32)).astype(np.float32) + 4
    rs = np.array([0.0, 0.25, 0.75], np.float32)

    s = popart.InferenceSession(proto, popart.DataFlow(3, [h, y, mask]), cpu())
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: xv, r: rs}, anchors))
    np.testing.assert_array_equal(anchors[y], anchors[h])
    assert anchors[mask].all()

    t = popart.TrainingSession(proto, popart.DataFlow(3, [h, y, mask]), loss, popart.ConstSGD(0.0),
                               deviceInfo=cpu())
    t.prepareDevice()
    t.setRandomSeed(11)
    anchors = t.initAnchorArrays()
    t.run(popart.PyStepIO({x: xv, r: rs}, anchors))
    keep = anchors[mask]
    assert keep.dtype == np.bool_ and keep[0].all()
    for k, ratio in enumerate(rs):
        np.testing.assert_allclose(anchors[y][k], np.where(keep[k], anchors[h][k] / (1 - ratio), 0),
                                   rtol=1e-6)
        assert abs(keep[k].mean() - (1 - ratio)) < 0.05  # 2048 draws


def test_sgd_without_momentum_damps_the_step_as_popart_s_sgd0():
    """A constant momentum of 0 keeps no state (PopART's SGD0, nothing written) and the
    dampening scales the step, w -= lr (1 - dm)(g + wd w), where PyTorch ignores it."""
    model, loss = classifier()
    values = {"defaultLearningRate": (0.1, False), "defaultDampening": (0.4, True),
              "defaultWeightDecay": (0.05, True)}
    s = session(model, loss, popart.SGD(values))
    got = run(s, loss, range(2))
    params = {"w": W0.astype(np.float64), "b": B0.astype(np.float64)}
    want = []
    for k in range(2):
        for x, lbl in zip(XS[k].astype(np.float64), LS[k]):
            value, grads = _classifier_grads(params["w"], params["b"], x, lbl)
            want.append(value)
            params = {n: v - 0.1 * 0.6 * (grads[n] + 0.05 * v) for n, v in params.items()}
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    s.weightsToHost()
    out = {"w": np.empty((8, 5), np.float32)}
    s.readWeights(popart.PyWeightsIO(out))
    np.testing.assert_allclose(out["w"], params["w"], rtol=1e-5, atol=1e-6)
