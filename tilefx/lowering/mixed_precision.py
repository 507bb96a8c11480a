"""float16 inputs meeting float32: the type promotion of ops with mixed inputs.

PopTorch user guide, 4.7 "16-bit float support": "When PyTorch encounters a
mix of float16 and float32 inputs for a given operation, it will usually cast
all inputs to float32, and PopTorch complies with this convention." A float16
input therefore keeps its dtype as it enters the graph: an op that takes it as
is (elementwise ops promote by themselves, norms take float32 weights with a
float16 input and return float16) runs as in eager PyTorch, and only the ops
whose kernels take operands of one dtype, which eager PyTorch refuses with
mixed ones, get that convention spelled out: their float16 operands are cast
to float32 (their float32 ones to float16 where the float16 operands decide
the result type, as PyTorch's promotion lets dimensioned tensors decide before
zero-dimensional ones). The casts up are marked (`UPCAST_INPUT_META_KEY`) so
that with `HalfFloatCastingBehavior.FloatDowncastToHalf` the `ipu-autocast`
pass turns them back into float16 copies and float16 wins instead.
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from tilefx.dialects.names import UPCAST_INPUT_META_KEY

# The torch functions (by name) whose CPU kernels take float operands of one
# dtype only: the matrix products and convolutions (PopTorch's autocast fp16
# list) and the other ops eager PyTorch refuses with float16 meeting float32
# (index_put, prelu, lerp, attention). The rest of PopTorch's autocast
# promote list (cat, stack, addcmul, ...) promotes by itself. nn.LSTM/GRU/RNN
# check their input's dtype in Python first and refuse it, as in eager.
SAME_DTYPE_FUNCTIONS = frozenset({
    "linear", "bilinear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "addbmm", "baddbmm",
    "mv", "addmv", "addr", "dot", "vdot", "inner", "chain_matmul", "tensordot", "einsum",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
    "convolution", "index_put", "prelu", "lerp", "scaled_dot_product_attention",
})
_MIXED = {torch.float16, torch.float32}


def _target(floats: list[torch.Tensor]) -> torch.dtype | None:
    """The dtype PyTorch's promotion gives float16 and float32 tensors, or
    None when they do not mix exactly these two."""
    if {t.dtype for t in floats} != _MIXED:
        return None
    ranked = {t.dtype for t in floats if t.dim()} or {t.dtype for t in floats}
    return torch.float32 if torch.float32 in ranked else torch.float16


class PromoteMixedHalf(torch.overrides.TorchFunctionMode):
    """While tracing a call with float16 inputs: a same-dtype op meeting float16
    and float32 runs in their promoted type (module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in SAME_DTYPE_FUNCTIONS and "out" not in kwargs:
            leaves = pytree.tree_leaves((args, kwargs))
            floats = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]
            to = _target(floats)
            if to is not None:
                args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: _cast(t, to), (args, kwargs))
        return func(*args, **kwargs)


def _cast(t: torch.Tensor, to: torch.dtype) -> torch.Tensor:
    if t.dtype not in _MIXED or t.dtype == to:
        return t
    if to != torch.float32:
        return t.to(to)
    custom = torch.fx.traceback.current_meta.setdefault("custom", {})
    had = UPCAST_INPUT_META_KEY in custom
    custom[UPCAST_INPUT_META_KEY] = True  # ipu-autocast may undo it (FloatDowncastToHalf)
    try:
        return t.to(to)
    finally:
        if not had:
            custom.pop(UPCAST_INPUT_META_KEY, None)
