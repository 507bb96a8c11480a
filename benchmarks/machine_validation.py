"""The machine model against published IPU measurements: prints
workload | published | tilefx | ratio for every row of
docs/machine-validation.md (where each figure, its source and its
configuration are recorded).

    PYTHONPATH=. .venv/bin/python benchmarks/machine_validation.py [--quick] [--only=KEY] [--vit-miss] [--effnet-dino]
    PYTHONPATH=. .venv/bin/python benchmarks/machine_validation.py --plots [DIR]

`--plots` draws Jia et al.'s microbenchmark curves against the model (benchmarks/jia_curves.py).

`--effnet-dino` prints what the G16-EfficientNet-B4 Pod16 and DINO rows
cost, IPU by IPU, against the published step time, and DINO without the
checkpoints on its last IPU's inputs. `--vit-miss` prints the checks of the ViT miss (docs/machine-validation.md):
the published cycles per token and layer, ViT pre-training's per-step and
per-update time from its Pod16 and Pod64 figures, the pre-training compile
with one candidate cause changed at a time, the ViT and BERT-Base rows'
cycles per token-layer by op class and step part (vit_miss_validation.py),
and the products' plans. The full command also prints every training
row's time per micro-batch step, published against tilefx's.

Everything is compile-only: each prediction row builds the published model
whole on the meta device in its published configuration and compiles it
for the offline target; the held-out figures are computed the same way.
The inference rows are inference_validation.py's; the full command also
prints their time per batch as fixed + per item, and the SchNet
interaction block against Graphcore's Bow measurements of it
(gnn_validation.py).
The memory answers (how many BERT-Large layers fit one Mk2) compile stacks
of 1 and 2 layers and extend them linearly (a layer's memory is exactly
additive in the model), checked by full compiles in
tests/backend/test_machine_validation.py.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.dirname(__file__))
import jia_curves  # noqa: E402
import vit_miss_validation as vm  # noqa: E402
import tilefx  # noqa: E402
from tilefx.backend.costs import plan_matmul  # noqa: E402
from tilefx.backend.machine import BOW, C600, MK1, MK2, Machine  # noqa: E402
from gnn_validation import block_checks  # noqa: E402
from inference_validation import batch_fits, inference_rows  # noqa: E402
from validation_common import Row  # noqa: E402
from validation_common import meta as _meta  # noqa: E402
from validation_common import options as _options  # noqa: E402
from validation_common import past_the_memory_check as _compiled_past_the_memory_check  # noqa: E402
from validation_models import (BertPretraining, BertSquad, BertStack, Dino, EfficientNet,  # noqa: E402
                               EightBitInput, ResNet50, SchNet, Swin, UNet, ViT, ViTStack)

BERT_LARGE = dict(d=1024, heads=16, ffn=4096)
BERT_BASE = dict(d=768, heads=12, ffn=3072)


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


def matmul_fraction_of_peak(n: int, itemsize: int, machine: Machine) -> float:
    p = plan_matmul(1, n, n, n, itemsize, machine, 0.6)
    return 2 * n ** 3 / machine.seconds(p.cycles) / machine.peak_flops(itemsize)


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
# Graphcore's PopART BERT configurations (graphcore/examples nlp/bert/popart/configs), for
# the rows whose figure is a PopART run: pretrain_large_384.json's proportions,
# pretrain_base_{128,512}.json (encoder from IPU 1, layers [4, 4, 4], proportion 0.28, LAMB
# state off chip with replicated tensor sharding, micro-batch 32 at SL128 and 8 at SL512)
# and squad_large_384.json (8 IPUs x 2 replicas, micro-batch 4, Adam state on chip, sharded)
BERT_LARGE_PH2_PROPORTIONS = (0.15, 0.4, 0.4, 0.4)
BERT_BASE_SPLIT = (0, 4, 4, 4)
BERT_BASE_PROPORTIONS = (0.28,) * 4
SQUAD_SPLIT = (2, 3, 3, 3, 3, 3, 3, 4)
SQUAD_PROPORTIONS = (0.1, 0.3, 0.32, 0.34, 0.36, 0.38, 0.4, 0.32)


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
    with _compiled_past_the_memory_check():
        trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.LAMB(model.parameters()))
        trainer.compile(ids, labels)
    return {ipu: float(m.peak.max()) / MK2.bytes_per_tile for ipu, m in trainer.profile.memory.items()}


SRC_JIA = "Jia et al. 2019, arXiv:1912.03413 (GC2 / Mk1)"
SRC_SPEC = "Graphcore GC200 / IPU-M2000 / Bow-2000 datasheets"
SRC_REF = "one public measurement, not independently verified"
SRC_C600 = "Graphcore C600 datasheet; PCIe 4.0 (16 GT/s per lane, 128b/130b)"
# Graphcore's performance-results page (graphcore.ai/performance-results, mirrored on
# graphcore.cn/performance-results), Bow Pod training table; "SDK 3.x" or "pre-SDK 2.5"
SRC_PERF = "Graphcore performance results, Bow Pod training table"
SRC_HF_BERT_L = "Hugging Face Graphcore/bert-large-uncased ipu_config.json"
SRC_HF_BERT_B = "Hugging Face Graphcore/bert-base-uncased ipu_config.json"
SRC_VIT = "graphcore/examples vision/vit/pytorch/configs.yml"
SRC_CNN = "graphcore/examples vision/cnns/pytorch/train/configs.yml"
SRC_POPART_BERT = "graphcore/examples nlp/bert/popart/configs"
SRC_UNET = "graphcore/examples vision/unet_medical/tensorflow2 (benchmarks.yml, parse_args.py, model_utils.py)"
SRC_SWIN = "graphcore/examples vision/swin/pytorch (configs/swin_tiny.yaml, options.py, train_swin.py)"
SRC_RESNEXT = ("graphcore/examples vision/cnns/tensorflow1 (training/configs.yml resnext101_16ipus, benchmarks.yml, "
               "training/Models/resnext.py)")
SRC_DINO = "graphcore/examples vision/dino/pytorch (configs.yml vit_base_pod64, benchmarks.yml, options.py, core/)"
SRC_SCHNET = ("graphcore-research/hydronet-gnn (experiments/perf_ablation.ipynb, HydroNet 4.5m, 'Prefetch'; "
              "sweeps/perf_ablation.yml, configs/hydronet_packed.yml, hydronet/model.py, hydronet/packing.py)")
SRC_EFFNET = ("graphcore/examples vision/cnns/tensorflow1 (training/configs.yml efficientnet_b4_g16_16ipus and "
              "_64ipus, benchmarks.yml, training/Models/efficientnet.py)")


@dataclass(frozen=True)
class Constant:
    """A datasheet constant of the machine: it defines the model, it is not evidence."""

    name: str
    value: float
    unit: str
    source: str
    compute: Callable[[], float]


def configuration() -> list[Constant]:
    return [
        Constant("Mk1 peak FP32", 31.1, "TFLOPS", SRC_JIA, lambda: MK1.peak_flops(4) / 1e12),
        Constant("Mk1 peak FP16 (mixed precision)", 124.5, "TFLOPS", SRC_JIA, lambda: MK1.peak_flops(2) / 1e12),
        Constant("Mk1 aggregate load ceiling, 16 B per tile and cycle", 31.1, "TB/s", SRC_JIA,
                 lambda: MK1.tiles * MK1.load_bytes_per_cycle * MK1.clock_hz / 1e12),
        Constant("Mk2 peak FP16.16", 250, "TFLOPS", SRC_SPEC, lambda: MK2.peak_flops(2, 2) / 1e12),
        Constant("Mk2 peak FP32", 62.5, "TFLOPS", SRC_SPEC, lambda: MK2.peak_flops(4) / 1e12),
        Constant("Bow peak FP16.16", 350, "TFLOPS", SRC_SPEC, lambda: BOW.peak_flops(2, 2) / 1e12),
        Constant("Mk2 in-processor memory (the datasheet's 900 MB are MiB)", 900, "MiB", SRC_SPEC,
                 lambda: MK2.bytes_per_ipu / 2 ** 20),
        Constant("Mk2 all-to-all exchange", 8.0, "TB/s", SRC_SPEC, lambda: exchange_tbs(MK2)),
        Constant("Mk2 IPU-Links, 10 links both ways", 320, "GB/s", SRC_SPEC,
                 lambda: 2 * MK2.ipu_links * MK2.ipu_link_bytes_per_s / 1e9),
        Constant("IPU-Machine host link, 2 x 100 GbE RoCE", 25, "GB/s", SRC_SPEC,
                 lambda: MK2.host_link_bytes_per_s / 1e9),
        Constant("IPU-Machine GW-Links, 2 x 100 Gbps", 25, "GB/s", SRC_SPEC,
                 lambda: MK2.gw_link_bytes_per_s / 1e9),
        Constant("C600 peak FP16", 280, "TFLOPS", SRC_C600, lambda: C600.peak_flops(2, 2) / 1e12),
        Constant("C600 host link, PCIe Gen4 x16, one direction", 31.5, "GB/s", SRC_C600,
                 lambda: C600.host_link_bytes_per_s / 1e9),
    ]


def pipelined_throughput(build: Callable[[], torch.nn.Module], inputs: Callable[[int], tuple], *,
                         machine: Machine, replicas: int, mb: int, accumulation: int,
                         proportions: tuple[float, ...], optimizer: str, state_off_chip: bool = False,
                         sharded_state: bool = False, half_partials: bool = True,
                         pipelined: bool = True, processes: int = 1, half: bool = True,
                         auto_stage: str = "AutoIncrement", profiles: list | None = None,
                         recomputation: int | None = None) -> float:
    """Items per second of one weight update of a whole model compiled
    compile-only (the model on the meta device, an offline target of
    `machine`'s IPU version), with its replicas, gradient accumulation,
    pipeline and memory proportions: the profile's cycles per weight update
    include the pipeline's fill and flush, the gradient all-reduce across
    replicas (IPU-Links, GW-Links beyond a POD64), the weight update and
    the host streams. `auto_stage`: the AutoStage of the pipeline (a model
    whose layers return to an IPU keeps one stage per IPU with SameAsIpu).
    `processes`: PopRun instances sharing the `replicas`,
    each streaming its replicas' inputs through its own host link. `half`:
    fp16 weights and activations (else fp32, the 32.32 runs); `profiles`:
    a list the compile's profile is appended to; `recomputation`: PopART's
    autoRecomputation (None: PopTorch's default, each pipeline stage
    recomputed from its inputs over several IPUs). The
    memory check is the caller's (a row predicts throughput; the published
    runs fit)."""

    with torch.device("meta"):
        torch.manual_seed(0)
        model = build()
        model = model.half() if half else model
    opts = _options(machine, half_partials=half_partials, state_off_chip=state_off_chip)
    opts.useOfflineIpuTarget(machine.ipu_version)
    if sharded_state:
        opts.TensorLocations.setOptimizerLocation(
            tilefx.TensorLocationSettings().useOnChipStorage(not state_off_chip).useReplicatedTensorSharding(True))
    if pipelined:
        opts.setExecutionStrategy(tilefx.PipelinedExecution(getattr(tilefx.AutoStage, auto_stage)))
    if recomputation is not None:
        opts._Popart.set("autoRecomputation", recomputation)
    opts.Training.gradientAccumulation(accumulation)
    opts.replicationFactor(replicas // processes)
    if processes > 1:
        opts.Distributed.configureProcessId(0, processes)
    opts.setAvailableMemoryProportion({f"IPU{i}": p for i, p in enumerate(proportions)})
    opt = {"lamb": lambda p: tilefx.optim.LAMB(p),
           "adam": lambda p: tilefx.optim.Adam(p),
           "adamw": lambda p: tilefx.optim.AdamW(p),
           "sgd": lambda p: tilefx.optim.SGD(p, lr=0.1, momentum=0.9)}[optimizer](model.parameters())
    with _compiled_past_the_memory_check():
        trainer = tilefx.trainingModel(model, opts, optimizer=opt)
        trainer.compile(*inputs(replicas // processes * accumulation * mb))
    if profiles is not None:
        profiles.append(trainer.profile)
    return replicas * accumulation * mb / machine.seconds(trainer.profile.cycles_per_update)


def pod_processes(ipus: int) -> int:
    """PopRun instances of a run on `ipus` IPUs: one per host server, and an
    IPU-POD has one host server per 16 IPUs (the IPU-POD16 reference design
    has one server, an IPU-POD64 four) [assumed: the rows' sources do not
    give their instance counts]."""
    return max(1, ipus // 16)


@functools.cache
def bert_pretraining(width: str, seq: int, masked: int, split: tuple[int, ...], proportions, *,
                     replicas: int, mb: int, accumulation: int, state_off_chip: bool) -> float:
    """BERT pre-training on Bow PODs (one PopRun instance per POD16's host server)."""
    dims = BERT_LARGE if width == "large" else BERT_BASE
    return pipelined_throughput(
        lambda: BertPretraining(layers=sum(split), seq=seq, masked=masked, layers_per_ipu=split, recompute=True,
                                **dims),
        lambda n: (_meta(n, seq, dtype=torch.long), _meta(n, masked, dtype=torch.long)),
        machine=BOW, replicas=replicas, mb=mb, accumulation=accumulation, proportions=proportions,
        optimizer="lamb", state_off_chip=state_off_chip, sharded_state=state_off_chip,
        processes=pod_processes(replicas * len(split)))


@functools.cache
def bert_squad(*, replicas: int = 2, mb: int = 4, accumulation: int = 32, seq: int = 384) -> float:
    """BERT-Large SQuAD fine-tuning in Graphcore's PopART configuration
    (squad_large_384.json): 8 IPUs per replica, Adam with its state on chip,
    sharded across the replicas."""
    return pipelined_throughput(
        lambda: BertSquad(layers=sum(SQUAD_SPLIT), seq=seq, layers_per_ipu=SQUAD_SPLIT, recompute=True,
                          **BERT_LARGE),
        lambda n: (_meta(n, seq, dtype=torch.long), _meta(n, 2, dtype=torch.long)),
        machine=BOW, replicas=replicas, mb=mb, accumulation=accumulation, proportions=SQUAD_PROPORTIONS,
        optimizer="adam", sharded_state=True)


@functools.cache
def vit(pretrain: bool, *, replicas: int, mb: int, accumulation: int, processes: int = 1,
        recompute: bool = True, half_partials: bool = True, graphcore_block: bool = False,
        recomputation: int | None = None) -> float:
    """`vit_compile`'s throughput, cached: the rows, the held-out figure and
    the ViT-miss checks share their compiles."""
    return vit_compile(pretrain, replicas=replicas, mb=mb, accumulation=accumulation, processes=processes,
                       recompute=recompute, half_partials=half_partials, graphcore_block=graphcore_block,
                       recomputation=recomputation)


def vit_compile(pretrain: bool, *, replicas: int, mb: int, accumulation: int, processes: int = 1,
                recompute: bool = True, half_partials: bool = True, graphcore_block: bool = False,
                profiles: list | None = None, recomputation: int | None = None) -> float:
    """ViT-B/16 as Graphcore's benchmarks run it (vision/vit/pytorch
    benchmarks.yml): pre-training with 8-bit images (`--byteio true`),
    fine-tuning with fp16 images; `processes`: the PopRun instances. The
    other options are the checks of the ViT miss (docs/machine-validation.md):
    `recompute` (the configuration's recompute_checkpoint_every_layer),
    `recomputation` (PopART's autoRecomputation, None: PopTorch's default),
    `half_partials` (the configuration's), `graphcore_block`: Graphcore's
    block (models/modules.py) instead of Hugging Face's layer: separate q, k,
    v, dropout 0.1 (attention probabilities 0.1 in pre-training, 0 in
    fine-tuning) and checkpoints mid-way through layers 1, 4, 7 and 10."""
    block = dict(separate_qkv=True, dropout=0.1, attention_dropout=0.1 if pretrain else 0.0) \
        if graphcore_block else None
    return pipelined_throughput(
        lambda: ViT(layers_per_ipu=(3, 3, 3, 3), recompute=recompute, representation=pretrain, byteio=pretrain,
                    block=block, mid_checkpoints=(1, 4, 7, 10) if graphcore_block else ()),
        lambda n: (_meta(n, 3, 224, 224, dtype=torch.uint8 if pretrain else torch.half), _meta(n, dtype=torch.long)),
        machine=BOW, replicas=replicas, mb=mb, accumulation=accumulation, proportions=(0.3,) * 4,
        optimizer="lamb" if pretrain else "sgd", sharded_state=True, processes=processes,
        half_partials=half_partials, profiles=profiles, recomputation=recomputation)


@functools.cache
def unet() -> float:
    """Graphcore's medical UNet trained on a Bow-2000 (one replica pipelined
    over its 4 IPUs): micro-batch 1, gradient accumulation 24, per-IPU
    proportions [0.7, 0.3, 0.45, 0.7], fp16 with fp16 partials, SGD with
    momentum (the example's defaults and its benchmark command), each stage
    recomputed from its inputs (the example's automatic recomputation, as
    tilefx's default over several IPUs)."""
    return pipelined_throughput(
        UNet, lambda n: (_meta(n, 1, 572, 572), _meta(n, 388, 388, dtype=torch.long)),
        machine=BOW, replicas=1, mb=1, accumulation=24, proportions=(0.7, 0.3, 0.45, 0.7), optimizer="sgd")


@functools.cache
def swin_tiny() -> float:
    """Swin-T pre-training on a Bow Pod16 in Graphcore's configuration
    (swin_tiny.yaml): 4 replicas of 4 IPUs, blocks per IPU [2, 3, 5, 2],
    micro-batch 4, gradient accumulation 64, AdamW, proportion 0.15, the
    model in fp32 with fp32 partials (PRECISION [half, float]: fp16 data,
    fp32 model; the results page lists it as 32.32). The configuration places
    no recomputation checkpoint, and PopTorch, pipelining over 4 IPUs,
    recomputes each stage's forward from its input (its default
    autoRecomputation)."""
    return swin_tiny_compile()


def swin_tiny_compile(recomputation: int | None = None, profiles: list | None = None) -> float:
    return pipelined_throughput(
        lambda: Swin(blocks_per_ipu=(2, 3, 5, 2)),
        lambda n: (_meta(n, 3, 224, 224, dtype=torch.float), _meta(n, 1000, dtype=torch.float)),
        machine=BOW, replicas=4, mb=4, accumulation=64, proportions=(0.15,) * 4, optimizer="adamw",
        half=False, half_partials=False, profiles=profiles, recomputation=recomputation)


# DINO's Pod64 benchmark (benchmarks.yml pytorch_dino_train_real_pod64_conv): 8 PopRun
# instances, 8 replicas of 8 IPUs, micro-batch 2, gradient accumulation 200
DINO_POD64 = dict(replicas=8, mb=2, accumulation=200, processes=8)


@functools.cache
def dino(*, replicas: int, mb: int, accumulation: int, processes: int) -> float:
    """`dino_compile`'s throughput, cached."""
    return dino_compile(replicas=replicas, mb=mb, accumulation=accumulation, processes=processes)


def dino_compile(*, replicas: int, mb: int, accumulation: int, processes: int, build=Dino, image: int = 224,
                 local: int = 96, profiles: list | None = None) -> float:
    """DINO ViT-B/16 training in Graphcore's PyTorch configuration (vit_base_pod64):
    8 IPUs per replica, layers [1, 2, 2, 2, 2, 2, 1, 0] (AutoStage.SameAsIpu),
    2 global and 8 local 8-bit crops per image, fp16 ViTs with fp16 partials,
    fp32 heads, proportion 0.15 on every IPU, AdamW with its state sharded
    across the replicas, PopTorch's recomputation of each pipeline stage.
    `build`, `image`, `local`: a smaller model for the tests."""
    return pipelined_throughput(
        build, lambda n: (_meta(n, 2, 3, image, image, dtype=torch.uint8),
                          _meta(n, 8, 3, local, local, dtype=torch.uint8)),
        machine=BOW, replicas=replicas, mb=mb, accumulation=accumulation, proportions=(0.15,) * 8,
        optimizer="adamw", sharded_state=True, processes=processes, half=False, auto_stage="SameAsIpu",
        profiles=profiles)


# pipeline_splits [block4a]: the first block of the fourth stage, after 2 + 4 + 4 blocks of B4
EFFICIENTNET_B4_SPLIT = 10
# (replicas of 2 IPUs, gradient accumulation) of each G16-EfficientNet-B4 row at micro-batch 3:
# efficientnet_b4_g16_16ipus and _64ipus, and the Pod256 run's (not published)
EFFICIENTNET_B4_RUNS = {"efficientnet-b4-pod16": (8, 256), "efficientnet-b4-pod64": (32, 64),
                        "efficientnet-b4-pod256": (128, 16)}


@functools.cache
def efficientnet_b4(key: str) -> float:
    """`efficientnet_compile`'s throughput of G16-EfficientNet-B4 in the run of row `key`, cached."""
    replicas, accumulation = EFFICIENTNET_B4_RUNS[key]
    return efficientnet_compile(replicas=replicas, accumulation=accumulation)


def efficientnet_compile(*, replicas: int, accumulation: int, build=None, image: int = 380,
                         profiles: list | None = None) -> float:
    """G16-EfficientNet-B4 training in Graphcore's TensorFlow 1 configuration
    (efficientnet_b4_g16_large_batch_size_high_throughput): 380x380 8-bit
    images normalised on the IPU, two IPUs per replica split before block4a,
    micro-batch 3, proportion 0.4, 16.16, each pipeline stage recomputed
    (enable_recomputation), one PopRun instance per replica as its benchmarks
    run; LARS is costed as SGD with momentum (tilefx has no LARS: its
    per-layer trust ratio adds two norms per weight and update). `build`,
    `image`: a smaller model for the tests."""
    build = build or (lambda: EfficientNet(split_before=EFFICIENTNET_B4_SPLIT, stage_recomputation=True))
    return pipelined_throughput(
        lambda: EightBitInput(build()), lambda n: (_meta(n, 3, image, image, dtype=torch.uint8),
                                                   _meta(n, dtype=torch.long)),
        machine=BOW, replicas=replicas, mb=3, accumulation=accumulation, proportions=(0.4, 0.4),
        optimizer="sgd", processes=replicas, profiles=profiles)


@functools.cache
def resnext101() -> float:
    """ResNeXt-101 32x4d training in Graphcore's TensorFlow 1 configuration
    (resnext101_16ipus and its Pod16 benchmark): 8 replicas of 2 IPUs split
    after stage 3's fourth unit (block 11 starts IPU 1), micro-batch 6,
    accumulation 16, group norm (the model's ImageNet default, 32 groups),
    each pipeline stage recomputed, 8-bit input, 8 PopRun instances."""
    return pipelined_throughput(
        lambda: EightBitInput(ResNet50(blocks=(3, 4, 23, 3), groups=32, mid_width=128, norm_groups=32,
                                       split_before=RESNEXT101_SPLIT, stage_recomputation=True)),
        lambda n: (_meta(n, 3, 224, 224, dtype=torch.uint8), _meta(n, dtype=torch.long)),
        machine=BOW, replicas=8, mb=6, accumulation=16, proportions=(0.6, 0.6), optimizer="sgd", processes=8)


# pipeline_splits [stage3/unit4/relu]: IPU 1 starts after 3 + 4 + 4 blocks
RESNEXT101_SPLIT = 11

# Graphcore's SchNet benchmark on HydroNet (graphcore-research/hydronet-gnn
# configs/hydronet_packed.yml, hydronet/packing.py): packs of at most 154 atoms
# and 5 molecules (a filler molecule pads an incomplete pack: 6 slots), 7 packs
# per micro-batch; the dataset's 4,464,740 water clusters hold 311,136,889 atoms
# (the packing strategy's histogram)
SCHNET_PACK_ATOMS, SCHNET_PACKS, SCHNET_PACK_SLOTS = 154, 7, 6
HYDRONET_GRAPHS, HYDRONET_ATOMS = 4464740, 311136889


@functools.cache
def schnet_hydronet() -> float:
    """Molecules per second of SchNet trained on HydroNet as Graphcore's
    benchmark runs it: 16 replicas of one IPU, gradient accumulation 32,
    micro-batches of 7 packs of 154 atoms, Adam, fp32; a pack carries
    154 / 69.7 molecules (the dataset's mean, packs full: an upper bound)."""
    atoms, slots = SCHNET_PACKS * SCHNET_PACK_ATOMS, SCHNET_PACKS * SCHNET_PACK_SLOTS
    micro_batches = pipelined_throughput(
        lambda: SchNet(graphs=slots),
        lambda n: (_meta(n, atoms, dtype=torch.long), _meta(n, atoms, 3, dtype=torch.float),
                   _meta(n, atoms, dtype=torch.long), _meta(n, slots, dtype=torch.float)),
        machine=BOW, replicas=16, mb=1, accumulation=32, proportions=(0.6,), optimizer="adam", pipelined=False,
        half=False, half_partials=False)
    return micro_batches * SCHNET_PACKS * SCHNET_PACK_ATOMS * HYDRONET_GRAPHS / HYDRONET_ATOMS


def cnn(build, *, replicas: int, mb: int, accumulation: int, proportion: float, image: int = 224,
        processes: int | None = None) -> float:
    """A CNN data-parallel on one IPU per replica (no pipeline), 8-bit images
    normalised on the IPU (Graphcore's eight_bit_io); `processes`: the PopRun
    instances (default: one per host server)."""
    return pipelined_throughput(
        build, lambda n: (_meta(n, 3, image, image, dtype=torch.uint8), _meta(n, dtype=torch.long)),
        machine=BOW, replicas=replicas, mb=mb, accumulation=accumulation, proportions=(proportion,),
        optimizer="sgd", pipelined=False, processes=processes or pod_processes(replicas))


def resnet(blocks=(3, 4, 6, 3), groups=1, mid_width=None, recompute_blocks=13):
    return lambda: EightBitInput(ResNet50(blocks=blocks, groups=groups, mid_width=mid_width,
                                          recompute_blocks=recompute_blocks))


def _split_text(split, proportions) -> str:
    return (f"{len(split)} IPUs, layers {list(split)}, proportions "
            f"{list(proportions) if len(set(proportions)) > 1 else proportions[0]}")


_BERT_L = (_split_text(BERT_LARGE_SPLIT, BERT_LARGE_PROPORTIONS) + " x 4 replicas, LAMB state off chip with "
           "replicated tensor sharding, recomputation every layer, 16.16")
_BERT_L_PH2 = (_split_text(BERT_LARGE_SPLIT, BERT_LARGE_PH2_PROPORTIONS) + " x 4 replicas, micro-batch 2, LAMB "
               "state off chip with replicated tensor sharding, 16.16 (" + SRC_POPART_BERT
               + " pretrain_large_384.json)")
_BERT_B = (_split_text(BERT_BASE_SPLIT, BERT_BASE_PROPORTIONS) + " (the embeddings alone on IPU 0) x 4 replicas, "
           "LAMB state off chip with replicated tensor sharding, 16.16")


def rows(quick: bool = False) -> list[Row]:
    out = [
        Row("matmul", "Mk2 fp16 matmul 4096^3, fp32 partials, fraction of the FP16.16 peak", 0.32, "of peak",
            SRC_REF, "one 4096^3 product, default (fp32) partials", "the partials type and proportion 0.6",
            lambda: matmul_fraction_of_peak(4096, 2, MK2)),
    ]
    if quick:
        return out + inference_rows(quick=True)
    out += [
        Row("bert-large-ph1-pod16", "BERT-Large Ph1 SL128 pre-training, Bow Pod16", 4528, "seq/s", SRC_PERF,
            "SDK 3.1 TensorFlow2, global batch 65,280; " + _BERT_L + " (" + SRC_HF_BERT_L + ")",
            "micro-batch 8 (accumulation 2,040), 20 masked tokens",
            lambda: bert_pretraining("large", 128, 20, BERT_LARGE_SPLIT, BERT_LARGE_PROPORTIONS, replicas=4, mb=8,
                                     accumulation=2040, state_off_chip=True)),
        Row("bert-large-ph1-pod64", "BERT-Large Ph1 SL128 pre-training, Bow Pod64", 18199, "seq/s", SRC_PERF,
            "SDK 3.0 TensorFlow2, global batch 66,560, 16 replicas; " + _BERT_L,
            "micro-batch 8 (accumulation 520), 20 masked tokens, 4 PopRun instances (one per host server)",
            lambda: bert_pretraining("large", 128, 20, BERT_LARGE_SPLIT, BERT_LARGE_PROPORTIONS, replicas=16, mb=8,
                                     accumulation=520, state_off_chip=True)),
        Row("bert-large-ph2-pod16", "BERT-Large Ph2 SL384 pre-training, Bow Pod16", 1470, "seq/s", SRC_PERF,
            "pre-SDK 2.5 PopART, global batch 16,384 (accumulation 2,048); " + _BERT_L_PH2,
            "56 masked tokens, recomputation every layer",
            lambda: bert_pretraining("large", 384, 56, BERT_LARGE_SPLIT, BERT_LARGE_PH2_PROPORTIONS, replicas=4,
                                     mb=2, accumulation=2048, state_off_chip=True)),
        Row("bert-large-ph2-pod64", "BERT-Large Ph2 SL384 pre-training, Bow Pod64", 5444, "seq/s", SRC_PERF,
            "pre-SDK 2.5 PopART, global batch 16,384, 16 replicas (accumulation 512); " + _BERT_L_PH2,
            "56 masked tokens, recomputation every layer, 4 PopRun instances",
            lambda: bert_pretraining("large", 384, 56, BERT_LARGE_SPLIT, BERT_LARGE_PH2_PROPORTIONS, replicas=16,
                                     mb=2, accumulation=512, state_off_chip=True)),
        Row("bert-large-squad", "BERT-Large SQuAD SL384 fine-tuning, Bow Pod16", 1183, "seq/s", SRC_PERF,
            "SDK 3.1 PopART, global batch 256: " + _split_text(SQUAD_SPLIT, SQUAD_PROPORTIONS) + " x 2 replicas, "
            "micro-batch 4 (accumulation 32), Adam (fp16 state on chip, sharded), 16.16 (" + SRC_POPART_BERT
            + " squad_large_384.json)",
            "recomputation every layer, fp32 Adam state",
            lambda: bert_squad()),
        Row("bert-base-ph1-pod16", "BERT-Base Ph1 SL128 pre-training, Bow Pod16", 16391, "seq/s", SRC_PERF,
            "SDK 3.1 PopART, global batch 65,536: " + _BERT_B + ", micro-batch 32 (accumulation 512) ("
            + SRC_POPART_BERT + " pretrain_base_128.json)",
            "recomputation every layer",
            lambda: bert_pretraining("base", 128, 20, BERT_BASE_SPLIT, BERT_BASE_PROPORTIONS, replicas=4, mb=32,
                                     accumulation=512, state_off_chip=True)),
        Row("bert-base-ph2-pod16", "BERT-Base Ph2 SL512 pre-training, Bow Pod16", 3656, "seq/s", SRC_PERF,
            "SDK 3.1 PopART, global batch 16,384: " + _BERT_B + ", micro-batch 8 (accumulation 512), 76 masked "
            "tokens (" + SRC_POPART_BERT + " pretrain_base_512.json)",
            "recomputation every layer",
            lambda: bert_pretraining("base", 512, 76, BERT_BASE_SPLIT, BERT_BASE_PROPORTIONS, replicas=4, mb=8,
                                     accumulation=512, state_off_chip=True)),
        Row("vit-pretrain-pod16", "ViT-B/16 pre-training, Bow Pod16", 7615, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 65,536: b16_in1k_pretrain_lamb, 4 IPUs x 4 replicas, layers [3, 3, 3, 3], "
            "proportion 0.3, micro-batch 8, accumulation 2,048, LAMB (fp32 state, on chip, sharded), "
            "recomputation every layer, 16.16, 8-bit images, one process (" + SRC_VIT + ", benchmarks.yml)",
            "none (the mid-layer recomputation checkpoints are not placed)",
            lambda: vit(True, replicas=4, mb=8, accumulation=2048)),
        Row("vit-pretrain-pod64", "ViT-B/16 pre-training, Bow Pod64", 27868, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 65,536, 16 replicas, accumulation 512, 8 PopRun instances "
            "(benchmarks.yml); b16_in1k_pretrain_lamb otherwise",
            "none",
            lambda: vit(True, replicas=16, mb=8, accumulation=512, processes=8)),
        Row("vit-finetune-pod16", "ViT-B/16 fine-tuning, Bow Pod16", 7319, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 2,040: b16_imagenet1k, 4 IPUs x 4 replicas, layers [3, 3, 3, 3], "
            "proportion 0.3, micro-batch 17, accumulation 30, SGD with momentum, recomputation, 16.16, fp16 "
            "images (" + SRC_VIT + ")",
            "none", lambda: vit(False, replicas=4, mb=17, accumulation=30)),
        Row("swin-tiny-pod16", "Swin-T pre-training, Bow Pod16", 3779, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 1,024: 4 IPUs x 4 replicas, blocks per IPU [2, 3, 5, 2], micro-batch 4, "
            "accumulation 64, AdamW, proportion 0.15, fp32 model and partials, no recomputation checkpoints, so "
            "PopTorch's pipelined default recomputes each stage from its input (" + SRC_SWIN + ")",
            "fp32 images (the configuration streams fp16 ones into the fp32 model)",
            swin_tiny),
        Row("resnet50-pod16", "ResNet-50 v1.5 training, Bow Pod16", 37061, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 16,384: 16 replicas x 1 IPU, micro-batch 18, accumulation 57, "
            "proportion 0.16, SGD, recomputation checkpoints, 8-bit input, 16.16, 8 PopRun instances ("
            + SRC_CNN + ", benchmarks.yml)",
            "a checkpoint after each block of stages 1-3 (the config names 10 of those 13)",
            lambda: cnn(resnet(), replicas=16, mb=18, accumulation=57, proportion=0.16, processes=8)),
        Row("resnet50-pod64", "ResNet-50 v1.5 training, Bow Pod64", 153205, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 5,120, 64 replicas x 1 IPU",
            "the PyTorch configuration's micro-batch 18 (accumulation 4; the page's batch rounded), "
            "proportion and checkpoints, 4 PopRun instances",
            lambda: cnn(resnet(), replicas=64, mb=18, accumulation=4, proportion=0.16)),
        Row("resnet50-pod256", "ResNet-50 v1.5 training, Bow Pod256", 456906, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 10,240, 256 replicas x 1 IPU (4 POD64s over GW-Links)",
            "micro-batch 20 (accumulation 2), the PyTorch configuration's proportion and checkpoints, "
            "16 PopRun instances",
            lambda: cnn(resnet(), replicas=256, mb=20, accumulation=2, proportion=0.16)),
        Row("resnext101-pod16", "ResNeXt-101 32x4d training, Bow Pod16", 12277, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 768: 8 replicas x 2 IPUs (split after stage 3's fourth unit), "
            "micro-batch 6, accumulation 16, group norm (32 groups), SGD with momentum, recomputation, 8-bit "
            "input, half partials, 16.16, 8 PopRun instances (" + SRC_RESNEXT + ")",
            "proportion 0.6 (Poplar's default: the configuration sets none), the Grouped pipeline schedule as "
            "tilefx's",
            resnext101),
        Row("unet-bow2000", "UNet (medical, 572x572) training, Bow-2000", 151, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow2, batch 24: one replica pipelined over 4 IPUs (stages split after encoder block 1, "
            "the first and the third transposed convolution), micro-batch 1, accumulation 24, proportions "
            "[0.7, 0.3, 0.45, 0.7], SGD with momentum, fp16 with fp16 partials (" + SRC_UNET + ")",
            "fp16 images; each pipeline stage recomputed from its inputs in its backward (the example sets "
            "`allow_recompute = True` in `configure_ipu`, utils.py, and `RecomputationMode.Auto` in its pipelining "
            "options, model_utils.py; costed as PopTorch's default over several IPUs, PopART's Pipeline "
            "recomputation)",
            unet),
        Row("efficientnet-b4-pod16", "G16-EfficientNet-B4 training, Bow Pod16", 9000, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 6,144: 8 replicas x 2 IPUs (split before block4a), micro-batch 3, "
            "accumulation 256, proportion 0.4, LARS, recomputation, 380x380 8-bit images, group convolutions of "
            "16 channels, expansion 4, group norm (4 groups), 16.16, 8 PopRun instances (" + SRC_EFFNET + ")",
            "LARS costed as SGD with momentum, no stochastic depth, the Grouped pipeline schedule as tilefx's",
            lambda: efficientnet_b4("efficientnet-b4-pod16")),
        Row("efficientnet-b4-pod64", "G16-EfficientNet-B4 training, Bow Pod64", 34140, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 6,144: 32 replicas x 2 IPUs, accumulation 64, 32 PopRun instances "
            "(efficientnet_b4_g16_64ipus); the Pod16 row's configuration otherwise",
            "as the Pod16 row",
            lambda: efficientnet_b4("efficientnet-b4-pod64")),
        Row("efficientnet-b4-pod256", "G16-EfficientNet-B4 training, Bow Pod256", 122665, "img/s", SRC_PERF,
            "SDK 3.0 TensorFlow1, global batch 6,144 on 256 IPUs (4 POD64s over GW-Links); the Pod16 row's "
            "configuration otherwise",
            "128 replicas x 2 IPUs, accumulation 16 (the page's batch at micro-batch 3; no Pod256 configuration is "
            "published), one PopRun instance per replica as on the Pod16 and Pod64; as the Pod16 row otherwise",
            lambda: efficientnet_b4("efficientnet-b4-pod256")),
        Row("dino-pod64", "DINO ViT-B/16 self-supervised training, Bow Pod64", 3217, "img/s", SRC_PERF,
            "SDK 3.0 PyTorch, global batch 3,200: 8 replicas x 8 IPUs, layers [1, 2, 2, 2, 2, 2, 1, 0] (the heads' "
            "MLPs on IPU 6, their last layers and the loss on IPU 7), micro-batch 2, accumulation 200, 2 global "
            "(224) and 8 local (96) crops, teacher updated by moving average each step, out_dim 65,536, AdamW "
            "with replicated tensor sharding, proportion 0.15, fp16 ViTs with fp16 partials and fp32 heads, "
            "8 PopRun instances, no recomputation checkpoints, so PopTorch's pipelined default recomputes each "
            "stage (" + SRC_DINO + ")",
            "8-bit crops (the dataset's uint8 tensors, normalised on the IPU); no stochastic depth (rate 0.1), no "
            "gradient clipping; the teacher centre read, not updated, on the IPU (its update is on the host)",
            lambda: dino(**DINO_POD64)),
        Row("schnet-hydronet-pod16", "SchNet training on HydroNet (4.5 M water clusters), Bow Pod16 (molecules/s)",
            93878, "graphs/s", SRC_SCHNET,
            "PopTorch (PyTorch Geometric SchNet at a fixed size): 100 features, 4 interactions, 25 Gaussians, "
            "cutoff 6, 28 nearest neighbours; 16 replicas x 1 IPU, gradient accumulation 32, device iterations 4, "
            "micro-batch 7 packs of at most 154 atoms, Adam, fp32, proportion 0.6 (unset), the fast shifted "
            "softplus, merged all-reduce, async loader, prefetch depth 4 (the ablation's last run)",
            "the Bow (the repository's other measurements are Bow's); packs full (154 / 69.7 molecules each, an "
            "upper bound); 6 molecule slots per pack; one PopRun instance",
            schnet_hydronet),
    ]
    return out + inference_rows()


def swin_base() -> float:
    """Swin-B pre-training on a Bow Pod16 (swin_base_linear.yaml): 2 replicas
    of 8 IPUs, blocks per IPU [2, 2, 3, 3, 5, 5, 2, 2], micro-batch 4,
    accumulation 64, fp32 data and model, PopTorch's recomputation of each
    pipeline stage (as swin_tiny)."""
    return pipelined_throughput(
        lambda: Swin(embed=128, depths=(2, 2, 18, 2), heads=(4, 8, 16, 32), blocks_per_ipu=(2, 2, 3, 3, 5, 5, 2, 2)),
        lambda n: (_meta(n, 3, 224, 224, dtype=torch.float), _meta(n, 1000, dtype=torch.float)),
        machine=BOW, replicas=2, mb=4, accumulation=64, proportions=(0.15,) * 8, optimizer="adamw",
        half=False, half_partials=False)


def held_out() -> list[tuple[str, float, Callable[[], float]]]:
    """Published figures kept out of the table to check changes against
    (docs/machine-validation.md): (what, published, tilefx's prediction),
    each computed as the row of the same model and configuration."""
    rows_ = {r.key: r for r in rows()}
    return [
        ("BERT-Base Ph1 SL128, SDK 3.3 TensorFlow2", 15173, rows_["bert-base-ph1-pod16"].compute),
        ("BERT-Base Ph1 SL128, SDK 3.3 PyTorch", 15911, rows_["bert-base-ph1-pod16"].compute),
        ("BERT-Large Ph1 SL128 Pod16, pre-SDK 2.5 PopART", 5179, rows_["bert-large-ph1-pod16"].compute),
        ("BERT-Large SQuAD SL384, SDK 3.3 PyTorch", 1009, rows_["bert-large-squad"].compute),
        ("ViT-B/16 pre-training Pod64, pre-SDK 2.5 PyTorch", 31200, rows_["vit-pretrain-pod64"].compute),
        ("Swin-B pre-training Pod16, SDK 3.0 PyTorch (32.32)", 1447, swin_base),
        ("ResNeXt-101 Pod16, pre-SDK 2.5 TensorFlow1", 12221, rows_["resnext101-pod16"].compute),
        ("G16-EfficientNet-B4 Pod16, pre-SDK 2.5 TensorFlow1", 8936, rows_["efficientnet-b4-pod16"].compute),
        ("G16-EfficientNet-B4 Pod64, pre-SDK 2.5 TensorFlow1", 34943, rows_["efficientnet-b4-pod64"].compute),
        ("G16-EfficientNet-B4 Pod256, pre-SDK 2.5 TensorFlow1", 117641, rows_["efficientnet-b4-pod256"].compute),
        ("ResNet-50 inference bs32, C600, ByteMLPerf README", 13499, rows_["resnet50-infer-c600-bs32"].compute),
    ]


def layer_cycles_per_token(kind: str) -> dict[str, float]:
    """Cycles per token of each op of one encoder layer trained on one Bow IPU
    (micro-batch 8, fp16 partials, proportion 0.3, LAMB): BERT-Base at SL128
    or ViT-B/16 at 197 tokens (docs/machine-validation.md, the ViT miss)."""
    seq, layer = (128, BertStack(**BERT_BASE)) if kind == "bert" else (197, ViTStack())
    with torch.device("meta"):
        model = layer.half()
    opts = _options(BOW, proportion=0.3).useOfflineIpuTarget(BOW.ipu_version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.LAMB(model.parameters()))
        trainer.compile(_meta(8, seq, BERT_BASE["d"]))
    by_op = trainer.profile.cycles_by_op()
    return {"all ops": sum(by_op.values()) / (8 * seq), **{k: v / (8 * seq) for k, v in by_op.items()}}


# tokens per item and encoder layers on the busiest IPU of the transformer rows
# (their configurations: layers per IPU [3, 7, 7, 7], [0, 4, 4, 4], [3, 3, 3, 3])
_TOKENS_LAYERS = {"bert-base-ph1-pod16": (128, 4), "bert-base-ph2-pod16": (512, 4),
                  "bert-large-ph1-pod16": (128, 7), "bert-large-ph2-pod16": (384, 7),
                  "vit-pretrain-pod16": (197, 3), "vit-finetune-pod16": (197, 3)}
_REPLICAS = 4  # every row of _TOKENS_LAYERS runs 4 replicas on a Pod16


def published_cycles_per_token_layer() -> dict[str, float]:
    """Bow cycles per token and encoder layer on the busiest IPU, from each
    row's published throughput (the pipeline's fill and flush and the weight
    update included): what the hardware spent on a token's pass through one
    layer, forward, recomputation and backward."""
    published = {r.key: r.published for r in rows()}
    return {k: BOW.clock_hz * _REPLICAS / (published[k] * tokens * layers)
            for k, (tokens, layers) in _TOKENS_LAYERS.items()}


def update_split(pod16: float, pod64: float, accumulation16: int = 2048, accumulation64: int = 512,
                 global_batch: int = 65536) -> tuple[float, float]:
    """(seconds per micro-batch step, fixed seconds per weight update) of ViT
    pre-training from its Pod16 and Pod64 throughputs: both runs have the same
    global batch, micro-batch and replica shape and differ in accumulation, so
    update time = fixed + accumulation x step solves for both."""
    t16, t64 = global_batch / pod16, global_batch / pod64
    step = (t16 - t64) / (accumulation16 - accumulation64)
    return step, t16 - accumulation16 * step


def vit_miss_checks(accumulation: int = 64) -> list[tuple[str, float]]:
    """ViT-B/16 pre-training on a Bow Pod16 (images per second) with one
    candidate cause of the miss changed at a time, at a short accumulation
    (the compiles are quicker; the pipeline's fill and flush weigh more than
    in the row, equally in each)."""
    run = functools.partial(vit, True, replicas=4, mb=8, accumulation=accumulation)
    return [("the row's configuration", run()),
            ("no recomputation (autoRecomputation None)", run(recomputation=0)),
            ("no checkpoints (each stage recomputed from its input)", run(recompute=False)),
            ("Graphcore's block: separate q/k/v, dropout, mid-layer checkpoints", run(graphcore_block=True)),
            ("fp32 partials (not the published configuration)", run(half_partials=False))]


def matmul_rows_sensitivity() -> list[tuple[str, float]]:
    """MACs per tile and cycle (over all 1472 tiles) of the feed-forward
    product [M, 768] x [768, 3072] at ViT's M = 8 x 197 and at neighbouring
    multiples of the tile grain, and of the BERT rows' products, on a Bow
    IPU at proportion 0.3 with fp16 partials."""
    shapes = [("ViT, M = 8 x 197 = 1576", 1576, 768, 3072), ("M = 1536", 1536, 768, 3072),
              ("M = 1600", 1600, 768, 3072), ("ViT fine-tuning, M = 17 x 197 = 3349", 3349, 768, 3072),
              ("BERT-Base SL128 x 32, M = 4096", 4096, 768, 3072),
              ("BERT-Large SL384 x 2, M = 768, d = 1024", 768, 1024, 4096)]
    return [(name, m * k * n / plan_matmul(1, m, k, n, 2, BOW, 0.3, partials_itemsize=2).cycles / BOW.tiles)
            for name, m, k, n in shapes]


def vit_miss_profiles() -> None:
    """Op cycles per IPU of the ViT rows (and BERT-Base Ph1's, to compare),
    compiled at accumulation 64 (a micro-batch's op cycles do not depend on
    it), and Swin-T's row."""
    runs = [("ViT-B/16 pre-training", 8 * 197, 3,
             lambda prof: vit_compile(True, replicas=4, mb=8, accumulation=64, profiles=prof)),
            ("ViT-B/16 fine-tuning", 17 * 197, 3,
             lambda prof: vit_compile(False, replicas=4, mb=17, accumulation=30, profiles=prof)),
            ("BERT-Base Ph1 SL128", 32 * 128, 4,
             lambda prof: pipelined_throughput(
                 lambda: BertPretraining(layers=12, seq=128, masked=20, layers_per_ipu=BERT_BASE_SPLIT,
                                         recompute=True, **BERT_BASE),
                 lambda n: (_meta(n, 128, dtype=torch.long), _meta(n, 20, dtype=torch.long)),
                 machine=BOW, replicas=4, mb=32, accumulation=64, proportions=BERT_BASE_PROPORTIONS,
                 optimizer="lamb", state_off_chip=True, sharded_state=True, profiles=prof))]
    classes = {}
    for name, tokens, layers, run in runs:
        prof: list = []
        run(prof)
        classes[name] = (vm.per_token_layer(vm.class_cycles(prof[0], 1), tokens, layers),
                         vm.per_token_layer(vm.step_parts(prof[0], 1), tokens, layers))
        by_ipu = vm.op_cycles_by_ipu(prof[0])
        ipu1 = by_ipu[1]
        parts0 = vm.step_parts(prof[0], 0)
        print(f"{name}: IPU 0's micro-batch step " + ", ".join(f"{k} {v:,}" for k, v in parts0.items())
              + f" cycles (host streams {100 * parts0.get('host streams', 0) / sum(parts0.values()):.1f}%)")
        print(f"{name}: op cycles per micro-batch by IPU "
              + ", ".join(f"{i} {sum(d.values()) / 1e6:.2f} M" for i, d in by_ipu.items())
              + f"; IPU 1 per token and layer {sum(ipu1.values()) / (tokens * layers):.0f}")
        if name.startswith("ViT-B/16 pre"):
            ipu0 = by_ipu[0]
            conv = sum(v for k, v in ipu0.items() if k.startswith("aten.convolution"))
            print(f"  recomputed forward linears / forward linears (IPU 1): "
                  f"{ipu1.get('aten.addmm bwd', 0) / ipu1['aten.addmm fwd']:.2f}; IPU 0: patch convolution "
                  f"{conv / 1e3:.0f} k cycles ({100 * conv / sum(ipu0.values()):.1f}%), layer norm "
                  f"{100 * vm.share(ipu0, 'aten.native_layer_norm', 'aten.native_layer_norm_backward'):.1f}%, GELU "
                  f"{100 * vm.share(ipu0, 'aten.gelu', 'aten.gelu_backward'):.1f}%; IPU 1: attention products "
                  f"{100 * vm.share(ipu1, 'aten.bmm'):.1f}%, softmax "
                  f"{100 * vm.share(ipu1, 'aten._softmax', 'aten._softmax_backward_data'):.1f}%")
    prof = []
    vit_compile(True, replicas=4, mb=8, accumulation=64, graphcore_block=True, profiles=prof)
    classes["Graphcore's block"] = (vm.per_token_layer(vm.class_cycles(prof[0], 1), 8 * 197, 3), {})
    published = published_cycles_per_token_layer()
    names = list(classes)
    print("IPU 1 per token and encoder layer (cycles): " + " | ".join(names))
    for label in [c for c, _ in vm.OP_CLASSES] + [vm.OTHER]:
        print(f"  {label:<34}" + "".join(f" {classes[n][0].get(label, 0.0):>9.1f}" for n in names))
    for label in ("compute", "IPU-Link copies"):
        print(f"  step: {label:<28}" + "".join(f" {classes[n][1].get(label, 0.0):>9.1f}" for n in names[:3]))
    print(f"  {'step, tilefx':<34}" + "".join(f" {sum(classes[n][1].values()):>9.1f}" for n in names[:3]))
    print(f"  {'step, published':<34}" + "".join(
        f" {published[k]:>9.1f}" for k in ("vit-pretrain-pod16", "vit-finetune-pod16", "bert-base-ph1-pod16")))
    swin_profiles()


def swin_profiles() -> None:
    """Swin-T's row with and without PopTorch's recomputation of each pipeline stage."""
    for recomputed in (False, True):
        prof = []
        thr = swin_tiny_compile(None if recomputed else 0, profiles=prof)
        by_ipu = vm.op_cycles_by_ipu(prof[0])
        busiest = max(by_ipu, key=lambda i: sum(by_ipu[i].values()))
        ops = by_ipu[busiest]
        print(f"Swin-T, {'each stage recomputed (the row)' if recomputed else 'nothing recomputed'}: "
              f"{_fmt(thr)} img/s; op cycles per micro-batch by IPU "
              + ", ".join(f"{i} {sum(d.values()) / 1e6:.2f} M" for i, d in by_ipu.items())
              + f"; IPU {busiest}: products {100 * vm.share(ops, 'aten.mm', 'aten.addmm'):.0f}%, window attention "
              f"{100 * vm.share(ops, 'aten.bmm'):.1f}%, shifts and partitions (slices, concatenations, copies) "
              f"{100 * vm.share(ops, 'aten.slice_scatter', 'aten.slice', 'aten.cat', 'aten.clone'):.1f}%; peak "
              f"{100 * max(int(m.peak.max()) for m in prof[0].memory.values()) / BOW.bytes_per_tile:.0f}% of a tile")


def print_vit_miss() -> None:
    rows_ = {r.key: r for r in rows()}
    print("Bow cycles per token and encoder layer on the busiest IPU, from the published figures:")
    for k, c in published_cycles_per_token_layer().items():
        tokens, layers = _TOKENS_LAYERS[k]
        print(f"  {k:<22} {c:>7,.0f}   ({tokens} tokens per item, {layers} layers)")
    pod16, pod64 = rows_["vit-pretrain-pod16"], rows_["vit-pretrain-pod64"]
    for what, a, b in (("published", pod16.published, pod64.published),
                       ("tilefx", pod16.compute(), pod64.compute())):
        step, fixed = update_split(a, b)
        print(f"ViT pre-training, {what} (Pod16 {_fmt(a)}, Pod64 {_fmt(b)} img/s): {1e3 * step:.2f} ms per micro-batch step "
              f"({step * BOW.clock_hz / 1e6:.2f} M Bow cycles), {1e3 * fixed:.0f} ms fixed per weight update")
    print("ViT pre-training on a Bow Pod16, accumulation 64, one candidate changed at a time (img/s):")
    for what, v in vit_miss_checks():
        print(f"  {what:<70} {v:>8,.0f}")
    vit_miss_profiles()
    print("MACs per tile and cycle of a feed-forward product (tilefx's plan, proportion 0.3, fp16 partials):")
    for what, v in matmul_rows_sensitivity():
        print(f"  {what:<45} {v:>6.1f}")


def resnet50_all_reduce_shares() -> dict[int, float]:
    """The ResNet-50 gradient all-reduce (fp16 gradients) as a share of the
    published time of a weight update, per row (replicas: micro-batch,
    accumulation, published images per second)."""
    from tilefx.backend.collectives import all_reduce_cost

    grads = 2 * sum(p.numel() for p in ResNet50().parameters())
    runs = {16: (18, 57, 37061), 64: (18, 4, 153205), 256: (20, 2, 456906)}
    return {n: BOW.seconds(all_reduce_cost(grads, n, 1, BOW).cycles) / (n * mb * acc / published)
            for n, (mb, acc, published) in runs.items()}


def _fmt(value: float) -> str:
    """A throughput to the item, a fraction to three figures."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _step_cycles(throughput: float, replicas: int, mb: int) -> float:
    """Bow cycles per micro-batch step of one replica at `throughput` items per second."""
    return BOW.clock_hz * replicas * mb / throughput


def print_effnet_dino() -> None:
    """The G16-EfficientNet-B4 Pod16 and DINO Pod64 rows' costs (docs/machine-validation.md,
    "G16-EfficientNet-B4 and DINO")."""
    rows_ = {r.key: r for r in rows()}
    for key, compile_, replicas, mb in (
            ("efficientnet-b4-pod16", lambda prof: efficientnet_compile(replicas=8, accumulation=256, profiles=prof),
             8, 3),
            ("dino-pod64", lambda prof: dino_compile(**DINO_POD64, profiles=prof), 8, 2)):
        prof: list = []
        got = compile_(prof)
        p, published = prof[0], rows_[key].published
        print(f"{key}: {_fmt(got)} img/s against {_fmt(published)}; per micro-batch step "
              f"{_step_cycles(got, replicas, mb) / 1e6:.2f} M Bow cycles against "
              f"{_step_cycles(published, replicas, mb) / 1e6:.2f} M published")
        for ipu, ops in vm.op_cycles_by_ipu(p).items():
            total = sum(ops.values())
            mem = p.memory[ipu]
            state = sum(t.nbytes for t in mem.tensors if getattr(t, "kind", None) in
                        ("weight", "accumulator", "optimizer"))
            print(f"  IPU {ipu}: {total / 1e6:.2f} M op cycles; convolutions "
                  f"{100 * vm.share(ops, 'aten.convolution', 'aten.convolution_backward'):.0f}%, products "
                  f"{100 * vm.share(ops, 'aten.mm', 'aten.addmm', 'aten.bmm'):.0f}%, casts "
                  f"{100 * vm.share(ops, 'aten._to_copy'):.0f}%; peak {100 * mem.peak.max() / BOW.bytes_per_tile:.0f}% "
                  f"of a tile, always live {100 * mem.always_live.max() / BOW.bytes_per_tile:.0f}%, of it "
                  f"weights, accumulators and optimizer state {state / 1e6:.0f} MB")
    rates = {m: m * 768 * 3072 / plan_matmul(1, m, 768, 3072, 2, BOW, 0.15, partials_itemsize=2).cycles / BOW.tiles
             for m in (2 * 197, 2 * 8 * 37)}
    print("MACs per tile and cycle of DINO's feed-forward products [M, 768] x [768, 3072] (proportion 0.15, "
          "fp16 partials): " + ", ".join(f"M = {m}: {r:.1f}" for m, r in rates.items()))
    prof = []
    before = dino_compile(**DINO_POD64, build=lambda: Dino(last_inputs_checkpointed=False), profiles=prof)
    last = max(prof[0].memory)
    copies = sum(t.end - t.start for t in prof[0].timeline if t.ipu == last and t.kind == "copy" and t.micro_batch == 0)
    linears = sum(r.name == "aten.addmm" and r.ipu == last for r in prof[0].ops)
    print(f"dino-pod64 without checkpoints on the last IPU's inputs: {_fmt(before)} img/s "
          f"({before / rows_['dino-pod64'].published:.2f}); on IPU {last}: {linears} linears (none with them), "
          f"{copies / 1e6:.1f} M cycles of copies into it per micro-batch")


def main(argv=None):
    # parsed before anything compiles: --help, or a misspelt flag, answers at once
    parser = argparse.ArgumentParser(description="The machine model against published IPU measurements "
                                                 "(docs/machine-validation.md).")
    parser.add_argument("--quick", action="store_true", help="the rows only, the small ones")
    parser.add_argument("--only", action="append", default=[], metavar="KEY", help="this row only (repeatable)")
    parser.add_argument("--vit-miss", action="store_true", help="the checks of the ViT miss")
    parser.add_argument("--effnet-dino", action="store_true",
                        help="the G16-EfficientNet-B4 Pod16 and DINO rows' costs, IPU by IPU")
    parser.add_argument("--plots", nargs="?", const=jia_curves.DEFAULT_DIR, metavar="DIR",
                        help="Jia et al.'s microbenchmark curves against the model: PNGs, CSVs and the "
                             f"table, written to DIR (default {os.path.relpath(jia_curves.DEFAULT_DIR)})")
    args = parser.parse_args(argv)
    quick, only = args.quick, args.only
    if args.plots and os.path.exists(args.plots) and not os.path.isdir(args.plots):
        parser.error(f"--plots: {args.plots} exists and is not a directory")
    if args.plots:
        jia_curves.run(args.plots)
        return
    if args.vit_miss:
        print_vit_miss()
        return
    if args.effnet_dino:
        print_effnet_dino()
        return
    print("Configuration (datasheet constants: they define the machine, not evidence)")
    for c in configuration():
        print(f"  {c.name:<62} {c.value:>10,.4g} {c.compute():>10,.4g} {c.unit}")
    print()
    print(f"Predictions (target +-25%)\n  {'key':<26} {'published':>10} {'tilefx':>10} {'ratio':>6}")
    results = {}
    for r in rows(quick):
        if only and r.key not in only:
            continue
        got = results[r.key] = r.compute()
        ratio = got / r.published
        print(f"  {r.key:<26} {_fmt(r.published):>10} {_fmt(got):>10} {ratio:>6.2f}  "
              f"{'within' if abs(ratio - 1) <= r.band else 'OUTSIDE'}", flush=True)
    if quick or only:
        return
    print("\nTime per micro-batch step of one replica (ms): published, tilefx, the difference, per item")
    published = {r.key: r.published for r in rows()}
    for key, (replicas, mb) in vm.STEP_SHAPES.items():
        p, t = vm.step_times(published[key], results[key], replicas, mb)
        print(f"  {key:<26} {1e3 * p:>6.2f} {1e3 * t:>6.2f} {1e3 * (p - t):>6.2f} {1e6 * (p - t) / mb:>7.0f} us")
    print("\nHeld out (published, not rows: the checks of a change)")
    for what, published, compute in held_out():
        got = compute()
        print(f"  {what:<52} {_fmt(published):>10} {_fmt(got):>10} {got / published:>6.2f}", flush=True)
    print("\nInference: one batch's time = fixed + per item x batch (ms), published and tilefx")
    for model, (pf, pi), (tf, ti) in batch_fits():
        print(f"  {model:<24} published {pf:.3f} + {pi:.4f} x batch, tilefx {tf:.3f} + {ti:.4f} x batch")
    print("SchNet interaction block, Bow cycles (fp32 inference): per edge, and at 32,768 edges (measured / tilefx)")
    for atoms, features, per_edge, t_per_edge, measured, tilefx_ in block_checks():
        print(f"  {atoms} atoms, {features} features: {per_edge:.1f} / {t_per_edge:.1f} per edge, "
              f"{measured:,} / {tilefx_:,} ({measured / tilefx_:.1f}x)")
    print()
    bert, vit_ = layer_cycles_per_token("bert"), layer_cycles_per_token("vit")
    print("cycles per token of one encoder layer (forward and backward): op, BERT-Base SL128, ViT-B/16 197")
    for name in list(bert)[:12]:
        print(f"  {name:<40} {bert[name]:>8.1f} {vit_.get(name, 0.0):>8.1f}")
    print("ResNet-50 all-reduce, share of the published weight-update time: "
          + ", ".join(f"{n} replicas {100 * f:.1f}%" for n, f in resnet50_all_reduce_shares().items()))
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
