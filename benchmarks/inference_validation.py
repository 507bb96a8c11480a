"""Inference rows of the machine-model validation (docs/machine-validation.md):
published inference throughputs of whole models on one IPU, each computed by
compiling the published model whole (compile-only: the model on the meta
device, an offline target) in its published configuration.

The figures are the IPU backend's of ByteDance's ByteMLPerf inference
benchmark (github.com/bytedance/ByteMLPerf, byte_mlperf/backends/IPU, a
backend Graphcore wrote): one C600 card, models converted to fp16 and
compiled by Graphcore's PopRT, each run as its
backends/IPU/interact_infos/<model>.json configures it, the throughput
(QPS) and latency per batch size in byte_mlperf/reports/IPU/<model>/. The
benchmark's QPS is clients x batch x iterations / wall time, `clients`
host threads each sending one batch after the other
(backends/IPU/engine_poprt.py), so the device is kept busy: the figure is
the device's steady throughput at that batch.

PopRT's compile options as ByteMLPerf's IPU backend sets them
(backends/IPU/compile_backend_ipu.py): fp16 partials unless a model says
otherwise, the available memory proportion 0.6 unless a model says
otherwise, `batches_per_step` batches per device call (PopTorch's device
iterations), and I/O tiles where a model asks for them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

import tilefx
from tilefx.backend.machine import C600, Machine
from validation_common import Row, meta, options, past_the_memory_check
from validation_models import ClipTextEncoder, Logits, ResNet50, Swin

SRC_BYTEMLPERF = ("ByteMLPerf IPU backend (bytedance/ByteMLPerf byte_mlperf/reports/IPU/{model}/{report}, "
                  "backends/IPU/interact_infos/{model}.json, model_zoo/{model}.json)")
# PopRT's defaults in ByteMLPerf's IPU backend (compile_backend_ipu.py)
POPRT_PROPORTION = 0.6
BATCHES_PER_STEP = 128  # every configuration below sets batches_per_step 128


def inference_throughput(build: Callable[[], torch.nn.Module], inputs: Callable[[int], tuple], *,
                         machine: Machine, batch: int, proportion: float = POPRT_PROPORTION,
                         device_iterations: int = BATCHES_PER_STEP, half: bool = True,
                         profiles: list | None = None) -> float:
    """Items per second of a whole model's inference compiled compile-only
    (the model on the meta device, an offline target of `machine`):
    `device_iterations` batches of `batch` per call, fp16 with fp16 partials
    (`half`, else fp32), IPU 0's memory proportion; the profile's cycles per
    call include each batch's host streams over the machine's host link.
    `profiles`: a list the compile's profile is appended to. The memory
    check is the caller's."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = build().eval()
        model = model.half() if half else model
    opts = options(machine, half_partials=half, proportion=proportion)
    opts.useOfflineIpuTarget(machine.ipu_version)
    opts.deviceIterations(device_iterations)
    with past_the_memory_check():
        runner = tilefx.inferenceModel(model, opts)
        runner.compile(*inputs(batch * device_iterations))
    if profiles is not None:
        profiles.append(runner.profile)
    return batch * device_iterations / machine.seconds(runner.profile.total_cycles)


def _images(size: int) -> Callable[[int], tuple]:
    return lambda n: (meta(n, 3, size, size),)


@functools.cache
def resnet50(batch: int) -> float:
    """ResNet-50 v1.5 (the model zoo's torchvision ResNet-50, 224x224) on a C600."""
    return inference_throughput(ResNet50, _images(224), machine=C600, batch=batch)


@functools.cache
def clip_text(batch: int) -> float:
    """Stable Diffusion v1's CLIP text encoder (77 tokens) on a C600, at the
    proportion its configuration sets (0.8)."""
    return inference_throughput(ClipTextEncoder, lambda n: (meta(n, 77, dtype=torch.int32),), machine=C600,
                                batch=batch, proportion=0.8)


# Swin-L at 384x384 (the model zoo's swin-transformer-large, 1000 classes): embedding 192,
# depths 2-2-18-2, heads 6-12-24-48, window 12 (Liu et al. 2021, Table 1 and section 4.1)
SWIN_LARGE_384 = dict(embed=192, depths=(2, 2, 18, 2), heads=(6, 12, 24, 48), window=12, image=384)


@functools.cache
def swin_large(batch: int) -> float:
    """Swin-L at 384x384 on a C600, at the proportion its configuration sets (0.2)."""
    return inference_throughput(lambda: Logits(Swin(**SWIN_LARGE_384)), _images(384), machine=C600, batch=batch,
                                proportion=0.2)


_C600 = "one C600 card (one IPU), PopRT fp16 with fp16 partials, {bps} batches per step, {how}"
_HOST = ("fp16 inputs (the converter's fp16 model); each batch's input stream before its compute over the "
         "card's PCIe Gen4 x16 link (tilefx has no I/O tiles{io})")


# the inference row `--quick` and the tests compute (one compile of ~10 s)
QUICK_ROW = "resnet50-infer-c600-bs4"


def inference_rows(quick: bool = False) -> list[Row]:
    """The inference prediction rows (docs/machine-validation.md); `quick`: QUICK_ROW only."""
    resnet = dict(model="resnet50-torch-fp32", report="result-fp16.json")
    clip = dict(model="clip-onnx-fp32", report="result.json")
    swin = dict(model="swin-large-torch-fp32", report="result.json")
    resnet_how = "proportion 0.6 (PopRT's default), 64 I/O tiles, 4 clients"
    clip_how = "proportion 0.8, 32 I/O tiles, 3 clients"
    out = [
        Row("resnet50-infer-c600-bs4", "ResNet-50 v1.5 inference, batch 4, C600 (img/s)", 7062, "img/s",
            SRC_BYTEMLPERF.format(**resnet),
            "224x224 images, batch 4, " + _C600.format(bps=BATCHES_PER_STEP, how=resnet_how),
            _HOST.format(io=": PopRT's 64 overlap it with compute") + "; batch norm as its inference scale and "
            "shift (the ONNX export folds it into the convolutions)",
            lambda: resnet50(4)),
        Row("resnet50-infer-c600-bs32", "ResNet-50 v1.5 inference, batch 32, C600 (img/s)", 13542, "img/s",
            SRC_BYTEMLPERF.format(**resnet),
            "224x224 images, batch 32, " + _C600.format(bps=BATCHES_PER_STEP, how=resnet_how),
            "as the batch-4 row", lambda: resnet50(32)),
        Row("clip-text-infer-c600-bs4", "CLIP ViT-L/14 text encoder (Stable Diffusion v1) inference, batch 4, C600 "
            "(seq/s)", 2674, "seq/s", SRC_BYTEMLPERF.format(**clip),
            "77 int32 tokens, outputs the last hidden states and the pooled state, batch 4, "
            + _C600.format(bps=BATCHES_PER_STEP, how=clip_how),
            "the encoder is Stable Diffusion v1's (the suite's UNet takes [77, 768] hidden states: CLIP ViT-L/14's "
            "text encoder); " + _HOST.format(io=": PopRT's 32 overlap it"), lambda: clip_text(4)),
        Row("clip-text-infer-c600-bs40", "CLIP ViT-L/14 text encoder (Stable Diffusion v1) inference, batch 40, "
            "C600 (seq/s)", 7305, "seq/s", SRC_BYTEMLPERF.format(**clip),
            "batch 40; the batch-4 row's configuration otherwise", "as the batch-4 row", lambda: clip_text(40)),
        Row("swin-large-infer-c600-bs2", "Swin-L (384x384, window 12) inference, batch 2, C600 (img/s)", 315, "img/s",
            SRC_BYTEMLPERF.format(**swin),
            "384x384 images, batch 2, " + _C600.format(bps=BATCHES_PER_STEP, how="proportion 0.2, 4 clients"),
            "fp16 inputs; the cyclic shift written as slices and concatenations (the model's torch.roll)",
            lambda: swin_large(2)),
    ]
    return [r for r in out if r.key == QUICK_ROW] if quick else out


def batch_fits() -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    """For each model with rows at two batch sizes, the time of one batch as
    fixed + per item x batch (milliseconds), from the published throughputs
    and from tilefx's: (model, published (fixed, per item), tilefx's)."""
    by_model: dict[str, list[Row]] = {}
    for r in inference_rows():
        by_model.setdefault(r.key.rsplit("-bs", 1)[0], []).append(r)
    out = []
    for model, rows_ in by_model.items():
        if len(rows_) != 2:
            continue
        (b1, r1), (b2, r2) = sorted((int(r.key.rsplit("-bs", 1)[1]), r) for r in rows_)
        fits = []
        for t1, t2 in ((b1 / r1.published, b2 / r2.published), (b1 / r1.compute(), b2 / r2.compute())):
            per_item = (t2 - t1) / (b2 - b1)
            fits.append((1e3 * (t1 - b1 * per_item), 1e3 * per_item))
        out.append((model, fits[0], fits[1]))
    return out
