"""Which machine a compile simulates and the datasheet figures it runs on:
the offline target's IPU version, the matmul partials type, the IPU-Link and
the host link (tilefx/backend/machine.py, docs/machine-validation.md)."""

import warnings

import pytest
import torch
from torch import nn

import tilefx
from tilefx.api.options import OptionsError
from tilefx.backend.collectives import host_traffic
from tilefx.backend.costs import plan_matmul
from tilefx.backend.machine import BOW, C600, MK1, MK2


def _offline_profile(opts, width=256):
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)).half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = tilefx.inferenceModel(model, opts)
        ex.compile(torch.zeros(64, width, dtype=torch.half))
    return ex.profile


@pytest.mark.parametrize("version, preset", [(1, MK1), (2, MK2), (21, BOW)])
def test_offline_target_version_selects_the_machine(version, preset):
    opts = tilefx.Options().useOfflineIpuTarget(version)
    assert opts.ipu_version == version
    assert _offline_profile(opts).machine == preset


def test_offline_target_mk1_is_slower_than_mk2():
    mk1 = _offline_profile(tilefx.Options().useOfflineIpuTarget(1))
    mk2 = _offline_profile(tilefx.Options().useOfflineIpuTarget(2))
    assert mk1.machine.tiles == 1216 and mk2.machine.tiles == 1472
    assert mk1.machine.seconds(mk1.total_cycles) > mk2.machine.seconds(mk2.total_cycles)


@pytest.mark.parametrize("version", [3, 20, 22])
def test_offline_target_unknown_version_is_an_options_error(version):
    with pytest.raises(OptionsError, match="unknown IPU version"):
        tilefx.Options().useOfflineIpuTarget(version)
    with pytest.raises(tilefx.Error):
        tilefx.Options().useOfflineIpuTarget(0)


def test_offline_target_keeps_a_machine_of_the_same_version():
    custom = MK2.with_(name="mk2-slow-links", ipu_link_bytes_per_s=8e9)
    opts = tilefx.Options().setMachine(custom).useOfflineIpuTarget(2)
    assert opts.machine is custom
    assert tilefx.Options().setMachine("bow").useOfflineIpuTarget(21).machine == "bow"
    assert tilefx.Options().setMachine("bow").useOfflineIpuTarget(1).machine == "mk1"


def test_c600_card_is_a_preset_its_offline_target_keeps():
    # the C600 PCIe card: the Mk2's tiles at 280 TFLOPS FP16, PCIe Gen4 x16 to its host
    assert round(C600.peak_flops(2) / 1e12) == 280 and C600.tiles == MK2.tiles
    assert C600.host_link_bytes_per_s == 31.5e9
    opts = tilefx.Options().setMachine("c600").useOfflineIpuTarget(2)
    assert opts.machine == "c600"
    c600, mk2 = _offline_profile(opts), _offline_profile(tilefx.Options().useOfflineIpuTarget(2))
    assert c600.machine == C600 and c600.seconds < mk2.seconds


def test_published_peaks_name_their_partials_type():
    # GC200: 250 TFLOPS FP16.16 and 62.5 FP32; fp32 partials run the AMP at half rate
    assert round(MK2.peak_flops(2) / 1e12) == 251 and round(MK2.peak_flops(4) / 1e12, 1) == 62.6
    assert MK2.peak_flops(2, partials_itemsize=4) == MK2.peak_flops(2) / 2
    # GC2: 124.5 TFLOPS mixed precision whatever the partials type
    assert MK1.peak_flops(2, 4) == MK1.peak_flops(2, 2)
    # fp32 operands keep fp32 partials
    assert MK2.macs_per_cycle(4, 2) == MK2.macs_per_cycle(4, 4)


def test_half_partials_halve_partial_memory_and_speed_up_the_matmul():
    fp32 = plan_matmul(1, 4096, 4096, 4096, 2, MK2, 0.6, False, 4)
    fp16 = plan_matmul(1, 4096, 4096, 4096, 2, MK2, 0.6, False, 2)
    assert fp16.cycles < 0.7 * fp32.cycles
    # the same grid: the split-k partials take half the memory and exchange
    same16 = plan_matmul(1, 512, 4096, 512, 2, MK2, 1.0, False, 2)
    same32 = plan_matmul(1, 512, 4096, 512, 2, MK2, 1.0, False, 4)
    if (same16.pm, same16.pn, same16.pk) == (same32.pm, same32.pn, same32.pk) and same16.pk > 1:
        partials32 = -(-512 // same32.pm) * -(-512 // same32.pn) * 4
        assert same32.exchange_bytes - same16.exchange_bytes == partials32 // 2


def test_set_partials_type_changes_the_compiled_cycles():
    def profile(partials):
        opts = tilefx.Options().useOfflineIpuTarget()
        opts.Precision.setPartialsType(partials)
        return _offline_profile(opts, width=2048)

    half, full = profile(torch.half), profile(torch.float)
    mm_half = sum(r.cost.compute_cycles for r in half.ops if r.name == "aten.addmm")
    mm_full = sum(r.cost.compute_cycles for r in full.ops if r.name == "aten.addmm")
    assert mm_half < mm_full
    assert half.total_cycles < full.total_cycles


def test_ipu_link_does_not_exceed_the_raw_datasheet_figure():
    # 320 GB/s over 10 IPU-Links, both directions: 16 GB/s per link and direction
    for m in (MK2, BOW):
        assert 2 * m.ipu_links * m.ipu_link_bytes_per_s <= 320e9


def test_pod_host_link_is_100gbe_roce_not_pcie():
    # IPU-POD hosts reach the IPU-Machines over 2 x 100 Gbps RoCE (25 GB/s)
    assert MK2.host_link_bytes_per_s == BOW.host_link_bytes_per_s == 25e9
    t = host_traffic(1 << 20, 0, micro_batches=16, replicas=4, machine=MK2)
    assert t.cycles == MK2.link_cycles(64 << 20, 25e9)


def test_validated_range_follows_the_op_mix():
    from tilefx.backend.validated import BANDS, band_text, classify

    assert classify({"aten.convolution": 60, "aten.relu": 40}) == "cnn"
    assert classify({"aten.mm": 40, "aten.bmm": 20, "aten.gelu": 40}) == "transformer"
    # a patch embedding's convolution marks a vision transformer, validated on its own rows
    assert classify({"aten.mm": 60, "aten.convolution": 2, "aten.gelu": 38}) == "vision-transformer"
    assert BANDS["vision-transformer"].lowest > BANDS["transformer"].highest
    assert classify({"aten.embedding": 70, "aten.mm": 30}) is None
    assert "unlike every validated row" in band_text({"aten.index.Tensor": 10}, 1000, 1e9)
    band = BANDS["transformer"]
    text = band_text({"aten.mm": 10}, 2_000_000, 1e9)
    assert f"+-{band.percent():.0f}%" in text and f"({band.rows} rows)" in text
    assert band.rows > 0 and 0 < band.lowest <= band.highest
    # gathers along edges mark a GNN, however much of it is matmuls (SchNet's filters)
    assert classify({"aten.mm": 50, "aten.addmm": 25, "aten.index_select": 4, "aten.gelu": 21}) == "gnn"
    assert classify({"aten.mm": 50, "aten.addmm": 25, "aten.index_select": 1, "aten.gelu": 24}) == "transformer"
    assert BANDS["gnn"].lowest > BANDS["vision-transformer"].highest
    # a graph with no backward is held to the inference rows of its class
    assert classify({"aten.convolution": 60, "aten.relu": 40}, training=False) == "cnn-inference"
    assert classify({"aten.embedding": 70, "aten.mm": 30}, training=False) is None
    for kind in ("cnn", "transformer", "vision-transformer"):
        assert BANDS[f"{kind}-inference"].rows > 0
    assert BANDS["transformer-inference"].label in band_text({"aten.mm": 10}, 2_000_000, 1e9, training=False)


def test_profile_and_report_carry_the_validated_range():
    prof = _offline_profile(tilefx.Options().useOfflineIpuTarget(), width=1024)
    assert "validated range" in prof.summary()["validated_range"]
    assert "transformer inference" in prof.summary()["validated_range"]  # an inference compile
    assert prof.summary()["validated_range"] in prof.table()
