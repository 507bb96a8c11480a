"""The `tilefx::` torch ops the frontends place for the IPU's own ops
(`ipu.identity_loss`, `ipu.nop`, `ipu.set_available_memory`,
`ipu.serialized_matmul`, `ipu.print_tensor` in the graph IR): each a `torch.library.custom_op`
with a fake and an autograd implementation, so it stays one node through
tracing and decomposition; on the CPU (outside tracing) it computes what
the IPU would. Defined below the API layer, as the ONNX frontend and
PopART's sessions place them too; PopTorch's helper ops (api/ops.py) are
the user's way to them."""

from __future__ import annotations

import functools
import operator

import torch

from tilefx.dialects.ipu import PRINT_GRADIENT_TITLE_SUFFIX


@torch.library.custom_op("tilefx::identity_loss", mutates_args=())
def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        return x.sum()
    if reduction == "mean":
        return x.mean()
    return x.clone()


@identity_loss.register_fake
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


identity_loss.register_autograd(_identity_loss_backward, setup_context=_identity_loss_setup)


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


nop = _make_identity("nop", "poptorch.nop", "str")
set_available_memory = _make_identity("set_available_memory", "poptorch.set_available_memory", "float")


@torch.library.custom_op("tilefx::serialized_matmul", mutates_args=())
def serialized_matmul(lhs: torch.Tensor, rhs: torch.Tensor, mode: str, factor: int,
                       keep_precision: bool) -> torch.Tensor:
    return torch.matmul(lhs, rhs)


@serialized_matmul.register_fake
def _(lhs, rhs, mode, factor, keep_precision):
    return torch.empty(torch.matmul(torch.empty(lhs.shape, device="meta"),
                                    torch.empty(rhs.shape, device="meta")).shape, dtype=lhs.dtype)


def _smm_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.mode, ctx.factor = inputs[2], inputs[3]


def _smm_backward(ctx, grad):
    """The backward serialized like the forward (PopTorch user guide, 4.6.8 "poptorch.serializedMatMul"):
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


serialized_matmul.register_autograd(_smm_backward, setup_context=_smm_setup)


@torch.library.custom_op(
    "tilefx::print_tensor", mutates_args=(),
    schema="(Tensor x, str title, bool print_gradient, int summarise_threshold, int edge_items, "
           "int max_line_width, int digits, str float_format, str separator, str open_bracket, "
           "str close_bracket) -> Tensor")
def print_tensor(x, title, print_gradient, *fmt):
    return x.clone()


@print_tensor.register_fake
def _(x, title, print_gradient, *fmt):
    return torch.empty_like(x)


def _print_setup(ctx, inputs, output):
    ctx.title, ctx.print_gradient, ctx.fmt = inputs[1], inputs[2], inputs[3:]


def _print_backward(ctx, grad):
    """The gradient passes through; with print_gradient it is printed too
    (titled `<title>_gradient`, as PopART titles the print in the backward;
    untitled, the frontend titles both prints with the tensor's id)."""
    if ctx.print_gradient:
        title = ctx.title + PRINT_GRADIENT_TITLE_SUFFIX if ctx.title else ""
        grad = print_tensor(grad, title, False, *ctx.fmt)
    return (grad,) + (None,) * (2 + len(ctx.fmt))


print_tensor.register_autograd(_print_backward, setup_context=_print_setup)
