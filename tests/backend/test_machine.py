"""The machine model: matmul planning against the documented figures, the
memory proportion trade-off, pipeline timing, per-tile memory and
out-of-memory errors, profiles on disk."""

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.costs import plan_matmul
from tilefx.backend.machine import BOW, MK1, MK2, machine
from models import WithLoss


def _efficiency(M, K, N, itemsize, m=MK2, proportion=0.6):
    p = plan_matmul(1, M, K, N, itemsize, m, proportion)
    return 2 * M * K * N / m.seconds(p.cycles) / m.peak_flops(itemsize)


def test_presets_match_the_reference_figures():
    assert MK2.tiles == 1472 and MK2.bytes_per_tile == 624 * 1024
    assert round(MK2.peak_flops(2) / 1e12) == 251 and round(MK2.peak_flops(4) / 1e12, 1) == 62.6
    assert round(MK1.peak_flops(2) / 1e12, 1) == 124.5 and round(BOW.peak_flops(2) / 1e12) == 349
    assert MK2.sync_cycles(2) == 40 and MK2.sync_cycles(4) == 80
    with pytest.raises(tilefx.Error, match="unknown IPU machine"):
        machine("mk9")


def test_element_sizes_are_read_without_printing_the_type(monkeypatch):
    """The machine model asks each value's element size a few hundred times per
    compile: from the type's class and width, never through xDSL's printer."""
    from xdsl.dialects.builtin import TensorType, bf16, f16, f32, f64, i1, i8, i32, i64
    from xdsl.printer import Printer

    from tilefx.backend.costs import _itemsize

    def no_printing(*args, **kwargs):
        raise AssertionError("the element size printed its type")

    monkeypatch.setattr(Printer, "print_attribute", no_printing)

    class Value:
        def __init__(self, element):
            self.type = TensorType(element, [3])

    sizes = [_itemsize(Value(t)) for t in (f16, bf16, f32, f64, i1, i8, i32, i64)]
    assert sizes == [2, 2, 4, 8, 1, 1, 4, 8]


def test_big_fp16_matmul_is_a_realistic_fraction_of_peak():
    assert 0.20 <= _efficiency(4096, 4096, 4096, 2) <= 0.60


def test_small_matmul_is_far_below_peak():
    assert _efficiency(64, 64, 64, 4) < 0.05
    assert _efficiency(64, 64, 64, 2) < _efficiency(1024, 1024, 1024, 2)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096, 2), (512, 3072, 768, 2), (40, 320, 256, 4),
                                   (8192, 128, 8192, 4)])
def test_less_memory_never_means_fewer_cycles_or_more_temporary_memory(shape):
    M, K, N, isz = shape
    plans = [plan_matmul(1, M, K, N, isz, MK2, p) for p in (1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01)]
    for loose, tight in zip(plans, plans[1:]):
        assert tight.cycles >= loose.cycles
        assert tight.temp_bytes <= loose.temp_bytes
    assert all(p.temp_bytes <= MK2.bytes_per_tile * prop for p, prop in zip(plans, (1.0, 0.8, 0.6))
               if p.fits)


def test_nothing_fits_warns_and_uses_the_smallest_plan():
    with pytest.warns(UserWarning, match="no plan fits"):
        from tilefx.backend.costs import matmul_cost

        c = matmul_cost(1, 8192, 8192, 8192, 4, MK2, 0.001)
    assert c.temp_bytes > MK2.bytes_per_tile * 0.001


class Chain(nn.Module):
    def __init__(self, widths, blocks=True):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths, widths[1:])])
        self.blocks = blocks

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            if self.blocks:
                with tilefx.Block(f"L{i}", ipu_id=i):
                    x = torch.relu(layer(x))
            else:
                x = torch.relu(layer(x))
        return x


def _inference_profile(model, D, mb=16, width=512, synthetic=False):
    opts = tilefx.Options().deviceIterations(D).enableSyntheticData(synthetic)
    return tilefx.compile(model, torch.randn(D * mb, width), options=opts).profile


def test_balanced_pipeline_run_length_matches_the_formula():
    S, M = 4, 16
    # synthetic data: no host streams, whose 25 GB/s RoCE link would lengthen the
    # first stage's step and unbalance the pipeline
    prof = _inference_profile(Chain([512] * (S + 1)), M, synthetic=True)
    # a step of a stage: its compute and the copy to the next IPU
    c = max(prof.step_cycles.values())
    expected = (2 * (S - 1) + (M - (S - 1))) * c
    assert abs(prof.cycles_per_update - expected) <= 0.05 * expected


def test_unbalanced_pipeline_is_limited_by_its_slowest_stage():
    M = 16
    prof = _inference_profile(Chain([512, 512, 4096, 512, 512]), M)
    slowest = max(prof.step_cycles.values())
    assert max(prof.step_cycles, key=prof.step_cycles.get) in (1, 2)
    assert slowest > 2 * min(prof.step_cycles.values())
    assert M * slowest <= prof.cycles_per_update <= (M + 3) * slowest * 1.05


class Big(nn.Module):
    """About 300 M fp32 parameters in four 8704 x 8704 layers."""

    def __init__(self, blocks):
        super().__init__()
        self.w = nn.ParameterList([nn.Parameter(torch.empty(8704, 8704)) for _ in range(4)])
        for p in self.w:
            nn.init.zeros_(p)
        self.blocks = blocks

    def forward(self, x, t):
        for i, w in enumerate(self.w):
            if self.blocks:
                with tilefx.Block(f"B{i}", ipu_id=i):
                    x = x @ w
            else:
                x = x @ w
        with tilefx.Block("B3", ipu_id=3) if self.blocks else _null():
            loss = nn.functional.mse_loss(x, t)
        return x, loss


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_300m_parameters_do_not_fit_one_ipu_but_fit_four():
    x, t = torch.randn(8, 8704), torch.randn(8, 8704)
    with pytest.raises(tilefx.Error) as e:
        tilefx.compile(Big(False), x, t, training=True)
    msg = str(e.value)
    assert "Out of memory on IPU 0, tile" in msg and "bytes needed" in msg and "available" in msg
    assert msg.count("[weight") >= 1 and "w.0" in msg
    # 75 M parameters and their accumulators per IPU leave ~30% of each tile
    # for temporaries: the matmul plans must stay under it
    opts = tilefx.Options().setAvailableMemoryProportion({f"IPU{i}": 0.3 for i in range(4)})
    opts.Training.gradientAccumulation(8)
    model = Big(True)
    compiled = tilefx.compile(model, torch.randn(64, 8704), torch.randn(64, 8704), training=True,
                              options=opts)
    assert compiled.profile.num_ipus == 4
    assert all(m.peak.max() <= MK2.bytes_per_tile for m in compiled.profile.memory.values())


def test_optimizer_state_off_chip_frees_the_state_bytes():
    torch.manual_seed(0)

    def always_live(off_chip):
        model = WithLoss(Chain([256, 256, 256], blocks=False), nn.MSELoss())
        opts = tilefx.Options()
        if off_chip:
            opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
        c = tilefx.compile(model, torch.randn(4, 256), torch.randn(4, 256), training=True,
                           options=opts, optimizer=tilefx.optim.Adam(model.parameters()))
        return sum(int(m.always_live.sum()) for m in c.profile.memory.values()), c

    on, c_on = always_live(False)
    off, c_off = always_live(True)
    state = 2 * sum(p.numel() * 4 for p in c_on.model.parameters())
    assert abs((on - off) - state) <= 0.01 * state
    # the update now streams the state in and out: it costs cycles
    assert c_off.profile.cycles_per_update > c_on.profile.cycles_per_update


def test_perf_counters_and_attaching_follow_poptorch():
    """PoplarExecutor's getPerfCounters / get*Latency / attachToDevice /
    detachFromDevice / isAttachedToDevice (PopTorch's executor API, which scripts
    such as optimum-graphcore's trainer call) were missing: AttributeError."""
    model = Chain([8, 8], blocks=False)
    D = 3
    inf = tilefx.inferenceModel(model, tilefx.Options().deviceIterations(D))
    assert inf.getPerfCounters() == {k: [[]] for k in ("input", "input_complete", "output",
                                                          "output_complete")}
    assert not inf.isAttachedToDevice()
    with pytest.raises(tilefx.Error, match="not been compiled"):
        inf.detachFromDevice()
    # copying weights before the first compile is PopTorch's same error (it did nothing)
    for copy_weights in (inf.copyWeightsToHost, inf.copyWeightsToDevice):
        with pytest.raises(tilefx.Error, match=r"^Model has not been compiled or has been destroyed\.$"):
            copy_weights()
    x = torch.randn(2 * D, 8)
    out = inf(x)
    torch.testing.assert_close(out, model(x), rtol=1e-6, atol=1e-7)
    assert inf.isAttachedToDevice()
    counters = inf.getPerfCounters()
    assert [len(counters[k]) for k in counters] == [1, 1, 1, 1]  # one input, one output
    assert all(len(counters[k][0]) == D for k in counters)  # one time per device iteration
    for i in range(D):
        assert counters["input"][0][i] < counters["input_complete"][0][i] <= \
            counters["output"][0][i] < counters["output_complete"][0][i]
    low, high, avg = inf.getLatency()
    assert 0 < low <= avg <= high
    inf.detachFromDevice()
    assert not inf.isAttachedToDevice()
    with pytest.raises(tilefx.Error, match="not attached"):
        inf.detachFromDevice()
    inf.attachToDevice()
    with pytest.raises(tilefx.Error, match="already attached"):
        inf.attachToDevice()
    inf.detachFromDevice()
    torch.testing.assert_close(inf(x), model(x), rtol=1e-6, atol=1e-7)  # a call attaches again
    assert inf.isAttachedToDevice()

    # a training model detached reads its weights back: they equal torch's after the step
    torch.manual_seed(0)
    net = WithLoss(Chain([8, 4], blocks=False), nn.MSELoss())
    reference = WithLoss(Chain([8, 4], blocks=False), nn.MSELoss())
    reference.load_state_dict(net.state_dict())
    train = tilefx.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1))
    y = torch.randn(4, 4)
    train(x[:4], y)
    train.detachFromDevice()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    optimizer.zero_grad()
    reference(x[:4], y)[1].backward()
    optimizer.step()
    for p, q in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7)


def test_cycle_count_and_latency():
    model = Chain([64, 64], blocks=False)
    opts = tilefx.Options().logCycleCount(True)
    inf = tilefx.inferenceModel(model, opts)
    with pytest.raises(tilefx.Error):
        inf.cycleCount()
    inf(torch.randn(4, 64))
    assert inf.cycleCount() == inf.profile.total_cycles > 0
    # PopTorch's latency API: (min, max, average) seconds over the call's iterations,
    # here from the simulated timeline (one micro-batch: host in, compute, host out)
    low, high, avg = inf.getLatency()
    assert low == high == avg == pytest.approx(inf.cycleCount() / MK2.clock_hz)
    host_in, compute, host_out = (inf.getHostIpuLatency()[2], inf.getComputeLatency()[2],
                                  inf.getIpuHostLatency()[2])
    assert min(host_in, compute, host_out) > 0
    assert host_in + compute + host_out == pytest.approx(avg)
    off = tilefx.inferenceModel(model, tilefx.Options())
    off(torch.randn(4, 64))
    with pytest.raises(tilefx.Error, match="logCycleCount"):
        off.cycleCount()


def test_machine_preset_changes_the_cycles():
    model = Chain([512, 512], blocks=False)
    mk1 = _compile_with(model, "mk1").profile
    bow = _compile_with(model, "bow").profile
    assert mk1.machine.name == "mk1" and bow.machine.name == "bow"
    assert bow.seconds < mk1.seconds


def _compile_with(model, name):
    return tilefx.compile(model, torch.randn(8, 512), options=tilefx.Options().setMachine(name))


def test_profile_directory_and_report(tmp_path):
    opts = tilefx.Options().deviceIterations(4).enableProfiling(str(tmp_path))
    opts.setExecutionStrategy(tilefx.PipelinedExecution("L0", "L1"))
    tilefx.compile(Chain([64, 64, 64]), torch.randn(16, 64), options=opts)
    top, tmp_path = tmp_path, tmp_path / "inference"  # one subdirectory per executor (PopTorch's name)
    for name in ("trace.json", "summary.json", "timeline.png", "memory_per_tile.png",
                 "memory_over_time.png"):
        assert (tmp_path / name).exists(), name
    trace = json.loads((tmp_path / "trace.json").read_text())
    tracks = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert tracks == {"IPU0", "IPU1"}
    os.remove(tmp_path / "timeline.png")
    out = subprocess.run([sys.executable, "-m", "tilefx.tools.report", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IPU" in out.stdout and "cycles" in out.stdout
    assert (tmp_path / "timeline.png").exists()
    out = subprocess.run([sys.executable, "-m", "tilefx.tools.report", str(top), "--no-plots"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "== inference" in out.stdout, out.stderr


def test_profiling_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS",
                       json.dumps({"autoReport.all": "true", "autoReport.directory": str(tmp_path)}))
    model = Chain([32, 32], blocks=False)
    tilefx.compile(model, torch.randn(4, 32))
    tilefx.compile(model, torch.randn(4, 32))  # a second executor of the same model
    tilefx.compile(WithLoss(model, nn.MSELoss()), torch.randn(4, 32), torch.randn(4, 32), training=True)
    for sub in ("inference", "inference_2", "training"):  # kept apart
        assert (tmp_path / sub / "summary.json").exists(), sub


def test_trace_splits_stage_steps_into_compute_exchange_and_sync(tmp_path):
    opts = tilefx.Options().deviceIterations(4)
    c = tilefx.compile(Chain([64, 64, 64]), torch.randn(16, 64), options=opts)
    cats = {e["cat"] for e in c.profile.chrome_trace()["traceEvents"] if e.get("ph") == "X"}
    assert {"compute", "exchange", "sync", "copy", "host"} <= cats
