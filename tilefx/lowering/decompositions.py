"""Which ATen ops the tracer decomposes: torch's core-ATen table, less the
backward ops the executor runs better whole.

Core ATen decomposes the backward of layer norm, softmax, log-softmax, GELU
and ReLU into chains of 5 to 15 elementwise ops and reductions, for backends
that generate their own fused code. tilefx runs a graph op by op, so each
link is one more pass over memory: torch running the traced encoder's joint
graph took 194 ms decomposed and 156 ms with these five kept whole (eager
training, optimizer included, 154 ms; benchmarks/RESULTS.md, session 5).
The negative log-likelihood (cross-entropy's second half) is kept too
(session 6): decomposed, its forward and backward were ~25 small steps per
training step (masks, gathers, scatters, 0-d constants) where torch eager
runs two kernels, and PopART's graph has one `NllLoss` op.
Each kept op is in the aten dialect with its numpy kernel (IPU float16
semantics) and its ATen kernel (lowering/aten_kernels.py), and keeps its
node's annotations as any traced op does.
"""

from __future__ import annotations

# ATen packets kept whole (every overload of each)
KEPT_WHOLE = ("native_layer_norm_backward", "_softmax_backward_data", "_log_softmax_backward_data",
              "gelu_backward", "threshold_backward", "nll_loss_forward", "nll_loss_backward")


def tracing_decompositions(table: dict) -> dict:
    """`table` (torch's core-ATen decompositions) without the ops kept whole,
    removed in place (`table.pop`), so a table that decides its entries
    lazily is not read whole."""
    import torch

    for name in KEPT_WHOLE:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    return table
