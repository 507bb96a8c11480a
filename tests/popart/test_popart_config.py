"""A session's options as the compiler driver's CompileConfig
(popart/session.py `_compile_config`): what PopTorch's Options of the same
settings compile with (api/compile_config.py), the strategy built by
driver/strategy.py, and the runner's executor that runs it (runner/runner.py),
with nothing of PopTorch's surface."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from tilefx import popart
from tilefx.api.compile_config import compile_config
from tilefx.api.options import Options
from tilefx.api.strategies import (Phase, PipelinedExecution, SerialPhasedExecution, ShardedExecution,
                                   Stage)
from tilefx.driver import CompileConfig
from tilefx.errors import Error
from tilefx.runner.runner import Runner
from tilefx.runner.settings import HostSettings

W = np.ones((4, 4), np.float32)


def _session(training=True, ipus=2, bps=2, **options):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
    w0, w1 = b.addInitializedInputTensor(W, "w0"), b.addInitializedInputTensor(W, "w1")
    phases = options.pop("phases", False)
    with b.virtualGraph(0), (b.executionPhase(0) if phases else b.pipelineStage(0)):
        h = b.aiOnnx.matmul([x, w0])
    with b.virtualGraph(1), (b.executionPhase(1) if phases else b.pipelineStage(1)):
        loss = b.aiGraphcore.l1loss([b.aiOnnx.matmul([h, w1])], 0.1)
    opts = popart.SessionOptions()
    for k, v in options.items():
        setattr(opts, k, v)
    device = popart.DeviceManager().createIpuModelDevice({"numIPUs": ipus})
    flow = popart.DataFlow(bps, {loss: popart.AnchorReturnType("ALL")})
    if training:
        return popart.TrainingSession(b.getModelProto(), flow, loss, popart.ConstSGD(0.1), deviceInfo=device,
                                      userOptions=opts)
    return popart.InferenceSession(b.getModelProto(), flow, deviceInfo=device, userOptions=opts)


def _poptorch(training, bps, machine, strategy=None, accumulation=1, replicas=1, half=False, rounding=False,
              seed=None, decompose=False) -> Options:
    """PopTorch's Options of the same settings (PopART's default recomputation,
    None, set: PopTorch's default, Pipeline over several IPUs, is its own)."""
    o = Options()
    o._Popart.set("autoRecomputation", 0)
    o.deviceIterations(bps)
    o.replicationFactor(replicas)
    o.setMachine(machine)
    if training:
        o.Training.gradientAccumulation(accumulation)
    if rounding:
        o.Precision.enableStochasticRounding(True)
    if half:
        o.Precision.setPartialsType(torch.half)
    if seed is not None:
        o.randomSeed(seed)
    if decompose:
        o._Popart.set("decomposeGradSum", True)
    if strategy is not None:
        o.setExecutionStrategy(strategy)
    return o


CASES = [
    ({}, None, {}),
    ({"virtualGraphMode": popart.VirtualGraphMode.Manual, "enablePipelining": True},
     PipelinedExecution(Stage("stage0").ipu(0), Stage("stage1").ipu(1)), {}),
    ({"virtualGraphMode": popart.VirtualGraphMode.Manual},
     ShardedExecution(Stage("stage0").ipu(0), Stage("stage1").ipu(1)), {}),
    ({"virtualGraphMode": popart.VirtualGraphMode.Auto, "enablePipelining": True}, PipelinedExecution.auto(2), {}),
    ({"virtualGraphMode": popart.VirtualGraphMode.Auto}, ShardedExecution.auto(2), {}),
    ({"virtualGraphMode": popart.VirtualGraphMode.ExecutionPhases, "phases": True},
     SerialPhasedExecution(Phase(Stage("phase0").ipu(0)), Phase(Stage("phase1").ipu(1))), {}),
    ({"enableGradientAccumulation": True, "accumulationFactor": 3, "enableReplicatedGraphs": True,
      "replicatedGraphCount": 2, "partialsTypeMatMuls": "half", "enableStochasticRounding": True, "seed": 7,
      "decomposeGradSum": True},
     None, {"accumulation": 3, "replicas": 2, "half": True, "rounding": True, "seed": 7, "decompose": True}),
]


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("options, strategy, same", CASES)
def test_a_sessions_config_is_poptorchs_of_the_same_settings(training, options, strategy, same):
    if not training and same.get("accumulation", 1) > 1:
        same = {k: v for k, v in same.items() if k != "accumulation"}
        options = {k: v for k, v in options.items() if k not in ("enableGradientAccumulation", "accumulationFactor")}
    s = _session(training, **options)
    expected = compile_config(_poptorch(training, 2, s.deviceInfo.machine, strategy, **same), training)
    got = s._compile_config()
    assert isinstance(got, CompileConfig)
    assert got == expected
    assert list(got.strategy) == list(expected.strategy)  # the same attribute, key for key


def test_a_session_runs_its_config_on_the_runner():
    s = _session(virtualGraphMode=popart.VirtualGraphMode.Manual, enablePipelining=True,
                 enableGradientAccumulation=True, accumulationFactor=4,
                 accumulationAndReplicationReductionType=popart.ReductionType.Mean)
    s.prepareDevice()
    ex = s._executor
    assert type(ex) is Runner  # not PopTorch's wrapper
    assert s._host_settings() == HostSettings(mean_reduction=True)
    assert ex.profile.num_ipus == 2 and ex.profile.strategy == "pipelined"  # the config's strategy
    assert ex.profile.updates_per_call == 2  # batchesPerStep weight updates of 4 micro-batches each


def test_the_runner_takes_a_config_and_host_settings():
    with pytest.raises(Error, match="expects a tilefx.driver.CompileConfig"):
        Runner(torch.nn.Linear(2, 2), Options(), HostSettings())
    with pytest.raises(Error, match="expects a tilefx.runner.settings.HostSettings"):
        Runner(torch.nn.Linear(2, 2), CompileConfig(), Options())


def test_a_popart_session_imports_nothing_of_poptorchs_surface():
    """PopART's sessions compile, train, export and load on the layers
    beneath both surfaces: a process that runs one imports no module of
    tilefx.api beyond those the package adds to torch when both are loaded
    (`model.autocast()`, tilefx/__init__.py)."""
    code = """
import sys, tempfile, os
import numpy as np
import torch, tilefx
package = {m for m in sys.modules if m.startswith("tilefx.api")}
from tilefx import popart
b = popart.Builder()
x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 4]), "x")
w = b.addInitializedInputTensor(np.ones((4, 4), np.float32), "w")
loss = b.aiGraphcore.l1loss([b.aiOnnx.matmul([x, w])], 0.1)
def session():
    return popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [loss]), loss, popart.SGD(0.1),
                                  deviceInfo=popart.DeviceManager().createCpuDevice())
s = session()
path = os.path.join(tempfile.mkdtemp(), "model.popef")
s.compileAndExport(path)
t = session()
t.loadExecutable(path)
t.prepareDevice()
t.weightsFromHost()
anchors = t.initAnchorArrays()
t.run(popart.PyStepIO({"x": np.ones((2, 4), np.float32)}, anchors))
print(sorted(m for m in sys.modules if m.startswith("tilefx.api") and m not in package))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "[]"


def test_the_executable_cache_tells_strategies_apart(tmp_path):
    """Two sessions of one graph that differ only in their strategy (which
    the options do not hold: pipelined or sharded) compile two programs,
    not one cached for both."""
    keys, kinds = [], []
    for pipelined in (True, False):
        s = _session(training=False, virtualGraphMode=popart.VirtualGraphMode.Manual, enablePipelining=pipelined,
                     enableEngineCaching=True, cachePath=str(tmp_path))
        s.prepareDevice()
        keys.append(s._executor.executable_cache_key([torch.zeros(4, 4)]))
        kinds.append(s._executor.profile.strategy)
    assert kinds == ["pipelined", "sharded"]
    assert keys[0] != keys[1]
