"""The simulated IPU: one parameter object with the Mk1, Mk2, Bow and C600
presets (Graphcore's GC200, IPU-M2000 and C600 datasheets, and PopLibs' IPU
test model). Every hardware constant of the cost and memory models lives
here, each with its source; docs/machine-validation.md compares the model
built on them with published measurements.

Sources: [spec] Graphcore's datasheets (GC2 / GC200 / Bow: tiles, SRAM,
clock, peak FLOPS, 8 TB/s exchange, 320 GB/s IPU-Links; IPU-M2000 / Bow-2000:
2 x 100 Gbps RoCE host and GW-Links per IPU-Machine);
[poplibs-planner] PopLibs' convolution and matmul planner, which counts the
AMP units of a tile by operand and partials type (fp16 in / fp16 out,
fp16 in / fp32 out, fp32): the partials type sets the matmul rate;
[jia] Jia et al. 2019, "Dissecting the Graphcore IPU Architecture via
Microbenchmarking" (arXiv:1912.03413): 31.1 TB/s aggregate load ceiling on
GC2 = 16 bytes per cycle per tile, 30.7 TB/s reached by a hand-written
kernel; [poplibs] PopLibs' test machine model (sync, link efficiency);
[estimate] no published figure found: a documented estimate, checked only
through the model-level rows of the validation table."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Machine:
    name: str
    tiles: int  # per IPU [spec]
    bytes_per_tile: int  # [spec]
    clock_hz: float  # [spec]
    # AMP multiply-accumulates per tile and cycle by operand / partials type
    # [spec: peak FLOPS / tiles / clock / 2; poplibs-planner for which type the
    # published peak is]: fp16 operands with fp16 partials ("FP16.16", the
    # datasheets' AI peak), fp16 operands with fp32 partials ("FP16.32") and fp32
    fp16_half_macs_per_cycle: int
    fp16_macs_per_cycle: int
    fp32_macs_per_cycle: int
    exchange_bytes_per_cycle: int  # per tile, receive side [spec: reproduces the 8 TB/s exchange]
    # one IPU-Link, one direction [spec: 320 GB/s over 10 links both ways = 16 GB/s
    # raw; no published efficiency figure was found, so none is applied]
    ipu_link_bytes_per_s: float
    # one process's host link: on the C2 card (Mk1) PCIe Gen3 x16 into the host
    # [spec]; on IPU-POD systems (Mk2, Bow) a host server reaches the IPU-Machines
    # over 100 GbE RoCE, 2 x 100 Gbps = 25 GB/s [spec: IPU-M2000 / Bow-2000 and
    # IPU-POD datasheets], not over PCIe
    host_link_bytes_per_s: float
    streaming_bytes_per_s: float  # streaming (remote) memory, per IPU [estimate]
    # the IPU version PopTorch's useOfflineIpuTarget names it by (1: Mk1, 2: Mk2, 21: Bow)
    ipu_version: int = 2
    sync_ns_per_hop: float = 15.0  # [poplibs]
    # elementwise operations per tile and cycle, 2 fp32 or 4 fp16: at one operation
    # per result, 8 bytes of results, the width GC2 tiles write at [jia: 15.5 TB/s
    # of writes = 1216 tiles x 1.6 GHz x 8 B]; operands load at load_bytes_per_cycle
    fp32_elems_per_cycle: int = 2
    fp16_elems_per_cycle: int = 4
    # operand bytes a tile loads per cycle [jia: 31.1 TB/s = 1216 tiles x 1.6 GHz x 16 B]
    load_bytes_per_cycle: int = 16
    # fixed cost of one compute set: launching vertices on every tile (cycles) [estimate]
    compute_set_overhead_cycles: int = 100
    # hardware worker threads per tile, each issuing one instruction every
    # `worker_contexts` cycles [spec: IPU Programmer's Guide, "Tile architecture": six]
    worker_contexts: int = 6
    # IPU-Links per chip [spec: 10 links, 320 GB/s in total]
    ipu_links: int = 10
    # control code, vertex state and exchange code of one op on each tile it runs on
    # (bytes; an estimate: no published per-op figure was found, see
    # docs/machine-validation.md)
    code_bytes_per_op_per_tile: int = 256
    # the PopLibs codelets (vertex code) every tile holds once, shared by all ops
    # (bytes; an estimate of the same kind)
    codelet_bytes_per_tile: int = 16 * 1024
    # the smallest piece of a tensor mapped to one tile (bytes) [estimate: PopLibs maps
    # tensors in grains of a few vectors]
    grain_bytes: int = 64
    # scale-out (backend/collectives.py). IPUs per IPU-Machine (IPU-M2000 / Bow-2000) [spec]
    ipus_per_machine: int = 4
    # the IPUs IPU-Links join: IPU-Links connect the IPUs of an IPU-M2000 and the
    # IPU-M2000s of an IPU-POD64 rack (2D torus); larger systems (IPU-POD128, -256,
    # ...) join POD64 racks by GW-Links [spec: IPU-POD64 datasheet, IPU-POD getting
    # started guide]
    ipu_link_domain_ipus: int = 64
    # GW-Links of one IPU-Machine, one direction: 2 x 100 Gbps [spec: Bow-2000 and
    # IPU-M2000 datasheets], shared by its 4 IPUs
    gw_link_bytes_per_s: float = 25e9
    # one transfer step over GW-Links (100 GbE RoCE between racks) [estimate]
    gw_link_latency_s: float = 2e-6

    def sync_cycles(self, num_ipus: int = 1) -> int:
        """Global sync: ceil(15 ns x clock x hops x 2), hops = 1 + (IPUs//2)//2
        (the PopLibs test model: ~40 cycles for 1-2 IPUs, 80 for 4 on Mk2)."""
        hops = 1 + (max(num_ipus, 1) // 2) // 2
        return math.ceil(self.sync_ns_per_hop * 1e-9 * self.clock_hz * hops * 2)

    def macs_per_cycle(self, itemsize: int, partials_itemsize: int = 4) -> int:
        """AMP rate for `itemsize`-byte operands accumulating into
        `partials_itemsize`-byte partials (Options.Precision.setPartialsType)."""
        if itemsize > 2:
            return self.fp32_macs_per_cycle
        return self.fp16_half_macs_per_cycle if partials_itemsize <= 2 else self.fp16_macs_per_cycle

    def elems_per_cycle(self, itemsize: int) -> int:
        return self.fp16_elems_per_cycle if itemsize <= 2 else self.fp32_elems_per_cycle

    @property
    def bytes_per_ipu(self) -> int:
        return self.tiles * self.bytes_per_tile

    def peak_flops(self, itemsize: int = 2, partials_itemsize: int | None = None) -> float:
        """Peak FLOPS with partials of `partials_itemsize` bytes (default: the
        operands' type, the datasheets' FP16.16 and FP32 figures)."""
        psize = itemsize if partials_itemsize is None else partials_itemsize
        return 2 * self.macs_per_cycle(itemsize, psize) * self.tiles * self.clock_hz

    def seconds(self, cycles: float) -> float:
        return cycles / self.clock_hz

    def link_cycles(self, nbytes: int, bytes_per_s: float) -> int:
        return math.ceil(nbytes / bytes_per_s * self.clock_hz)

    def with_(self, **kw) -> Machine:
        return replace(self, **kw)


KIB = 1024
# the IPUs of the largest IPU system, an IPU-POD256 (4 IPU-POD64 racks of 16
# IPU-M2000s) [spec: IPU-POD256 datasheet]: the most IPUs a program, its
# replicas or its pipeline can be placed on
MAX_IPUS = 256
# Poplar runs a program's loops (device iterations, gradient accumulation)
# with 32-bit unsigned repeat counts [spec: the Poplar API's
# `program::Repeat(unsigned count, ...)`]; a larger count is no program at all
MAX_REPEAT_COUNT = 2**32 - 1

# Mk1 (GC2): 124.5 TFLOPS mixed precision, 31.1 fp32 [jia]; its AMP runs fp16 at one
# rate whatever the partials type. Mk2 (GC200): 250 TFLOPS FP16.16, 62.5 FP32 [spec];
# fp32 partials halve the fp16 rate (the fp32 results' store width limits the AMP
# pipeline: PopLibs' planner gives fp16-in/fp32-out half the units of fp16-in/fp16-out).
MK1 = Machine("mk1", tiles=1216, bytes_per_tile=256 * KIB, clock_hz=1.6e9, fp16_half_macs_per_cycle=32,
              fp16_macs_per_cycle=32, fp32_macs_per_cycle=8, exchange_bytes_per_cycle=4,
              ipu_link_bytes_per_s=16e9, host_link_bytes_per_s=16e9, streaming_bytes_per_s=20e9,
              ipu_version=1)
MK2 = Machine("mk2", tiles=1472, bytes_per_tile=624 * KIB, clock_hz=1.33e9, fp16_half_macs_per_cycle=64,
              fp16_macs_per_cycle=32, fp32_macs_per_cycle=16, exchange_bytes_per_cycle=4,
              ipu_link_bytes_per_s=16e9, host_link_bytes_per_s=25e9, streaming_bytes_per_s=20e9,
              ipu_version=2)
BOW = MK2.with_(name="bow", clock_hz=1.85e9, ipu_version=21)
# The C600 PCIe card: one Mk2-class IPU (1472 tiles, 900 MB of In-Processor-Memory)
# at 280 TFLOPS FP16 [spec: C600 datasheet], so its clock is 280e12 / (2 x 64 x 1472)
# = 1.49 GHz; it reaches its host over PCIe Gen4 x16 (16 GT/s x 16 lanes, 128b/130b:
# 31.5 GB/s each way) [spec: C600 datasheet, PCIe 4.0]. It is chosen by setMachine
# (useOfflineIpuTarget(2) keeps it: its IPU version is the Mk2's).
C600 = MK2.with_(name="c600", clock_hz=280e12 / (2 * 64 * 1472), host_link_bytes_per_s=31.5e9)

PRESETS = {m.name: m for m in (MK1, MK2, BOW, C600)}
# PopTorch's useOfflineIpuTarget(ipu_version) values and the preset each selects
IPU_VERSIONS = {m.ipu_version: m.name for m in (MK1, MK2, BOW)}


def machine(name_or_machine: str | Machine | None) -> Machine:
    if name_or_machine is None:
        return MK2
    if isinstance(name_or_machine, Machine):
        return name_or_machine
    key = str(name_or_machine).lower()
    if key not in PRESETS:
        from tilefx.errors import Error

        raise Error(f"unknown IPU machine {name_or_machine!r}: expected one of {sorted(PRESETS)}")
    return PRESETS[key]
