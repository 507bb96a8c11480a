"""Where ViT-B/16's time goes (docs/machine-validation.md, "The ViT miss"):
what the training rows' profiles and published figures say, as pure
functions over compiled profiles and throughputs. `machine_validation.py`
compiles the rows and prints these (`--vit-miss`, and the step times in
the full command).

- `step_times`: each training row's time per micro-batch step of one
  replica, published and tilefx's, from the throughputs. A cost missing
  once per step (a host sync, a stream's latency) misses the same time at
  every micro-batch; a cost missing per image or token grows with it.
- `class_cycles` and `step_parts`: an IPU's op cycles by op class and its
  micro-batch step by kind (compute, IPU-Link copies, host streams), per
  token and encoder layer, to set a ViT row against a BERT row."""

from __future__ import annotations

from collections import defaultdict

from tilefx.backend.machine import Machine

# (replicas, micro-batch) of each training row whose throughput counts the
# items of its micro-batches, as its configuration gives them
# (machine_validation.rows; SchNet's micro-batch is packs, its item molecules)
STEP_SHAPES = {
    "bert-large-ph1-pod16": (4, 8), "bert-large-ph1-pod64": (16, 8),
    "bert-large-ph2-pod16": (4, 2), "bert-large-ph2-pod64": (16, 2), "bert-large-squad": (2, 4),
    "bert-base-ph1-pod16": (4, 32), "bert-base-ph2-pod16": (4, 8),
    "vit-pretrain-pod16": (4, 8), "vit-pretrain-pod64": (16, 8), "vit-finetune-pod16": (4, 17),
    "swin-tiny-pod16": (4, 4), "resnet50-pod16": (16, 18), "resnet50-pod64": (64, 18),
    "resnet50-pod256": (256, 20), "resnext101-pod16": (8, 6), "unet-bow2000": (1, 1),
    "efficientnet-b4-pod16": (8, 3), "efficientnet-b4-pod64": (32, 3), "efficientnet-b4-pod256": (128, 3),
    "dino-pod64": (8, 2),
}


def step_times(published: float, computed: float, replicas: int, mb: int) -> tuple[float, float]:
    """(published, tilefx) seconds per micro-batch step of one replica: the
    replicas' micro-batches over each throughput (items per second). The
    pipeline's fill and flush and the weight update are spread over the
    steps, as in both throughputs."""
    return replicas * mb / published, replicas * mb / computed


def op_cycles_by_ipu(profile) -> dict[int, dict[str, int]]:
    """Each IPU's op cycles of one micro-batch by op and direction ("aten.addmm bwd": the
    recomputed forward linears are placed with the backward)."""
    out: dict[int, dict[str, int]] = {}
    for r in profile.ops:
        d = out.setdefault(r.ipu, {})
        d[f"{r.name} {r.direction}"] = d.get(f"{r.name} {r.direction}", 0) + r.cost.cycles
    return dict(sorted(out.items()))


def share(ops: dict[str, int], *names: str) -> float:
    return sum(v for k, v in ops.items() if k.split()[0] in names) / sum(ops.values())


# op classes of a transformer layer's profile, by op name (first match wins)
OP_CLASSES = (
    ("linear products", ("aten.mm", "aten.addmm")),
    ("attention products", ("aten.bmm",)),
    ("softmax", ("aten._softmax", "aten._softmax_backward_data")),
    ("layer norm", ("aten.native_layer_norm", "aten.native_layer_norm_backward")),
    ("GELU", ("aten.gelu", "aten.gelu_backward")),
    ("dropout", ("aten.native_dropout", "aten.native_dropout_backward")),
    ("copies, concatenations, casts", ("aten.clone", "aten.cat", "aten._to_copy", "aten.slice",
                                       "aten.slice_scatter", "aten.copy")),
    ("accumulation and optimizer", ("ipu.",)),
)
OTHER = "other elementwise and sums"


def op_class(name: str) -> str:
    for label, names in OP_CLASSES:
        if any(name == n or (n.endswith(".") and name.startswith(n)) for n in names):
            return label
    return OTHER


def class_cycles(profile, ipu: int) -> dict[str, int]:
    """One micro-batch's op cycles on `ipu` by op class (forward, the
    recomputed forward and backward together)."""
    out: dict[str, int] = defaultdict(int)
    for r in profile.ops:
        if r.ipu == ipu:
            out[op_class(r.name)] += r.cost.cycles
    return dict(out)


def step_parts(profile, ipu: int) -> dict[str, int]:
    """The cycles of one micro-batch's steps on `ipu` in the middle of a
    weight update, by kind: compute (its ops, with their exchanges and
    syncs), IPU-Link copies to the next IPU, host streams."""
    mbs = sorted({s.micro_batch for s in profile.timeline if s.micro_batch >= 0})
    mb = mbs[len(mbs) // 2]
    out: dict[str, int] = defaultdict(int)
    for s in profile.timeline:
        if s.ipu == ipu and s.micro_batch == mb:
            out[{"compute": "compute", "copy": "IPU-Link copies", "host": "host streams"}.get(s.kind, s.kind)] \
                += s.end - s.start
    return dict(out)


def per_token_layer(cycles: dict[str, int], tokens: int, layers: int) -> dict[str, float]:
    return {k: v / (tokens * layers) for k, v in cycles.items()}


def published_step_cycles(published: float, replicas: int, mb: int, machine: Machine) -> float:
    """Cycles per micro-batch step of one replica at the published throughput."""
    return machine.clock_hz * step_times(published, published, replicas, mb)[0]
