"""tilefx.popart's devices, placement, reports, logging and errors: the
simulated device manager, pipelined and phased sessions against one IPU and
PyTorch, the execution report and cycle count, PopART's logger, and the
exception hierarchy."""

import re

import numpy as np
import pytest
import torch

import tilefx
from tilefx import popart
from test_popart import B0, W0, cpu, scaled_model

RNG = np.random.default_rng(1)


def test_device_manager_simulated_pod():
    dm = popart.DeviceManager()
    # enumerateDevices lists the devices of numIpus IPUs (default 1), ids as gc-info numbers them
    assert [d.id for d in dm.enumerateDevices()] == list(range(16))
    assert [(d.id, d.numIpus) for d in dm.enumerateDevices(numIpus=8)] == [(28, 8), (29, 8)]
    assert [d.id for d in dm.enumerateDevices(numIpus=16)] == [30] and not dm.enumerateDevices(numIpus=3)
    assert dm.enumerateDevices(numIpus=2, deviceType=popart.DeviceType.IpuModel) == []
    # Acquire IPU configuration 5
    dev = dm.acquireDeviceById(5)
    assert dev.isAttached and dev.numIpus == 1
    with pytest.raises(popart.popart_exception, match="Failed to acquire device with id '5'"):
        dm.acquireDeviceById(5)
    assert dm.tryAcquireDeviceById(5) is None
    with pytest.raises(popart.poplar_exception, match="No such device set id: '999'"):
        dm.acquireDeviceById(999)
    # Acquire a two-IPU pair
    pair = dm.acquireAvailableDevice(2)
    assert pair.numIpus == 2 and pair.isAttached and 5 not in pair.driverIds
    # Acquire four IPUs on demand
    connectionType = popart.DeviceConnectionType.OnDemand
    quad = dm.acquireAvailableDevice(4, connectionType=connectionType)
    assert quad.numIpus == 4 and not quad.isAttached
    for d in (dev, pair):
        d.detach()
    with pytest.raises(popart.popart_exception, match="Failed to acquire device with 3 IPUs"):
        dm.acquireAvailableDevice(3)
    assert dm.tryAcquireAvailableDevice(256) is None
    dm.acquireDeviceById(7)  # dropped at once: released, as PopART's DeviceInfo on destruction
    assert dm.acquireDeviceById(7).isAttached
    model = dm.createIpuModelDevice({"numIPUs": 2, "tilesPerIPU": 64})
    assert (model.numIpus, model.tilesPerIPU, model.type) == (2, 64, popart.DeviceType.IpuModel)
    assert dm.createOfflineIPUDevice({"numIPUs": 4}).numIpus == 4
    # ipuVersion picks the simulated machine; the simulator defaults to PopART's 4 tiles
    mk1 = dm.createIpuModelDevice({"ipuVersion": "ipu1"})
    assert (mk1.version, mk1.tilesPerIPU, mk1.machine.name) == ("ipu1", 1216, "mk1")
    assert dm.createIpuModelDevice({}).version == "ipu2"
    sim = dm.createSimDevice({})
    assert (sim.numIpus, sim.tilesPerIPU) == (1, 4)


def test_pipelined_training_equals_single_ipu():
    def build(annotate):
        builder = popart.Builder()
        x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
        lbl = builder.addInputTensor(popart.TensorInfo("INT32", [4]), "label")
        w = builder.addInitializedInputTensor(W0, "w")
        b = builder.addInitializedInputTensor(B0, "b")
        with builder.virtualGraph(0), builder.pipelineStage(0):
            y = builder.aiOnnx.matmul([x, w])
        with builder.virtualGraph(1), builder.pipelineStage(1):
            y = builder.aiOnnx.add([y, b])
            loss = builder.aiGraphcore.nllloss([builder.aiOnnx.softmax([y], axis=1), lbl])
        assert builder.getVirtualGraph(loss) == 1 and builder.getPipelineStage(loss) == 1
        opts = popart.SessionOptions()
        opts.enableGradientAccumulation = True
        opts.accumulationFactor = 4
        if annotate:
            opts.virtualGraphMode = annotate
            opts.enablePipelining = True
        return popart.TrainingSession(builder.getModelProto(), popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")}),
                                      loss, popart.ConstSGD(0.1),
                                      deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
                                      userOptions=opts), loss
    data = {"x": RNG.standard_normal((2, 4, 4, 8)).astype(np.float32),
            "label": RNG.integers(0, 5, (2, 4, 4)).astype(np.int32)}
    results = []
    # no placement; the builder's annotations; PopART's automatic virtual graphs
    for annotate in (None, popart.VirtualGraphMode.Manual, popart.VirtualGraphMode.Auto):
        s, loss = build(annotate)
        s.prepareDevice()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO(data, anchors))
        s.run(popart.PyStepIO(data, anchors))
        results.append((anchors[loss].copy(), s._executor.profile.num_ipus))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    np.testing.assert_allclose(results[2][0], results[0][0], rtol=1e-6)
    assert [r[1] for r in results] == [1, 2, 2]


def test_execution_phases_equal_unphased_and_pytorch():
    w1 = RNG.standard_normal((8, 8)).astype(np.float32)
    w2 = RNG.standard_normal((8, 8)).astype(np.float32)
    data = RNG.standard_normal((2, 4, 8)).astype(np.float32)

    def run(mode):
        b = popart.Builder()
        x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
        i1, i2 = b.addInitializedInputTensor(w1, "w1"), b.addInitializedInputTensor(w2, "w2")
        with b.executionPhase(0):
            h = b.aiOnnx.relu([b.aiOnnx.matmul([x, i1])])
        with b.executionPhase(1):
            loss = b.aiGraphcore.l1loss([b.aiOnnx.matmul([h, i2])], 0.1, popart.ReductionType.Sum)
        opts = popart.SessionOptions()
        opts.virtualGraphMode = mode
        opts.executionPhaseSettings.phases = 2
        s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")}),
                                   loss, popart.ConstSGD(0.01),
                                   deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
                                   userOptions=opts)
        s.prepareDevice()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO({"x": data}, anchors))
        return anchors[loss], s._executor.profile.num_ipus

    phased, unphased = run(popart.VirtualGraphMode.ExecutionPhases), run(popart.VirtualGraphMode.Off)
    np.testing.assert_allclose(phased[0], unphased[0], rtol=1e-6)
    assert (phased[1], unphased[1]) == (2, 1)
    t1, t2 = torch.nn.Parameter(torch.tensor(w1)), torch.nn.Parameter(torch.tensor(w2))
    opt = torch.optim.SGD([t1, t2], lr=0.01)
    for d in range(2):
        opt.zero_grad()
        ref = 0.1 * (torch.relu(torch.tensor(data[d]) @ t1) @ t2).abs().sum()
        ref.backward()
        opt.step()
        np.testing.assert_allclose(phased[0][d], ref.item(), rtol=1e-5)


def test_reports_and_cycle_count():
    builder, x, _y, z = scaled_model()
    opts = popart.SessionOptions()
    s = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, {z: popart.AnchorReturnType("ALL")}),
                                cpu(), userOptions=opts)
    s.prepareDevice()
    assert "Execution profiling not enabled" in s.getSummaryReport()
    report = s.getReport()
    assert report.execution is None and report.compilation["target"]["numIPUs"] == 1
    with pytest.raises(popart.popart_exception, match="instrumentWithHardwareCycleCounter"):
        s.getCycleCount()
    opts = popart.SessionOptions()
    opts.engineOptions = {"autoReport.all": "true"}
    opts.reportOptions = {"showExecutionSteps": "true"}
    opts.instrumentWithHardwareCycleCounter = True
    s = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, {z: popart.AnchorReturnType("ALL")}),
                                cpu(), userOptions=opts)
    s.prepareDevice()
    anchors = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.ones((2, 3), np.float32)}, anchors))
    assert "Execution profiling not enabled" not in s.getSummaryReport()
    assert s.getCycleCount() == s.getReport().execution["cyclesPerRun"] > 0
    assert s.getReport().profile.total_cycles == s.getCycleCount()


def test_logging_levels_and_format(capsys):
    # lines go to the sys.stderr of the moment they are logged (here pytest's capture)
    capsys.readouterr()
    try:
        # Set all modules to DEBUG level
        popart.getLogger().setLevel("DEBUG")
        # Turn off logging for the session module
        popart.getLogger("session").setLevel("OFF")
        builder, _x, _y, z = scaled_model()
        s = popart.InferenceSession(builder.getModelProto(), popart.DataFlow(1, {z: popart.AnchorReturnType("ALL")}),
                                    cpu())
        s.prepareDevice()
        popart.getLogger("session").setLevel("TRACE")
        s.weightsToHost()
    finally:
        popart.getLogger().setLevel("OFF")
    lines = [line for line in capsys.readouterr().err.splitlines() if " popart:" in line]
    fmt = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z popart:(\w+) \d+\.\d+ ([TDIWEC]): (.*)$")
    parsed = [fmt.match(line).groups() for line in lines]
    assert ("session", "T", "Session::weightsToHost") in parsed
    assert ("devicex", "D", "Writing weights to host") in parsed
    assert not any(m == "session" and msg == "Session::prepareDevice" for m, _, msg in parsed)
    with pytest.raises(popart.popart_exception, match="unknown log level"):
        popart.getLogger().setLevel("VERBOSE")


def test_error_hierarchy():
    assert issubclass(popart.popart_exception, tilefx.Error)
    for cls in (popart.popart_internal_exception, popart.popart_runtime_error, popart.poplibs_exception,
                popart.poplar_exception, popart.poplar_application_runtime_error):
        assert issubclass(cls, popart.popart_exception)
    for cls in (popart.poplar_recoverable_runtime_error, popart.poplar_unrecoverable_runtime_error,
                popart.poplar_unknown_runtime_error):
        assert issubclass(cls, popart.poplar_system_runtime_error)
        assert issubclass(cls, popart.poplar_runtime_error)
    e = popart.poplar_recoverable_runtime_error("link down", popart.RecoveryAction.LINK_RESET)
    assert e.recoveryAction == popart.RecoveryAction.LINK_RESET
    assert isinstance(e, tilefx.RecoverableError) and e.recovery_action == "LINK_RESET"
    assert isinstance(popart.poplar_unrecoverable_runtime_error("x"), tilefx.UnrecoverableError)


def test_pipelined_session_recomputes_only_when_autorecomputation_says_so():
    """PopART recomputes nothing unless `SessionOptions.autoRecomputation`
    asks (its default is RecomputationType::None; Pipeline by default is
    PopTorch's, not PopART's): set to 3 (Pipeline), stage 0 recomputes its
    inner values in its backward from its input, with the same losses."""
    w = RNG.standard_normal((8, 8)).astype(np.float32)
    data = {"x": RNG.standard_normal((2, 4, 4, 8)).astype(np.float32)}

    def run(recomputation):
        b = popart.Builder()
        x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]), "x")
        wi = b.addInitializedInputTensor(w, "w")
        with b.virtualGraph(0), b.pipelineStage(0):
            h = b.aiOnnx.tanh([b.aiOnnx.tanh([b.aiOnnx.matmul([x, wi])])])
        with b.virtualGraph(1), b.pipelineStage(1):
            loss = b.aiGraphcore.l1loss([b.aiOnnx.tanh([h])], 0.1, popart.ReductionType.Sum)
        opts = popart.SessionOptions()
        opts.enableGradientAccumulation, opts.accumulationFactor = True, 4
        opts.virtualGraphMode, opts.enablePipelining = popart.VirtualGraphMode.Manual, True
        if recomputation is not None:
            opts.autoRecomputation = recomputation
        s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(2, {loss: popart.AnchorReturnType("ALL")}),
                                   loss, popart.ConstSGD(0.1),
                                   deviceInfo=popart.DeviceManager().createIpuModelDevice({"numIPUs": 2}),
                                   userOptions=opts)
        s.prepareDevice()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO(data, anchors))
        return anchors[loss].copy(), s._executor.ir("graph").count("aten.tanh")

    (plain, tanh_plain), (none, tanh_none), (piped, tanh_piped) = run(None), run(0), run(3)
    assert tanh_plain == tanh_none == 3 and tanh_piped == 4  # stage 0's inner tanh again
    np.testing.assert_allclose(piped, plain, rtol=1e-6)
    np.testing.assert_allclose(none, plain, rtol=1e-6)
