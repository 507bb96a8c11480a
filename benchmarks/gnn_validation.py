"""SchNet's message passing against Graphcore's measurements of it on a Bow
IPU (docs/machine-validation.md, "SchNet"): graphcore-research/hydronet-gnn
timed one PyTorch Geometric SchNet interaction block (fp32 inference, 50
Gaussians, filters as wide as the features, the shifted softplus written as
its FastShiftedSoftplus) 128 times in a device loop, over a grid of atoms,
features and edges, and recorded the Bow cycles per block
(experiments/bow/schnet_block.csv, hydronet/mpbench.py). tilefx compiles
the same block at the same sizes (compile-only, the offline Bow target)."""

from __future__ import annotations

import torch

from inference_validation import inference_throughput
from tilefx.backend.machine import BOW
from validation_common import meta
from validation_models import SchNetInteraction

# (atoms, features, edges) -> Bow cycles per interaction block (schnet_block.csv)
SCHNET_BLOCK_BOW = {
    (1024, 64, 32): 124679, (1024, 64, 32768): 290540,
    (1024, 128, 32): 132884, (1024, 128, 32768): 392980,
    (4096, 128, 32): 156876, (4096, 128, 32768): 471939,
    (4096, 512, 32): 412002, (4096, 512, 32768): 1709226,
}
GAUSSIANS = 50  # mpbench.py's InteractionBlockOp


def block_op_cycles(atoms: int, features: int, edges: int) -> int:
    """tilefx's op cycles of one SchNet interaction block (fp32 inference on a Bow IPU)."""
    profiles: list = []
    inference_throughput(
        lambda: SchNetInteraction(features, GAUSSIANS),
        lambda n: (meta(atoms, features, dtype=torch.float), meta(edges, dtype=torch.long),
                   meta(edges, dtype=torch.long), meta(edges, dtype=torch.float),
                   meta(edges, GAUSSIANS, dtype=torch.float)),
        machine=BOW, batch=1, device_iterations=1, half=False, profiles=profiles)
    return sum(profiles[0].cycles_by_op().values())


def block_checks() -> list[tuple[int, int, float, float, int, int]]:
    """Per (atoms, features): the cycles each edge adds (from 32 to 32,768
    edges), measured and tilefx's, and the cycles of the 32,768-edge block,
    measured and tilefx's ops: (atoms, features, measured per edge, tilefx
    per edge, measured, tilefx)."""
    out = []
    for atoms, features in sorted({(a, f) for a, f, _ in SCHNET_BLOCK_BOW}):
        lo, hi = SCHNET_BLOCK_BOW[atoms, features, 32], SCHNET_BLOCK_BOW[atoms, features, 32768]
        t_lo, t_hi = block_op_cycles(atoms, features, 32), block_op_cycles(atoms, features, 32768)
        out.append((atoms, features, (hi - lo) / (32768 - 32), (t_hi - t_lo) / (32768 - 32), hi, t_hi))
    return out
