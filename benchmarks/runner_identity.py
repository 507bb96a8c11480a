"""The host loop's numbers through both surfaces, saved from one tree and
compared bit for bit with another's.

    python benchmarks/runner_identity.py save OUT.npz
    python benchmarks/runner_identity.py compare OUT.npz

PopART: a two-IPU classifier with dropout (a matmul, ReLU and dropout on
IPU 0, a matmul, softmax and NLL loss on IPU 1) runs in 8 option sets
(replication, accumulation with Sum and with Mean reduction, pipelined,
sharded, automatic stages, phased, half partials with stochastic rounding,
and a session loaded from the file another one exported), each as a
TrainingSession (SGD with momentum, three steps) and an InferenceSession: 16
seeded sessions. Their anchors, their weights after running (weightsToHost +
readWeights) and their cycle counts are saved. PopTorch: a training model
with AdamW and dropout, one over 2 replicas with accumulation, a pipelined
one, and an inference model: their outputs and weights after three steps.
`compare` reruns everything and fails unless each array is equal bit for
bit (`np.array_equal` on the raw bytes, so NaNs and signed zeros count).
The kernels run on one thread (TILEFX_BLAS_THREADS=1, unless set): a
reduction split over another number of threads rounds differently.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile

import numpy as np

os.environ.setdefault("TILEFX_BLAS_THREADS", "1")
import torch  # noqa: E402
from torch import nn  # noqa: E402

import tilefx  # noqa: E402
from tilefx import popart  # noqa: E402
from identity_file import save_or_compare  # noqa: E402

BPS = 2
RNG = np.random.default_rng(0)
W0 = (RNG.standard_normal((8, 8)) * 0.3).astype(np.float32)
W1 = (RNG.standard_normal((8, 5)) * 0.3).astype(np.float32)

# name -> (SessionOptions fields, replicas, accumulation, phased)
OPTION_SETS = {
    "replicated": ({"enableReplicatedGraphs": True, "replicatedGraphCount": 2}, 2, 1, False),
    "accumulate_sum": ({"enableGradientAccumulation": True, "accumulationFactor": 3}, 1, 3, False),
    "accumulate_mean": ({"enableGradientAccumulation": True, "accumulationFactor": 3,
                         "accumulationAndReplicationReductionType": "Mean"}, 1, 3, False),
    "pipelined": ({"virtualGraphMode": "Manual", "enablePipelining": True,
                   "enableGradientAccumulation": True, "accumulationFactor": 4}, 1, 4, False),
    "sharded": ({"virtualGraphMode": "Manual"}, 1, 1, False),
    "auto": ({"virtualGraphMode": "Auto"}, 1, 1, False),
    "phased": ({"virtualGraphMode": "ExecutionPhases"}, 1, 1, True),
    "half_partials_sr": ({"partialsTypeMatMuls": "half", "enableStochasticRounding": True}, 1, 1, False),
}


def _model(phased: bool):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
    label = b.addInputTensor(popart.TensorInfo("INT32", [4]), "label")
    w0, w1 = b.addInitializedInputTensor(W0, "w0"), b.addInitializedInputTensor(W1, "w1")
    with b.virtualGraph(0), (b.executionPhase(0) if phased else b.pipelineStage(0)):
        h = b.aiOnnx.dropout([b.aiOnnx.relu([b.aiOnnx.matmul([x, w0])])], num_outputs=1, ratio=0.25)[0]
    with b.virtualGraph(1), (b.executionPhase(1) if phased else b.pipelineStage(1)):
        y = b.aiOnnx.softmax([b.aiOnnx.matmul([h, w1])], axis=1)
        loss = b.aiGraphcore.nllloss([y, label], popart.ReductionType.Mean)
    return b.getModelProto(), y, loss


def _options(fields: dict):
    opts = popart.SessionOptions()
    for k, v in fields.items():
        if k == "virtualGraphMode":
            v = getattr(popart.VirtualGraphMode, v)
        elif k == "accumulationAndReplicationReductionType":
            v = getattr(popart.ReductionType, v)
        setattr(opts, k, v)
    opts.instrumentWithHardwareCycleCounter = True
    return opts


def _session(name: str, training: bool, export_dir: str | None = None):
    fields, replicas, accumulation, phased = OPTION_SETS[name]
    if not training:
        fields = {k: v for k, v in fields.items() if k not in ("enableGradientAccumulation", "accumulationFactor",
                                                               "accumulationAndReplicationReductionType")}
        accumulation = 1
    proto, y, loss = _model(phased)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": 2 * replicas})
    flow = popart.DataFlow(BPS, {y: popart.AnchorReturnType("ALL"), loss: popart.AnchorReturnType("ALL")})
    if training:
        s = popart.TrainingSession(proto, flow, loss, popart.SGD({"defaultLearningRate": (0.1, False),
                                                                  "defaultMomentum": (0.9, True)}),
                                   deviceInfo=device, userOptions=_options(fields))
    else:
        s = popart.InferenceSession(proto, flow, deviceInfo=device, userOptions=_options(fields))
    return s, y, loss, replicas, accumulation


def _popart_run(name: str, training: bool, out: dict, exported: bool = False) -> None:
    key = f"popart/{name}{'_exported' if exported else ''}/{'train' if training else 'infer'}"
    s, y, loss, replicas, accumulation = _session(name, training)
    if exported:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.popef")
            s.compileAndExport(path)
            s, y, loss, replicas, accumulation = _session(name, training)
            s.loadExecutable(path)
            s.prepareDevice()  # (reads the file)
    else:
        s.prepareDevice()
    s.weightsFromHost()
    s.setRandomSeed(11)
    lead = [d for d in (BPS, accumulation, replicas) if d > 1]
    data = np.random.default_rng(1)
    for step in range(3 if training else 2):
        anchors = s.initAnchorArrays()
        feed = {"x": data.standard_normal(lead + [4, 8]).astype(np.float32),
                "label": data.integers(0, 5, lead + [4]).astype(np.int32)}
        s.run(popart.PyStepIO(feed, anchors))
        for a in (y, loss):
            out[f"{key}/step{step}/{a}"] = np.array(anchors[a])
        out[f"{key}/step{step}/cycles"] = np.array(s.getCycleCount())
    s.weightsToHost()
    weights = {"w0": np.empty_like(W0), "w1": np.empty_like(W1)}
    s.readWeights(popart.PyWeightsIO(weights))
    for n, w in weights.items():
        out[f"{key}/weights/{n}"] = w


class _Net(nn.Module):
    def __init__(self, dropout: float = 0.0):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 5)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, label=None):
        y = self.b(self.drop(torch.relu(self.a(x))))
        if label is None:
            return y
        return y, nn.functional.cross_entropy(y, label)


class _Piped(_Net):
    def forward(self, x, label):
        with tilefx.Block("s0", ipu_id=0):
            h = torch.relu(self.a(x))
        with tilefx.Block("s1", ipu_id=1):
            y = self.b(h)
            return y, nn.functional.cross_entropy(y, label)


def _poptorch_run(name: str, out: dict) -> None:
    opts = tilefx.Options()
    opts.randomSeed(5)
    n = 4
    if name == "adamw_dropout":
        model, training = _Net(0.3), True
        opt = torch.optim.AdamW
    elif name == "replicas2":
        model, training = _Net(0.1), True
        opts.replicationFactor(2)
        opts.Training.gradientAccumulation(2)
        n = 16
        opt = torch.optim.SGD
    elif name == "pipelined":
        model, training = _Piped(), True
        opts.setExecutionStrategy(tilefx.PipelinedExecution("s0", "s1"))
        opts.Training.gradientAccumulation(4)
        n = 16
        opt = torch.optim.SGD
    else:
        model, training = _Net(0.3), False
        opts.deviceIterations(2)
        n = 8
    data = torch.Generator().manual_seed(2)
    model = copy.deepcopy(model)
    if training:
        ex = tilefx.trainingModel(model, opts, optimizer=opt(model.parameters(), lr=0.01))
    else:
        ex = tilefx.inferenceModel(model, opts)
    for step in range(3):
        x = torch.randn(n, 8, generator=data)
        label = torch.randint(0, 5, (n,), generator=data)
        res = ex(x, label) if training else ex(x)
        for i, t in enumerate(res if isinstance(res, tuple) else (res,)):
            out[f"poptorch/{name}/step{step}/out{i}"] = t.detach().numpy().copy()
    if training:
        ex.copyWeightsToHost()
    for k, v in ex.model.state_dict().items():
        out[f"poptorch/{name}/weights/{k}"] = v.detach().numpy().copy()
    ex.destroy()


def run() -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name in OPTION_SETS:
        for training in (True, False):
            _popart_run(name, training, out)
    for training in (True, False):  # the 8th set: a file one session exported, another loaded
        _popart_run("sharded", training, out, exported=True)
    for name in ("adamw_dropout", "replicas2", "pipelined", "inference_dropout"):
        _poptorch_run(name, out)
    return out


def main() -> int:
    return save_or_compare(run, __doc__)


if __name__ == "__main__":
    sys.exit(main())
