"""The `tilefx::recomputation_checkpoint` torch op (`ipu.recomputation_checkpoint`
in the graph IR): identity in value and gradient; the `ipu-recompute` pass keeps
its result and recomputes the forward ops between checkpoints in the backward.

Defined here, below the API layer, so the tracer can place it too (at the
inputs of a `torch.utils.checkpoint` region, see `joint_trace`);
`tilefx.recomputationCheckpoint` is the user's way to it."""

from __future__ import annotations

import torch


@torch.library.custom_op("tilefx::recomputation_checkpoint", mutates_args=())
def recomputation_checkpoint(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@recomputation_checkpoint.register_fake
def _(x):
    return torch.empty_like(x)


recomputation_checkpoint.register_autograd(lambda ctx, grad: grad)
