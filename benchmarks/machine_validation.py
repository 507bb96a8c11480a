"""The machine model against published IPU measurements: prints
workload | published | tilefx | ratio for every row of
docs/machine-validation.md (where each figure, its source and its
configuration are recorded).

    PYTHONPATH=. .venv/bin/python benchmarks/machine_validation.py [--quick]

Everything is compile-only: the models are built with torch at the
published sizes, compiled for the simulated machine, and their profiles
(cycles, memory per tile) read. Uniform stacks (BERT encoder layers) are
compiled with 1 and 2 layers and extended linearly (their cost and memory
per layer are exactly additive in the model), which keeps the rows cheap
enough for the tests to pin them (tests/test_machine_validation.py).
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.dirname(__file__))
import tilefx  # noqa: E402
from tilefx.backend.costs import linear_cost, plan_matmul  # noqa: E402
from tilefx.backend.machine import BOW, MK1, MK2, Machine  # noqa: E402
from validation_models import BertPretraining, BertStack, ResNet50, WithCrossEntropy  # noqa: E402

BERT_LARGE = dict(d=1024, heads=16, ffn=4096)
BERT_BASE = dict(d=768, heads=12, ffn=3072)


@dataclass(frozen=True)
class Row:
    workload: str
    published: float
    unit: str
    source: str
    compute: Callable[[], float]
    band: float = 0.30  # the target: within +-30% of the published figure


def _options(machine: Machine, half_partials: bool = True, proportion: float | None = None,
             state_off_chip: bool = False):
    opts = tilefx.Options().setMachine(machine)
    if half_partials:
        opts.Precision.setPartialsType(torch.half)
    if proportion is not None:
        opts.setAvailableMemoryProportion({"IPU0": proportion})
    if state_off_chip:
        opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    return opts


@functools.cache
def bert_stack_profile(width: str, layers: int, mb: int, seq: int, training: bool, machine: Machine,
                       proportion: float | None = None, recompute: bool = False):
    """(cycles of one micro-batch, peak tile bytes) of `layers` fp16 BERT layers on one IPU;
    `recompute`: a recomputation checkpoint after every layer (training)."""
    torch.manual_seed(0)
    model = BertStack(layers=layers, recompute=recompute and training,
                      **(BERT_LARGE if width == "large" else BERT_BASE)).half()
    d = model.layers[0].qkv.in_features
    x = torch.randn(mb, seq, d).half()
    opts = _options(machine, proportion=proportion)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if training:
            c = tilefx.compile(model, x, training=True, options=opts,
                               optimizer=tilefx.optim.LAMB(model.parameters()))
        else:
            c = tilefx.compile(model.eval(), x, options=opts)
    p = c.profile
    return sum(p.stage_cycles.values()), int(max(m.peak.max() for m in p.memory.values()))


def bert_layer_fit(width, mb, seq, training, machine, proportion=None, recompute=False):
    """(fixed, per layer) cycles and peak-tile bytes of a BERT layer stack, from
    compiles of 1 and 2 layers."""
    c1, m1 = bert_stack_profile(width, 1, mb, seq, training, machine, proportion, recompute)
    c2, m2 = bert_stack_profile(width, 2, mb, seq, training, machine, proportion, recompute)
    return (2 * c1 - c2, c2 - c1), (2 * m1 - m2, m2 - m1)


def bert_pipeline_throughput(width: str, layers_per_ipu: tuple[int, ...], mb: int, seq: int,
                             replicas: int, machine: Machine, proportion: float,
                             recompute: bool = True) -> float:
    """Sequences per second of a replicated BERT pipeline in its steady state
    (the published runs accumulate hundreds of micro-batches per update, so
    fill, flush and the weight update are under 1%): the slowest stage bounds
    it, a stage step being its layers' forward and backward (with
    `recompute`, as Graphcore's configurations set
    recompute_checkpoint_every_layer, the backward recomputes each layer's
    activations: the ipu-recompute pass's clones of the forward ops) and the
    copy of the hidden states to the next IPU and back."""
    n = max(layers_per_ipu)
    (fixed, per_layer), _ = bert_layer_fit(width, mb, seq, True, machine, proportion, recompute)
    step = fixed + n * per_layer
    d = (BERT_LARGE if width == "large" else BERT_BASE)["d"]
    step += 2 * machine.link_cycles(mb * seq * d * 2, machine.ipu_link_bytes_per_s)  # fwd + grad back
    return replicas * mb * machine.clock_hz / step


@functools.cache
def resnet50_training_throughput(mb: int, replicas: int, machine: Machine) -> float:
    """Images per second of ResNet-50 data-parallel training, one IPU per replica."""
    torch.manual_seed(0)
    model = WithCrossEntropy(ResNet50()).half()
    x, y = torch.randn(mb, 3, 224, 224).half(), torch.randint(0, 1000, (mb,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = tilefx.compile(model, x, y, training=True, options=_options(machine),
                           optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    return replicas * mb * machine.clock_hz / c.profile.cycles_per_update


def matmul_fraction_of_peak(n: int, itemsize: int, machine: Machine) -> float:
    p = plan_matmul(1, n, n, n, itemsize, machine, 0.6)
    return 2 * n ** 3 / machine.seconds(p.cycles) / machine.peak_flops(itemsize)


def streaming_load_tbs(machine: Machine, n: int = 1 << 26) -> float:
    """Aggregate bytes loaded per second by a large fp32 elementwise add (two
    operands loaded per result), as a streaming-bandwidth microbenchmark sees it."""
    c = linear_cost(n, 2 * 4 * n, 4 * n, 4, machine)
    return 2 * 4 * n / machine.seconds(c.cycles) / 1e12


def exchange_tbs(machine: Machine) -> float:
    """All-to-all exchange: every tile receiving at its exchange width."""
    return machine.tiles * machine.exchange_bytes_per_cycle * machine.clock_hz / 1e12


# the available memory proportion Graphcore's BERT-Large configuration gives the
# encoder IPUs (Graphcore/bert-large-uncased ipu_config.json: 0.1, 0.15, 0.15, 0.15)
BERT_LARGE_PROPORTION = 0.15


def largest_bert_large_stack(mb: int, training: bool, proportion: float = BERT_LARGE_PROPORTION,
                             seq: int = 128) -> int:
    """The most BERT-Large layers (fp16 weights and partials; training with LAMB,
    its state on chip, no recomputation) whose peak tile memory fits one Mk2, from the
    per-layer memory fit. Bow has the same tiles and SRAM as Mk2, so the
    compiles are shared with the Bow throughput rows."""
    assert (BOW.tiles, BOW.bytes_per_tile) == (MK2.tiles, MK2.bytes_per_tile)
    _, (fixed, per_layer) = bert_layer_fit("large", mb, seq, training, BOW, proportion)
    return max(0, int((MK2.bytes_per_tile - fixed) // per_layer))


# Graphcore's BERT-Large pre-training pipeline (Graphcore/bert-large-uncased ipu_config.json)
BERT_LARGE_SPLIT = (3, 7, 7, 7)
BERT_LARGE_PROPORTIONS = (0.1, 0.15, 0.15, 0.15)


def bert_large_pipeline_peaks(split: tuple[int, ...] = BERT_LARGE_SPLIT, mb: int = 8, seq: int = 128,
                              accumulation: int = 16) -> dict[int, float]:
    """Peak tile memory of each IPU, as a fraction of a Mk2 tile, of BERT-Large
    pre-training compiled whole in Graphcore's configuration: `split` layers
    per IPU pipelined (the embeddings and the tied masked-LM head on IPU 0),
    a recomputation checkpoint every layer, fp16 weights and partials, LAMB
    with its state off chip, per-IPU memory proportions, PopART's
    decomposeGradSum (Graphcore's BERT options set it). Compile-only: the
    model is built on the meta device and compiled for an offline target, so
    its 340 M parameters cost no memory; the memory check is left to the
    caller (a fraction above 1 is out of memory)."""
    from tilefx.backend import profile as profile_module

    with torch.device("meta"):
        model = BertPretraining(layers=sum(split), seq=seq, layers_per_ipu=split, recompute=True).half()
    opts = _options(MK2, state_off_chip=True).useOfflineIpuTarget()
    opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
    opts.Training.gradientAccumulation(accumulation)
    opts.setAvailableMemoryProportion({f"IPU{i}": p for i, p in enumerate(BERT_LARGE_PROPORTIONS)
                                       if i < len(split)})
    opts._Popart.set("decomposeGradSum", True)  # as Graphcore's BERT options set it
    ids = torch.zeros(accumulation * mb, seq, dtype=torch.long)
    labels = torch.zeros(accumulation * mb, 20, dtype=torch.long)
    check, profile_module._check_memory = profile_module._check_memory, lambda p: None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.LAMB(model.parameters()))
            trainer.compile(ids, labels)
    finally:
        profile_module._check_memory = check
    return {ipu: float(m.peak.max()) / MK2.bytes_per_tile for ipu, m in trainer.profile.memory.items()}


SRC_JIA = "Jia et al. 2019, arXiv:1912.03413 (GC2 / Mk1)"
SRC_SPEC = "Graphcore GC200 / IPU-M2000 datasheet"
SRC_PERF = "graphcore.ai/performance-results (Bow Pod16 training table)"
SRC_MLPERF = "Graphcore blog, 'Accelerating ResNet-50 Training on the IPU for MLPerf' (Jan 2022)"
SRC_REF = "REFERENCE.md section 1 (one public measurement, not independently verified)"


def rows(quick: bool = False) -> list[Row]:
    out = [
        Row("Mk1 peak fp32", 31.1, "TFLOPS", SRC_JIA, lambda: MK1.peak_flops(4) / 1e12, 0.02),
        Row("Mk1 peak mixed fp16.32", 124.5, "TFLOPS", SRC_JIA, lambda: MK1.peak_flops(2) / 1e12, 0.02),
        Row("Mk1 aggregate load bandwidth, streaming kernel (measured)", 30.7, "TB/s", SRC_JIA,
            lambda: streaming_load_tbs(MK1)),
        Row("Mk2 peak fp16.32", 250, "TFLOPS", SRC_SPEC, lambda: MK2.peak_flops(2) / 1e12, 0.02),
        Row("Mk2 in-processor memory (the datasheet's 900 MB are MiB)", 900, "MiB", SRC_SPEC,
            lambda: MK2.bytes_per_ipu / 2 ** 20, 0.02),
        Row("Mk2 all-to-all exchange", 8.0, "TB/s", SRC_SPEC, lambda: exchange_tbs(MK2)),
        Row("Mk2 IPU-Links, all links both ways", 320, "GB/s", SRC_SPEC,
            lambda: 2 * MK2.ipu_links * MK2.ipu_link_bytes_per_s / 1e9),
        Row("Mk2 fp16 matmul 4096^3, fraction of peak", 0.32, "of peak", SRC_REF,
            lambda: matmul_fraction_of_peak(4096, 2, MK2)),
        Row("BERT-Large Ph1 SL128 training, Bow Pod16 (4 IPUs x 4 replicas)", 4528, "seq/s", SRC_PERF,
            lambda: bert_pipeline_throughput("large", (3, 7, 7, 7), 8, 128, 4, BOW, BERT_LARGE_PROPORTION)),
    ]
    if not quick:
        out += [
            Row("BERT-Base Ph1 SL128 training, Bow Pod16 (4 IPUs x 4 replicas)", 16391, "seq/s", SRC_PERF,
                lambda: bert_pipeline_throughput("base", (0, 4, 4, 4), 8, 128, 4, BOW, 0.22)),
            Row("BERT-Large SQuAD SL384 fine-tuning, Bow Pod16 (4 IPUs x 4 replicas)", 1183, "seq/s",
                SRC_PERF, lambda: bert_pipeline_throughput("large", (3, 7, 7, 7), 2, 384, 4, BOW,
                                                           BERT_LARGE_PROPORTION)),
            Row("ResNet-50 v1.5 training, Bow Pod16 (16 x 1 IPU)", 42029, "img/s", SRC_PERF,
                lambda: resnet50_training_throughput(4, 16, BOW)),
            Row("ResNet-50 v1.5 training, Mk2 IPU-POD16 MLPerf v1.1 (16 x 1 IPU)", 30000, "img/s",
                SRC_MLPERF, lambda: resnet50_training_throughput(4, 16, MK2)),
        ]
    return out


def main(argv=None):
    quick = "--quick" in (argv or sys.argv[1:])
    print(f"{'workload':<72} {'published':>12} {'tilefx':>12} {'ratio':>7}  band")
    for r in rows(quick):
        got = r.compute()
        ratio = got / r.published
        ok = abs(ratio - 1) <= r.band
        print(f"{r.workload:<72} {r.published:>12,.4g} {got:>12,.4g} {ratio:>7.2f}  "
              f"{'within' if ok else 'OUTSIDE'} +-{100 * r.band:.0f}%")
    print()
    for training in (False, True):
        for mb in (1, 8):
            n = largest_bert_large_stack(mb, training)
            print(f"largest BERT-Large layer stack on one Mk2 (SL128, proportion {BERT_LARGE_PROPORTION}), "
                  f"{'training' if training else 'inference'} micro-batch {mb}: {n} layers")
    for split in (BERT_LARGE_SPLIT, (3, 8, 8, 5), (3, 9, 9, 3)):
        peaks = bert_large_pipeline_peaks(split)
        print(f"BERT-Large pre-training pipeline {list(split)} (Graphcore's configuration), peak "
              f"tile memory per IPU: " + ", ".join(f"IPU{i} {100 * f:.0f}%" for i, f in sorted(peaks.items())))


if __name__ == "__main__":
    main()
