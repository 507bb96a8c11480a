"""Scale-out in the machine model and compile-only sizing: the gradient
all-reduce over IPU-Links and GW-Links and each process's host traffic in
the profile; offline compiles that copy nothing per replica and size models
built on the meta device."""

import json
import math
import tracemalloc

import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.collectives import all_reduce_cost, host_traffic
from tilefx.backend.machine import MK2
from tilefx.backend.profile import summary_table


# -- the all-reduce and host-link formulas ------------------------------------------

G = 64 * 2 ** 20  # one IPU's gradient bytes


def _cyc(nbytes, bps, m=MK2):
    return math.ceil(nbytes / bps * m.clock_hz)


def test_all_reduce_inside_one_pod64_uses_ipu_links_only():
    # 16 IPUs per replica x 4 replicas = one IPU-POD64: a ring of 4 over IPU-Links
    c = all_reduce_cost(G, 4, 16, MK2)
    assert (c.replicas_per_rack, c.racks) == (4, 1)
    assert c.ipu_link_cycles == _cyc(2 * 3 / 4 * G, MK2.ipu_link_bytes_per_s)
    assert c.gw_link_cycles == 0
    assert c.sync_cycles == 2 * 3 * MK2.sync_cycles(64)
    assert c.cycles == c.ipu_link_cycles + c.sync_cycles


def test_doubling_processes_across_a_gw_link_boundary_adds_the_gw_ring():
    one = all_reduce_cost(G, 4, 16, MK2)  # 1 process x 4 replicas: one POD64
    two = all_reduce_cost(G, 8, 16, MK2)  # 2 processes x 4 replicas: two POD64s (IPU-POD128)
    four = all_reduce_cost(G, 16, 16, MK2)  # IPU-POD256
    gw_per_ipu = MK2.gw_link_bytes_per_s / MK2.ipus_per_machine  # 2 x 100 Gbps per 4 IPUs
    latency = math.ceil(MK2.gw_link_latency_s * MK2.clock_hz)
    # reduce-scatter inside each rack is unchanged; each IPU's quarter goes round the racks
    assert two.ipu_link_cycles == one.ipu_link_cycles
    assert two.gw_link_cycles == _cyc(2 * (2 - 1) / 2 * (G / 4), gw_per_ipu)
    assert four.gw_link_cycles == _cyc(2 * (4 - 1) / 4 * (G / 4), gw_per_ipu)
    assert two.cycles - one.cycles == two.gw_link_cycles + 2 * 1 * latency
    assert four.cycles - one.cycles == four.gw_link_cycles + 2 * 3 * latency
    # a GW-Link byte costs more than an IPU-Link byte (6.25 against 16.5 GB/s per IPU)
    assert four.gw_link_cycles / (1.5 * G / 4) > one.ipu_link_cycles / (1.5 * G)


def test_doubling_replicas_inside_a_rack_grows_the_ipu_link_ring():
    two = all_reduce_cost(G, 2, 16, MK2)
    four = all_reduce_cost(G, 4, 16, MK2)
    assert four.ipu_link_cycles == _cyc(2 * 3 / 4 * G, MK2.ipu_link_bytes_per_s)
    assert two.ipu_link_cycles == _cyc(2 * 1 / 2 * G, MK2.ipu_link_bytes_per_s)
    assert all_reduce_cost(G, 1, 16, MK2).cycles == 0  # one replica: nothing to reduce
    # a smaller IPU-Link domain (an IPU-POD16) moves the boundary
    pod16 = MK2.with_(ipu_link_domain_ipus=16)
    assert all_reduce_cost(G, 4, 16, pod16).racks == 4


def test_host_traffic_of_a_process_is_all_its_replicas_streams():
    t = host_traffic(1000, 24, micro_batches=8, replicas=4, machine=MK2)
    assert (t.bytes_in, t.bytes_out) == (4 * 8 * 1000, 4 * 8 * 24)
    assert t.cycles == _cyc(4 * 8 * 1024, MK2.host_link_bytes_per_s)


# -- the profile of a multi-process run ------------------------------------------------


class TwoStage(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, 4)
        tilefx.BeginBlock(self.a, "a", ipu_id=0)
        tilefx.BeginBlock(self.b, "b", ipu_id=1)

    def forward(self, x, y):
        out = self.b(torch.relu(self.a(x)))
        return out, nn.functional.cross_entropy(out, y)


def _sized(model, replicas, processes, G=4, **kw):
    opts = tilefx.Options().replicationFactor(replicas)
    opts.useOfflineIpuTarget()
    opts.Training.gradientAccumulation(G)
    opts.Distributed.configureProcessId(0, processes)
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.Adam(model.parameters(), lr=1e-3))
    n = replicas * G * 2
    ex.compile(torch.zeros(n, 32), torch.zeros(n, dtype=torch.long))
    return ex


def test_profile_costs_the_all_reduce_of_every_processes_replicas(tmp_path, capsys):
    model = TwoStage()
    # 2 IPUs per replica, 2 replicas per process: 32 replicas fill an IPU-POD64
    ex = {P: _sized(model, 2, P) for P in (1, 16, 32)}
    grads = {0: (32 * 32 + 32) * 4, 1: (32 * 4 + 4) * 4}  # fp32 accumulators per IPU
    for P, e in ex.items():
        d = e.profile.summary()["distributed"]
        assert (d["processes"], d["replicas_per_process"], d["replicas"]) == (P, 2, 2 * P)
        assert d["total_ipus"] == 4 * P and d["allreduce_bytes"] == grads
        steps = {s.ipu: s.end - s.start for s in e.profile.timeline if s.kind == "allreduce"}
        assert steps == {ipu: all_reduce_cost(n, 2 * P, 2, MK2).cycles for ipu, n in grads.items()}
    assert ex[16].profile.summary()["distributed"]["allreduce_gw_link_cycles"] == 0
    d64 = ex[32].profile.summary()["distributed"]
    assert d64["gw_link_domains"] == 2 and d64["allreduce_gw_link_cycles"] > 0
    # the update waits for the all-reduce: more replicas, longer weight updates
    assert ex[1].profile.cycles_per_update < ex[16].profile.cycles_per_update < \
        ex[32].profile.cycles_per_update
    # per process: this process's replicas' streams (inputs x, y; outputs out, loss)
    d = ex[16].profile.summary()["distributed"]
    assert d["host_bytes_in_per_process"] == 2 * 4 * (2 * 32 * 4 + 2 * 8)
    assert d["host_bytes_out_per_process"] == 2 * 4 * (2 * 4 * 4 + 4)
    text = summary_table(tilefx.backend.profile._jsonable(ex[32].profile.summary()))
    assert "process 0 of 32: 2 replica(s) x 2 IPU(s); 64 replicas on 128 IPUs" in text
    assert "gradient all-reduce" in text and "GW-Links" in text
    # tilefx-report prints the same section from a profile directory's summary.json
    from tilefx.tools import report

    (tmp_path / "summary.json").write_text(json.dumps(
        tilefx.backend.profile._jsonable(ex[32].profile.summary())))
    assert report.main([str(tmp_path), "--no-plots"]) == 0
    assert "process 0 of 32" in capsys.readouterr().out


def test_one_replica_in_one_process_has_no_scale_out_section():
    ex = _sized(TwoStage(), 1, 1)
    assert "distributed" not in ex.profile.summary()
    assert not [s for s in ex.profile.timeline if s.kind == "allreduce"]


# -- compile-only sizing ---------------------------------------------------------------


class Wide(nn.Module):
    """Four 8192 x 8192 layers on four IPUs: 268 M parameters (512 MiB in fp16)."""

    def __init__(self, d=8192):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(4))
        for k, layer in enumerate(self.layers):
            tilefx.BeginBlock(layer, f"l{k}", ipu_id=k)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return tilefx.identity_loss(x.float().square().mean(), reduction="none")


def _offline_options(replicas):
    opts = tilefx.Options().replicationFactor(replicas)
    opts.useOfflineIpuTarget()
    opts.Training.gradientAccumulation(8)
    opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    return opts


def test_meta_model_sizes_offline_without_allocating_weights_or_state():
    with torch.device("meta"):
        model = Wide().half()
    params = sum(p.numel() for p in model.parameters())
    assert params == 4 * 8192 * 8192
    opts = _offline_options(16)  # 4 IPUs x 16 replicas = 64 IPUs
    tracemalloc.start()
    try:
        ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.Adam(model.parameters(), lr=1e-3))
        # inputs may be meta tensors too: only their shapes and types matter
        ex.compile(torch.empty(16 * 8, 8192, dtype=torch.float16, device="meta"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # weights (512 MiB), their copies and the Adam state (2 GiB) would show here
    assert peak < 64 * 2 ** 20, peak
    assert ex._weights == {} and ex._opt_state == {} and ex._device_buffers == {}
    assert all(p.device.type == "meta" for p in model.parameters())
    prof = ex.profile
    assert sorted(prof.memory) == [0, 1, 2, 3]
    for mem in prof.memory.values():  # each IPU holds its layer's weight and accumulator
        assert mem.peak.sum() >= 2 * 8192 * 8192 * 2
    d = prof.summary()["distributed"]
    assert d["replicas"] == 16 and d["total_ipus"] == 64
    assert d["allreduce_bytes"] == {k: 8192 * 8192 * 2 for k in range(4)}
    assert prof.total_cycles > 0
    with pytest.raises(tilefx.Error, match="offline IPU target"):
        ex(torch.zeros(16 * 8, 8192, dtype=torch.float16))
    with pytest.raises(tilefx.Error, match="meta device"):
        ex.compileAndExport("/nonexistent/never-written.tilefx")


def test_meta_model_traces_like_the_cpu_model():
    torch.manual_seed(0)
    cpu = TwoStage()
    with torch.device("meta"):
        meta = TwoStage()
    a, b = _sized(cpu, 4, 1), _sized(meta, 4, 1)
    assert a.ir("graph") == b.ir("graph")
    assert a.profile.summary() == b.profile.summary()


def test_meta_model_cannot_run():
    with torch.device("meta"):
        model = TwoStage()
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(4)
    ex = tilefx.trainingModel(model, opts)
    with pytest.raises(tilefx.Error, match="meta device.*useOfflineIpuTarget"):
        ex(torch.zeros(8, 32), torch.zeros(8, dtype=torch.long))
    cpu = tilefx.trainingModel(TwoStage(), opts)
    with pytest.raises(tilefx.Error, match=r"1 tensor\(s\) on the meta device \(input x\)"):
        cpu(torch.empty(8, 32, device="meta"), torch.zeros(8, dtype=torch.long))


def test_offline_cpu_model_keeps_no_copies_and_exports_the_model_weights(tmp_path):
    model = TwoStage()
    ex = _sized(model, 8, 1)
    assert ex._weights == {} and ex._opt_state == {}
    path = tmp_path / "sized.tilefx"
    ex.compileAndExport(str(path))
    loaded = tilefx.load(str(path))
    for n, p in model.named_parameters():
        assert torch.equal(dict(loaded.model.named_parameters())[n], p.detach())


def test_meta_inference_model_with_buffers_sizes_like_the_cpu_model():
    from models import MLP

    torch.manual_seed(0)
    cpu = MLP().eval()
    with torch.device("meta"):
        meta = MLP().eval()  # BatchNorm1d's running statistics are meta buffers too
    opts = tilefx.Options().replicationFactor(8).deviceIterations(2)
    opts.useOfflineIpuTarget()
    a = tilefx.inferenceModel(cpu, opts)
    b = tilefx.inferenceModel(meta, opts.clone())
    x = torch.zeros(16 * 3, 12)
    a.compile(x)
    b.compile(x)
    assert a.ir("graph") == b.ir("graph")
    sa, sb = a.profile.summary(), b.profile.summary()
    assert sa == sb and sa["distributed"]["host_bytes_in_per_process"] == 8 * 2 * 3 * 12 * 4
    assert "allreduce_cycles" not in sa["distributed"]  # inference: nothing to reduce
