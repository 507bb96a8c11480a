"""PopART's session API on the simulated IPU: build, train, save, reload, infer.

    python examples/popart_session.py [--steps 30] [--model trained_model.onnx]

1. Build a two-layer classifier with `popart.Builder` (Gemm, Relu, Softmax
   and PopART's nllloss), the layers on two IPUs as two pipeline stages.
2. Train it with a `TrainingSession`: SGD with momentum, 4 batches per step,
   gradient accumulation over 4 micro-batches, pipelined over 2 simulated
   IPUs; the learning rate decays through `updateOptimizerFromHost`.
3. Save the trained model with `modelToHost` (an ONNX file).
4. Reload the file in an `InferenceSession` and measure the accuracy on
   held-out data; print the summary report of the simulated machine.

The data are two-dimensional Gaussian blobs (nothing to download).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from tilefx import popart

CLASSES, FEATURES, HIDDEN, MICRO_BATCH = 4, 2, 16, 8
BPS, ACCUM = 4, 4


def make_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    centres = np.array([[2.0, 2.0], [-2.0, 2.0], [-2.0, -2.0], [2.0, -2.0]], np.float32)
    labels = rng.integers(0, CLASSES, n).astype(np.int32)
    points = centres[labels] + rng.standard_normal((n, FEATURES)).astype(np.float32)
    return points, labels


def build(rng: np.random.Generator) -> tuple[bytes, str, str]:
    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [MICRO_BATCH, FEATURES]), "x")
    label = builder.addInputTensor(popart.TensorInfo("INT32", [MICRO_BATCH]), "label")
    w1 = builder.addInitializedInputTensor(
        (rng.standard_normal((FEATURES, HIDDEN)) * 0.5).astype(np.float32), "fc1.weight")
    b1 = builder.addInitializedInputTensor(np.zeros(HIDDEN, np.float32), "fc1.bias")
    w2 = builder.addInitializedInputTensor(
        (rng.standard_normal((HIDDEN, CLASSES)) * 0.5).astype(np.float32), "fc2.weight")
    b2 = builder.addInitializedInputTensor(np.zeros(CLASSES, np.float32), "fc2.bias")
    with builder.virtualGraph(0), builder.pipelineStage(0):
        h = builder.aiOnnx.relu([builder.aiOnnx.gemm([x, w1, b1])])
    with builder.virtualGraph(1), builder.pipelineStage(1):
        probs = builder.aiOnnx.softmax([builder.aiOnnx.gemm([h, w2, b2])], axis=1, debugContext="probs")
        loss = builder.aiGraphcore.nllloss([probs, label], popart.ReductionType.Mean)
    builder.addOutputTensor(probs)
    return builder.getModelProto(), probs, loss


def sgd(lr: float) -> popart.SGD:
    return popart.SGD({"defaultLearningRate": (lr, False), "defaultMomentum": (0.9, True)})


def train(proto: bytes, loss: str, steps: int, rng: np.random.Generator, path: str) -> list[float]:
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = ACCUM
    opts.virtualGraphMode = popart.VirtualGraphMode.Manual
    opts.enablePipelining = True
    session = popart.TrainingSession(
        proto, popart.DataFlow(BPS, {loss: popart.AnchorReturnType("ALL")}), loss, sgd(0.05),
        deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}), userOptions=opts)
    session.prepareDevice()
    session.weightsFromHost()
    anchors = session.initAnchorArrays()  # {loss: [BPS, ACCUM]}
    losses = []
    for step in range(steps):
        session.updateOptimizerFromHost(sgd(0.05 * 0.97 ** step))
        x, y = make_data(BPS * ACCUM * MICRO_BATCH, rng)
        session.run(popart.PyStepIO({"x": x.reshape(BPS, ACCUM, MICRO_BATCH, FEATURES),
                                     "label": y.reshape(BPS, ACCUM, MICRO_BATCH)}, anchors))
        losses.append(float(anchors[loss].mean()))
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:3d}  mean loss {losses[-1]:.4f}")
    session.modelToHost(path)
    return losses


def evaluate(path: str, probs: str, rng: np.random.Generator, batches: int = 16) -> tuple[float, str]:
    session = popart.InferenceSession(
        path, popart.DataFlow(batches, {probs: popart.AnchorReturnType("ALL")}),
        popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}))
    session.prepareDevice()
    anchors = session.initAnchorArrays()  # {probs: [batches, MICRO_BATCH, CLASSES]}
    x, y = make_data(batches * MICRO_BATCH, rng)
    session.run(popart.PyStepIO({"x": x.reshape(batches, MICRO_BATCH, FEATURES),
                                 "label": y.reshape(batches, MICRO_BATCH)}, anchors))
    accuracy = float((anchors[probs].reshape(-1, CLASSES).argmax(1) == y).mean())
    return accuracy, session.getSummaryReport()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model", default=None, help="where to save the trained ONNX model")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    proto, probs, loss = build(rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model or os.path.join(tmp, "trained_model.onnx")
        losses = train(proto, loss, args.steps, rng, path)
        accuracy, report = evaluate(path, probs, rng)
    print(f"held-out accuracy of the reloaded model: {accuracy:.3f}")
    print(report)
    return {"losses": losses, "accuracy": accuracy}


if __name__ == "__main__":
    main()
