"""PopTorch helper ops (`poptorch.identity_loss`, `serializedMatMul`, ...).

Each is a `torch.library.custom_op` in the `tilefx` namespace with a fake
and an autograd implementation, so it stays one node through tracing and
decomposition and the frontend turns it into the matching `ipu.*` op. On
the CPU (outside tracing) they compute what the IPU would.
"""

from __future__ import annotations

import functools
import operator

import torch

from tilefx.api.enums import MatMulSerializationMode
from tilefx.errors import Error
from tilefx.lowering.tracing_state import Tracing

_REDUCTIONS = ("sum", "mean", "none")


@torch.library.custom_op("tilefx::identity_loss", mutates_args=())
def _identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        return x.sum()
    if reduction == "mean":
        return x.mean()
    return x.clone()


@_identity_loss.register_fake
def _(x, reduction):
    return x.new_empty(()) if reduction in ("sum", "mean") else torch.empty_like(x)


def _identity_loss_backward(ctx, grad):
    if ctx.reduction == "none":
        return grad, None
    g = grad.expand(ctx.shape)
    if ctx.reduction == "mean":
        g = g / ctx.numel
    return g, None


def _identity_loss_setup(ctx, inputs, output):
    x, reduction = inputs
    ctx.reduction, ctx.shape, ctx.numel = reduction, x.shape, x.numel()


_identity_loss.register_autograd(_identity_loss_backward, setup_context=_identity_loss_setup)


def identity_loss(x: torch.Tensor, reduction: str = "none") -> torch.Tensor:
    """Mark `x` as the loss; backward sends ones through it (seeds/000 4.6.3)."""
    if reduction not in _REDUCTIONS:
        raise Error(f"identity_loss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return _identity_loss(x, reduction)


def _make_identity(name: str, doc: str, extra: str):
    """An identity custom op with a string or float attribute (nop, print, memory)."""
    def impl(x, attr):
        return x.clone()

    op = torch.library.custom_op(f"tilefx::{name}", impl, mutates_args=(),
                                 schema=f"(Tensor x, {extra} attr) -> Tensor")

    @op.register_fake
    def _(x, attr):
        return torch.empty_like(x)

    op.register_autograd(lambda ctx, grad: (grad, None))
    op.__doc__ = doc
    return op


_nop = _make_identity("nop", "poptorch.nop", "str")
_print_tensor = _make_identity("print_tensor", "poptorch.ipu_print_tensor", "str")
_set_available_memory = _make_identity("set_available_memory", "poptorch.set_available_memory", "float")


def nop(x: torch.Tensor) -> torch.Tensor:
    """An identity the compiler keeps, for debugging (seeds/000 4.6.5)."""
    return _nop(x, "")


def ipu_print_tensor(x: torch.Tensor, title: str = "") -> torch.Tensor:
    """Print `x` when the program runs; use the result (seeds/000 4.6.2)."""
    return _print_tensor(x, title)


def set_available_memory(x: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    """Bound the temporary memory of the op that produced `x` (seeds/000 4.6.9)."""
    p = float(available_memory_proportion)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"set_available_memory: proportion must be in (0, 1], got {p}")
    return _set_available_memory(x, p)


_SERIAL_MODE_NAMES = {
    MatMulSerializationMode.InputChannels: "input_channels",
    MatMulSerializationMode.ReducingDim: "reducing_dim",
    MatMulSerializationMode.OutputChannels: "output_channels",
}


@torch.library.custom_op("tilefx::serialized_matmul", mutates_args=())
def _serialized_matmul(lhs: torch.Tensor, rhs: torch.Tensor, mode: str, factor: int,
                       keep_precision: bool) -> torch.Tensor:
    return torch.matmul(lhs, rhs)


@_serialized_matmul.register_fake
def _(lhs, rhs, mode, factor, keep_precision):
    return torch.empty(torch.matmul(torch.empty(lhs.shape, device="meta"),
                                    torch.empty(rhs.shape, device="meta")).shape, dtype=lhs.dtype)


def _smm_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.mode, ctx.factor = inputs[2], inputs[3]


def _smm_backward(ctx, grad):
    """The backward serialized like the forward (REFERENCE.md section 4):
    InputChannels sums the weight gradient over the m-slices, OutputChannels
    sums the input gradient over the n-slices, ReducingDim concatenates the
    input gradient over the k-slices."""
    lhs, rhs = ctx.saved_tensors
    f = ctx.factor
    a = lhs.reshape(-1, lhs.shape[-1])  # [M, K]
    g = grad.reshape(-1, grad.shape[-1])  # [M, N]
    if ctx.mode == "input_channels":
        g_lhs = torch.matmul(grad, rhs.t())
        g_rhs = functools.reduce(operator.add, [ai.t() @ gi for ai, gi in zip(a.chunk(f, 0), g.chunk(f, 0))])
    elif ctx.mode == "output_channels":
        g_lhs = functools.reduce(operator.add, [gi @ ri.t() for gi, ri in zip(g.chunk(f, 1), rhs.chunk(f, 1))]
                                 ).reshape(lhs.shape)
        g_rhs = a.t() @ g
    else:  # reducing_dim
        g_lhs = torch.cat([g @ ri.t() for ri in rhs.chunk(f, 0)], dim=1).reshape(lhs.shape)
        g_rhs = a.t() @ g
    return g_lhs, g_rhs, None, None, None


_serialized_matmul.register_autograd(_smm_backward, setup_context=_smm_setup)


def serializedMatMul(lhs, rhs, mode, factor=0, keep_precision=False):
    """A matmul split into `factor` serial pieces to save memory (seeds/000 4.6.8)."""
    if mode == MatMulSerializationMode.Disabled or factor in (0, 1):
        return torch.matmul(lhs, rhs)
    if mode not in _SERIAL_MODE_NAMES:
        raise Error(f"serializedMatMul: unknown mode {mode!r}")
    if rhs.dim() != 2:
        raise Error(f"serializedMatMul: rhs must be 2-D, got shape {tuple(rhs.shape)}")
    name = _SERIAL_MODE_NAMES[mode]
    dim = {"input_channels": lhs.shape[-2], "reducing_dim": lhs.shape[-1],
           "output_channels": rhs.shape[-1]}[name]
    if dim % factor:
        raise Error(f"serializedMatMul: factor {factor} does not divide the {name} dimension {dim}")
    return _serialized_matmul(lhs, rhs, name, int(factor), bool(keep_precision))


def isRunningOnIpu() -> bool:
    """True while tilefx traces the model for the (simulated) IPU."""
    return Tracing.on
