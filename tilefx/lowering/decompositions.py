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
    # F.multilabel_margin_loss: torch registers its (wrong after a -1) decomposition both in
    # the table and as the op's Python Autograd kernel, which the traced call reaches first
    # (the tracer runs with the Python dispatcher); both become the corrected one
    op = torch.ops.aten.multilabel_margin_loss_forward.default
    table[op] = multilabel_margin_loss_forward
    if op.py_kernels.get(torch._C.DispatchKey.Autograd) is not multilabel_margin_loss_forward:
        op.py_kernels[torch._C.DispatchKey.Autograd] = multilabel_margin_loss_forward
        op._dispatch_cache.clear()
    return table


def multilabel_margin_loss_forward(input, target, reduction: int):
    """torch's decomposition (torch/_decomp/decompositions.py), with the terminator
    honoured: the labels of a row stop at its first -1. torch's own masks only
    `is_target` and still adds the margin terms of the positions after the -1
    (as if they named class 0), so F.multilabel_margin_loss([[.1,.2,.4,.8]],
    [[3,0,-1,1]]) came out 2.05 where ATen's kernel gives 0.85."""
    import torch

    orig_target_shape = target.shape
    input = torch.atleast_2d(input)
    target = torch.atleast_2d(target)
    dim = input.shape[1]
    idx = torch.arange(dim, device=target.device)
    end_idx = torch.amin(torch.where(target == -1, idx, dim), dim=-1, keepdim=True)
    target_mask = idx < end_idx  # [batch, j]: label j of the row counts
    u = torch.gather(input, dim=-1, index=torch.where(target_mask, target, 0))
    tidx1 = torch.where(target_mask, target, -1)
    is_target = torch.any(idx == tidx1.unsqueeze(dim=-1), dim=1)
    z = (1.0 - u.T.unsqueeze(dim=-1) + input).clamp_min(0) / dim  # [j, batch, i]
    z = torch.where(is_target | ~target_mask.T.unsqueeze(-1), 0, z)
    if reduction == 1:  # mean
        z = z.sum(dim=(0, -1)).mean()
    elif reduction == 2:  # sum
        z = z.sum()
    else:
        z = z.sum(dim=(0, -1))
        if len(orig_target_shape) < 2:
            z = z.reshape(())  # an unbatched row: a 0-d loss, as ATen's kernel
    return z, is_target.to(input.dtype).reshape(orig_target_shape)
