"""What would make a program that overflows a tile fit, ranked by the memory plan.

A tile's peak (backend/profile.py) is the sum of its shares of the always-live
tensors (weights, buffers, gradient accumulators, optimizer state), of the
activations live at the peak, the temporaries of the op running then and the
code. Each remedy frees one of those parts, so the plan says how many bytes
each would free on the tile that overflowed and whether that alone would make
it fit: the advice lists those first, then the rest by the bytes they free.
The remedies are PopTorch's (user guide 4.4 "Multi-IPU execution strategies",
4.7 "Optimizing tensor locations", 5.1 serializedMatMul / set_available_memory).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Remedy:
    what: str  # the option or helper to use, as the user writes it
    frees: int  # bytes per tile it frees on the overflowing tile (an upper bound)
    fits: bool  # whether that alone brings the tile under its capacity


def _parts(mem, tile: int) -> dict[str, int]:
    """The overflowing tile's bytes by what holds them."""
    parts: dict[str, int] = defaultdict(int)
    for t, nbytes in mem.largest_on_tile(tile, n=len(mem.tensors)):
        parts[t.kind] += nbytes
    parts["temporary"] = int(mem.temp_bytes)
    return parts


def remedies(mem, tile: int, capacity: int) -> list[Remedy]:
    """The remedies for `mem` (an IpuMemory) overflowing `tile`, best first."""
    need = int(mem.peak[tile])
    over = need - capacity
    parts = _parts(mem, tile)
    weights = [nb for t, nb in mem.largest_on_tile(tile, n=len(mem.tensors)) if t.kind == "weight"]
    out = []

    def add(what: str, frees: int) -> None:
        if frees > 0:
            out.append(Remedy(what, frees, frees >= over))

    # optimizer state and accumulators are read once per weight update: off chip
    # or sharded over the replicas they leave the tile between updates
    add("optimizer state off chip or sharded over replicas: opts.TensorLocations."
        "setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False)) "
        "(or .useReplicatedTensorSharding(True) with replicas)", parts["optimizer"])
    add("gradient accumulators off chip: opts.TensorLocations.setAccumulatorLocation("
        "poptorch.TensorLocationSettings().useOnChipStorage(False))", parts["accumulator"])
    # a weight off chip is loaded while its ops run: the largest one stays on chip then
    add("weights off chip or sharded over replicas: opts.TensorLocations.setWeightLocation("
        "poptorch.TensorLocationSettings().useOnChipStorage(False)) (or "
        ".useReplicatedTensorSharding(True) with replicas)",
        sum(weights) - max(weights, default=0))
    add("smaller matmul/convolution temporaries: poptorch.serializedMatMul(...) on the largest "
        "products, or a lower opts.setAvailableMemoryProportion(...)", parts["temporary"])
    add("recompute activations in the backward pass instead of keeping them: "
        "poptorch.recomputationCheckpoint(...) in the forward pass",
        parts["activation"] + parts["stash"])
    # more IPUs split the model's layers (Block(ipu_id=...), PipelinedExecution or
    # ShardedExecution): everything but one tensor and the code divides among them
    movable = sum(v for k, v in parts.items() if k != "temporary")
    largest = max((nb for _, nb in mem.largest_on_tile(tile, n=1)), default=0)
    fixed = need - movable + largest
    if movable > largest and capacity > fixed:
        ipus = max(2, math.ceil((movable - largest) / (capacity - fixed)))
        add(f"more IPUs: split the model over {ipus} or more with poptorch.Block(ipu_id=...) "
            "and PipelinedExecution / ShardedExecution", (movable - largest) * (ipus - 1) // ipus)
    return sorted(out, key=lambda r: (not r.fits, -r.frees))


def advice(mem, tile: int, capacity: int) -> str:
    """The remedies as one sentence for the out-of-memory error."""
    ranked = remedies(mem, tile, capacity)
    top = mem.largest_on_tile(tile, n=1)
    alone = ""
    if top and top[0][1] >= capacity:  # spread over every tile it can use, it still does not fit
        t, share = top[0]
        alone = (f"{t.name} alone needs {share:,} B on that tile, more than a tile holds: no "
                 f"location or strategy keeps it whole on one IPU; split it into smaller "
                 f"tensors (e.g. two layers) placed on different IPUs with poptorch.Block(ipu_id=...)")
    if not ranked:
        return alone or "Use more IPUs or a smaller model"
    if alone:
        alone += ". "
    elif not any(r.fits for r in ranked):
        alone = "No one change fits alone; combine them. "
    items = []
    for i, r in enumerate(ranked, 1):
        verdict = "would fit" if r.fits else "not enough alone"
        items.append(f"({i}) {r.what}: frees up to {r.frees:,} B on that tile, {verdict}")
    return alone + "What would help, by the memory plan: " + "; ".join(items)
