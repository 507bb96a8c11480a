"""The core-ATen ops inside models, against PyTorch on the CPU.

Gradients: each group of ops is one small module whose parameters feed the
ops; one training step with SGD(lr=1) through tilefx (the traced backward
graph) must move every parameter by exactly PyTorch's gradient. Inference:
outputs equal. Plus the concrete failures of issue 9 (AvgPool2d training,
ReLU6, L1Loss, nn.LSTM, matmul(out=), random ops in a model), dtypes, and the
errors for what the IPU cannot run.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tilefx
import tilefx.api.ops  # noqa: F401 - registers torch.ops.tilefx.*

torch.manual_seed(0)


def test_index_with_slices():
    """x[:, idx], x[idx, :, idx2], index_put with slices (MobileViT's crash)."""
    def idx():
        return torch.tensor([2, 0, 2])

    def put(w):
        y = torch.zeros(3, 4, 2)
        y[:, idx()[:2] - 1] = w[:, :2] * 2
        return y

    ops = {
        "middle": lambda w: w[:, idx()],
        "last": lambda w: w[:, :, idx()[:2] - 1],
        "split": lambda w: w[idx(), :, idx() - 1],
        "put": put,
        "put_acc": lambda w: torch.zeros(3, 4, 2).index_add(1, idx(), w[:, :3] * 2),
    }
    _check_gradients(ops, {k: (3, 4, 2) for k in ops})


class OpGroup(nn.Module):
    """sum_i <c_i, op_i(w_i)>: one parameter per op, fixed random weights c_i."""

    def __init__(self, ops: dict, shapes: dict):
        super().__init__()
        self.ops = ops
        self.w = nn.ParameterDict({k: nn.Parameter(torch.randn(*shapes[k])) for k in ops})
        with torch.no_grad():
            for i, (k, fn) in enumerate(ops.items()):  # a fixed random weighting of each output
                out = fn(self.w[k])
                g = torch.Generator().manual_seed(i)
                self.register_buffer(f"probe_{k}", torch.randn(out.shape, generator=g, dtype=out.dtype))

    def forward(self, scale):
        total = scale.sum() * 0
        for k, fn in self.ops.items():
            total = total + (fn(self.w[k] * scale) * getattr(self, f"probe_{k}")).sum()
        return total


def _check_gradients(ops: dict, shapes: dict, rtol=1e-4, atol=1e-5):
    ref = OpGroup(ops, shapes)
    scale = torch.ones(1)
    ours = copy.deepcopy(ref)
    loss = ref(scale)
    loss.backward()
    trainer = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(ours.parameters(), lr=1.0))
    our_loss = trainer(scale)
    torch.testing.assert_close(our_loss, loss.detach(), rtol=rtol, atol=atol)
    for k in ops:
        want = ref.w[k].detach() - ref.w[k].grad
        torch.testing.assert_close(ours.w[k].detach(), want, rtol=rtol, atol=atol,
                                   msg=lambda m, k=k: f"gradient of {k}: {m}")


def _inside(lo, hi):
    return lambda w: torch.tanh(w) * (hi - lo) / 2 + (hi + lo) / 2


UNARY = {
    "acos": lambda w: torch.acos(torch.tanh(w) * 0.9),
    "asin": lambda w: torch.asin(torch.tanh(w) * 0.9),
    "atanh": lambda w: torch.atanh(torch.tanh(w) * 0.9),
    "acosh": lambda w: torch.acosh(w * w + 1.5),
    "asinh": torch.asinh, "atan": torch.atan, "cosh": torch.cosh, "sinh": torch.sinh,
    "tan": lambda w: torch.tan(torch.tanh(w)), "expm1": torch.expm1,
    "log10": lambda w: torch.log10(w * w + 0.5), "log1p": lambda w: torch.log1p(w * w),
    "log2": lambda w: torch.log2(w * w + 0.5),
    "sign_round": lambda w: w * torch.sign(w) + torch.round(w) + torch.floor(w) + torch.ceil(w)
    + torch.trunc(w),
    "relu6": F.relu6, "hardtanh": lambda w: F.hardtanh(w, -0.5, 0.7), "elu": F.elu, "selu": F.selu,
    "celu": lambda w: F.celu(w, 0.7),
    "atan2": lambda w: torch.atan2(w[0], w[1]),
    "fmod": lambda w: torch.fmod(w[0] * 3, w[1].abs() + 0.5),
    "remainder": lambda w: torch.remainder(w[0] * 3, w[1].abs() + 0.5),
    "div_floor": lambda w: torch.div(w[0] * 3, w[1].abs() + 0.5, rounding_mode="floor") * w[0],
    "clamp_t": lambda w: torch.clamp(w[0], min=w[1] - 0.2, max=w[1] + 0.2),
    "pow_s": lambda w: torch.pow(2.0, w),
    "masked_fill": lambda w: w.masked_fill(w > 0.5, -1.0),
}
SHAPES_UNARY = {k: (2, 3, 4) if k in ("atan2", "fmod", "remainder", "div_floor", "clamp_t") else (3, 4)
                for k in UNARY}


def test_gradients_pointwise():
    _check_gradients(UNARY, SHAPES_UNARY)


REDUCE = {
    "prod": lambda w: torch.prod(w, dim=1) + torch.prod(w[0]),
    "var": lambda w: torch.var(w, dim=1) + torch.var(w, unbiased=False),
    "cumsum": lambda w: torch.cumsum(w, dim=1),
    "max_dim": lambda w: torch.max(w, dim=1).values + torch.min(w, dim=0).values.sum(),
    "argminmax": lambda w: w.flatten().gather(0, torch.argmin(w).reshape(1))
    * w.flatten().gather(0, torch.argmax(w).reshape(1)),
    "sort": lambda w: torch.sort(w, dim=1, descending=True).values,
    "topk": lambda w: torch.topk(w, 2, dim=1).values,
    "scatter_reduce": lambda w: torch.zeros(3, 3).scatter_reduce(
        1, torch.tensor([[0, 1, 0, 2], [2, 2, 1, 0], [1, 1, 1, 1]]), w, "sum"),
    "scatter_amax": lambda w: torch.zeros(3, 3).scatter_reduce(
        1, torch.tensor([[0, 1, 0, 2], [2, 2, 1, 0], [1, 1, 1, 1]]), w, "amax", include_self=False),
    "index_select": lambda w: torch.index_select(w, 1, torch.tensor([3, 0, 3])),
    "masked_scatter": lambda w: torch.zeros(3, 4).masked_scatter(
        torch.tensor([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]], dtype=torch.bool), w),
    "diagonal": lambda w: torch.diagonal(w, 1) * 2,
    "select_scatter": lambda w: torch.select_scatter(w, w[0] * 3, 0, 2),
    "flip": lambda w: torch.flip(w, [0, 1]),
    "repeat": lambda w: w.repeat(2, 1, 2),
    "as_strided": lambda w: torch.as_strided(w, (2, 3), (4, 1), 1),
    "unfold_like": lambda w: w.unfold(1, 2, 1),
    "pdist": lambda w: F.pdist(w),
    "cdist": lambda w: torch.cdist(w, w[:2] * 0.5 + 0.1),
    "embedding_bag": lambda w: F.embedding_bag(torch.tensor([0, 2, 1, 2]), w, torch.tensor([0, 1]),
                                               mode="mean"),
}


def test_gradients_reductions_and_indexing():
    _check_gradients(REDUCE, {k: (3, 4) for k in REDUCE})


SPATIAL = {
    "reflection_pad1d": lambda w: F.pad(w[0], (2, 1), mode="reflect"),
    "reflection_pad2d": lambda w: F.pad(w, (1, 2, 2, 1), mode="reflect"),
    "replication_pad2d": lambda w: F.pad(w, (1, 2, 0, 1), mode="replicate"),
    "circular_pad": lambda w: F.pad(w, (1, 1, 1, 1), mode="circular"),
    "upsample_nearest": lambda w: F.interpolate(w, scale_factor=2, mode="nearest"),
    "upsample_bilinear": lambda w: F.interpolate(w, size=(7, 9), mode="bilinear", align_corners=False),
    "upsample_bilinear_ac": lambda w: F.interpolate(w, size=(7, 9), mode="bilinear", align_corners=True),
    "grid_sample": lambda w: F.grid_sample(w, torch.sin(torch.arange(48.0)).reshape(2, 3, 4, 2) * 0.95,
                                           align_corners=False),
    "adaptive_avg_2d": lambda w: F.adaptive_avg_pool2d(w, (2, 3)),
    "adaptive_avg_1d": lambda w: F.adaptive_avg_pool1d(w[0], 3),
    "avg_pool1d": lambda w: F.avg_pool1d(w[0], 3, 2, 1),
    "fold": lambda w: F.fold(w.reshape(2, 12, 10)[:, :, :4], (3, 3), (2, 2)),
    "group_norm": lambda w: F.group_norm(w, 3, torch.linspace(0.5, 1.5, 6), torch.linspace(-1, 1, 6)),
}


def test_gradients_spatial():
    _check_gradients(SPATIAL, {k: (2, 6, 4, 5) for k in SPATIAL})


VOLUME = {
    "avg_pool3d": lambda w: F.avg_pool3d(w, 2),
    "max_pool3d": lambda w: F.max_pool3d(w, 2, 1),
    "adaptive_avg_3d": lambda w: F.adaptive_avg_pool3d(w, (2, 1, 3)),
    "reflection_pad3d": lambda w: F.pad(w, (1, 1, 1, 0, 0, 1), mode="reflect"),
    "replication_pad3d": lambda w: F.pad(w, (1, 0, 1, 1, 0, 1), mode="replicate"),
}


def test_gradients_volumes():
    _check_gradients(VOLUME, {k: (2, 2, 3, 4, 4) for k in VOLUME})
