"""The core-ATen ops inside models, against PyTorch on the CPU.

Gradients: each group of ops is one small module whose parameters feed the
ops; one training step with SGD(lr=1) through tilefx (the traced backward
graph) must move every parameter by exactly PyTorch's gradient. Inference:
outputs equal. Plus concrete failures users met (AvgPool2d training,
ReLU6, L1Loss, nn.LSTM, matmul(out=), random ops in a model), dtypes, and the
errors for what the IPU cannot run.
"""

from __future__ import annotations

import copy
import math
import warnings

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
    "adaptive_max_2d": lambda w: F.adaptive_max_pool2d(w, (3, 2)),
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


NORMS = {
    "normalize": lambda w: F.normalize(w, dim=1),
    "vector_norm_1": lambda w: torch.linalg.vector_norm(w, 1, dim=(0, 2), keepdim=True),
    "vector_norm_3": lambda w: torch.linalg.vector_norm(w, 3.0, dim=-1),
    "vector_norm_inf": lambda w: torch.linalg.vector_norm(w, float("inf"), dim=2),
    "norm": lambda w: w.norm(),
}


BEYOND_CORE = {
    "hypot": lambda w: torch.hypot(w, w.flip(-1) + 1),
    "copysign": lambda w: torch.copysign(w, w.flip(-1)),
    "logcumsumexp": lambda w: torch.logcumsumexp(w, 1),
    "kthvalue": lambda w: torch.kthvalue(w, 2, dim=-1).values,
    "median": lambda w: torch.median(w, dim=0).values,
    "nanmedian": lambda w: torch.nanmedian(w),
    "cummin": lambda w: torch.cummin(w, 1).values,
    "lgamma_digamma": lambda w: torch.lgamma(w.abs() + 0.5) + torch.digamma(w.abs() + 0.5),
    "erfinv_erfc": lambda w: torch.erfinv(torch.tanh(w) * 0.9) + torch.erfc(w),
    "bessel": lambda w: torch.special.i0e(w) + torch.special.i1(w) + torch.i0(w),
    "exp2_ldexp": lambda w: torch.exp2(w) + torch.ldexp(w, torch.tensor([1, 2, 3, 0])),
    "searches": lambda w: w * torch.bucketize(w, torch.tensor([-0.5, 0.5])) + w * torch.searchsorted(
        torch.tensor([-1.0, 0.0, 1.0]), w.detach().contiguous()),
}


def test_gradients_beyond_the_core_set():
    _check_gradients(BEYOND_CORE, {k: (3, 4) for k in BEYOND_CORE})


def test_gradients_vector_norms():
    _check_gradients(NORMS, {k: (2, 3, 4) for k in NORMS})


def test_transformer_with_causal_target_mask_trains_like_pytorch():
    """nn.Transformer tests whether a mask is causal by reading its values; the
    trace uses the mask as given (the same numbers)."""

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.t = nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True)
            self.fc = nn.Linear(16, 5)

        def forward(self, src, tgt):
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            return self.fc(self.t(src, tgt, src_mask=None, tgt_mask=mask).mean(1))

    torch.manual_seed(0)
    _train_step_matches(WithLoss(_Pair(Seq2Seq()), nn.CrossEntropyLoss()),
                        torch.randn(4, 6, 16), torch.randint(0, 5, (4,)))


class _Pair(nn.Module):
    """x -> model(x, x[:, :-1]): a source and a shifted target from one input."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x, x[:, :-1])


# ---------------------------------------------------------------------------
# concrete failures users met, each against PyTorch
# ---------------------------------------------------------------------------


class WithLoss(nn.Module):
    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, x, y):
        out = self.model(x)
        return out, self.loss(out, y)


def _train_step_matches(model, x, y, steps=2):
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(steps):
        opt.zero_grad()
        out, loss = ref(x, y)
        loss.backward()
        opt.step()
        our_out, our_loss = trainer(x, y)
        torch.testing.assert_close(our_loss, loss.detach(), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(our_out, out.detach(), rtol=1e-4, atol=1e-5)
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        torch.testing.assert_close(q.detach(), p.detach(), rtol=1e-4, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")


def test_avgpool2d_relu6_l1loss_training():
    """AvgPool2d's backward (divisor_override), ReLU6 (hardtanh + hardtanh_backward),
    L1Loss (sign) in one training step."""
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU6(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(27, 4))
    _train_step_matches(WithLoss(net, nn.L1Loss()), torch.randn(2, 2, 8, 8) * 3, torch.randn(2, 4))


def test_lstm_inference_and_training():
    torch.manual_seed(2)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(4, 5, batch_first=True)
            self.head = nn.Linear(5, 3)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    x = torch.randn(2, 3, 4)
    model = Tagger()
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(tilefx.inferenceModel(copy.deepcopy(model))(x), want, rtol=1e-4, atol=1e-5)
    _train_step_matches(WithLoss(model, nn.MSELoss()), x, torch.randn(2, 3, 3), steps=1)


def test_matmul_out_writes_back_to_the_callers_tensor():
    class OutMatmul(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, a, c):
            torch.matmul(self.fc(a), a, out=c)
            return c * 2

    model = OutMatmul()
    a = torch.randn(3, 3)
    c_ref, c_ours = torch.zeros(3, 3), torch.zeros(3, 3)
    with torch.no_grad():
        want = model(a, c_ref)
    got = tilefx.inferenceModel(model)(a, c_ours)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(c_ours, c_ref, rtol=1e-5, atol=1e-6)


def test_in_place_update_of_an_input():
    class AddInPlace(nn.Module):
        def forward(self, x, acc):
            acc.add_(x * 3)
            return x.relu()

    x, acc = torch.randn(4, 2), torch.ones(4, 2)
    out = tilefx.inferenceModel(AddInPlace())(x, acc)
    torch.testing.assert_close(out, x.relu())
    torch.testing.assert_close(acc, 1 + x * 3)


# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------


class IntMix(nn.Module):
    def forward(self, a, b, m):
        return a + b, (a * 2).to(torch.int16), m & (a > 0), b.to(torch.float32) / 3


def test_small_integer_dtypes():
    a = torch.randint(-5, 5, (4, 3), dtype=torch.int8)
    b = torch.randint(0, 200, (4, 3), dtype=torch.uint8)
    m = torch.rand(4, 3) > 0.5
    got = tilefx.inferenceModel(IntMix())(a, b, m)
    for g, w in zip(got, IntMix()(a, b, m)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def test_bfloat16_is_fp32_rounded_to_bf16():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).bfloat16()
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
    got = tilefx.inferenceModel(model)(x)
    assert got.dtype == torch.bfloat16
    # each op rounds once to bf16 (8 bits of mantissa): a few bf16 ulps apart from torch
    torch.testing.assert_close(got.float(), want.float(), rtol=3e-2, atol=3e-2)
    exact = got.float()
    assert torch.equal(exact, exact.bfloat16().float())  # values are bf16 numbers


def test_bfloat16_scalars_keep_their_shape_and_a_bfloat16_model_trains():
    """A 0-d bfloat16 result stays 0-d (its rounding made it 1-d), and a
    bfloat16 model's loss seed is typed bfloat16 (it was an f32 `full` with a
    bf16 result, which failed the verifier)."""
    class Stats(nn.Module):
        def forward(self, x):
            return x.mean(), x.amax(), x * 2

    x = torch.randn(4, 3).bfloat16()
    for got, want in zip(tilefx.inferenceModel(Stats())(x), Stats()(x)):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)

    class Fit(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            y = self.fc(x)
            return y, y.square().mean()

    torch.manual_seed(0)
    model = Fit().bfloat16()
    ref = copy.deepcopy(model)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    _, loss = trainer(x)
    _, want = ref(x)
    assert loss.shape == () and loss.dtype == torch.bfloat16
    torch.testing.assert_close(loss.float(), want.float(), rtol=2e-2, atol=2e-2)


def test_complex_numbers_are_a_clear_error():
    class Spectrum(nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    with pytest.raises(tilefx.Error, match="complex numbers are not supported"):
        tilefx.inferenceModel(Spectrum())(torch.randn(2, 8))


# ---------------------------------------------------------------------------
# data-dependent shapes and values
# ---------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(x)
        if self.kind == "nonzero":
            return torch.nonzero(h).float()
        if self.kind == "masked_select":
            return torch.masked_select(h, h > 0)
        if self.kind == "unique":
            return torch.unique(h)
        if h.sum().item() > 0:  # .item() in Python control flow
            return h
        return -h


class Encoder(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.layer = nn.ModuleList([nn.Identity(), Block(kind)])

    def forward(self, x):
        return self.layer[1](self.layer[0](x))


@pytest.mark.parametrize("kind, op", [("nonzero", "nonzero"), ("masked_select", "masked_select|nonzero"),
                                      ("unique", "_unique2|unique"), ("item", "_local_scalar_dense")])
def test_data_dependent_ops_are_clear_errors(kind, op):
    with pytest.raises(tilefx.Error) as info:
        tilefx.inferenceModel(Encoder(kind))(torch.randn(2, 3))
    msg = str(info.value)
    assert "data-dependent" in msg and "layer.1 (Block)" in msg, msg
    import re

    assert re.search(rf"aten::({op})", msg), msg
    assert "test_core_ops_models.py:" in msg, msg  # the user's line


def test_unsupported_op_names_the_module_path():
    class Deep(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return torch.geqrf(self.fc(x))[0]  # an op without a kernel (torch.mode has one now)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.ModuleList([Deep()])

        def forward(self, x):
            return self.encoder[0](x)

    with pytest.raises(tilefx.Error, match=r"aten::geqrf.*encoder\.0 \(Deep\)"):
        tilefx.inferenceModel(Outer())(torch.randn(2, 3))


@pytest.mark.parametrize("kernels", ["aten", "numpy"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_bicubic_grid_sample_trains_like_torch(kernels, padding, monkeypatch):
    """mode='bicubic' (was a clear error): the image and the grid both
    trained one SGD step, against eager, on ATen's kernel and on the numpy
    one (ATen's 4 x 4 cubic taps, A = -0.75, padding per tap, the grid's
    gradient holding each tap's value constant), in float64 to 1e-13."""
    if kernels == "numpy":
        monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    else:
        monkeypatch.delenv("TILEFX_KERNELS", raising=False)

    class Warp(nn.Module):
        def __init__(self):
            super().__init__()
            self.image = nn.Parameter(torch.randn(1, 3, 7, 9, dtype=torch.float64))
            self.grid = nn.Parameter(torch.rand(2, 5, 6, 2, dtype=torch.float64) * 2.6 - 1.3)

        def forward(self, y):
            out = nn.functional.grid_sample(self.image.expand(2, -1, -1, -1), self.grid, mode="bicubic",
                                            padding_mode=padding, align_corners=padding == "border")
            return out, ((out - y) ** 2).mean()

    torch.manual_seed(0)
    model = Warp()
    ref = copy.deepcopy(model)
    y = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    torch.testing.assert_close(tilefx.inferenceModel(copy.deepcopy(model).eval())(y)[0], ref(y)[0],
                               rtol=1e-13, atol=1e-13)
    tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0))(y)
    ref(y)[1].backward()
    with torch.no_grad():
        for p in ref.parameters():
            p -= p.grad
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_bicubic_grid_sample_far_outside_the_image(padding, monkeypatch):
    """Grid values far outside [-1, 1] (1e19, -1e30, inf) on the numpy kernel:
    each tap is padded as a float before it becomes an index (an int64 cast
    first wrapped around), as torch pads them."""
    monkeypatch.setenv("TILEFX_KERNELS", "numpy")

    class Warp(nn.Module):
        def forward(self, x, grid):
            return nn.functional.grid_sample(x, grid, mode="bicubic", padding_mode=padding, align_corners=True)

    x = torch.randn(1, 1, 4, 4, dtype=torch.float64)
    far = 1e7 if padding == "reflection" else 1e30  # (ATen casts the reflection count to an int)
    grid = torch.tensor([[[[far, -3.7], [float("inf"), 2.0], [-far, 0.3], [0.5, 5.5]]]], dtype=torch.float64)
    torch.testing.assert_close(tilefx.inferenceModel(Warp())(x, grid), Warp()(x, grid), rtol=1e-13, atol=1e-13,
                               equal_nan=True)


@pytest.mark.parametrize("mode", ["cubic", "linear", "nearest"])
def test_onnx_grid_sample_equals_onnxruntime(mode):
    """ONNX GridSample (opset 20 mode names; cubic is torch's bicubic, A = -0.75)
    through a PopART session, against onnxruntime."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from tilefx import popart

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    grid = (rng.random((2, 5, 6, 2)) * 2.6 - 1.3).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode="border",
                            align_corners=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                            helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
                              [helper.make_empty_tensor_value_info("y")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]).SerializeToString()
    want = ort.InferenceSession(proto).run(["y"], {"x": x, "grid": grid})[0]
    session = popart.InferenceSession(proto, popart.DataFlow(1, ["y"]), popart.DeviceManager().createCpuDevice())
    session.prepareDevice()
    anchors = session.initAnchorArrays()
    session.run(popart.PyStepIO({"x": x, "grid": grid}, anchors))
    np.testing.assert_allclose(anchors["y"], want, rtol=1e-5, atol=1e-5)


def test_one_hot_losses_train_and_out_of_range_classes_are_an_error():
    """F.one_hot's traced graph keeps torch's range checks (`_assert_async`): the
    losses users build on it train as in PyTorch, a bad class fails the call."""

    class OneHot(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x, y):
            out = self.fc(x)
            target = F.one_hot(y, 3).float()
            return out, F.binary_cross_entropy_with_logits(out, target) + F.smooth_l1_loss(out, target)

    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 1])
    _train_step_matches(OneHot(), x, y)
    m = OneHot()
    ex = tilefx.inferenceModel(m)
    ex(x, y)
    with pytest.raises(tilefx.Error, match="one_hot: Class values must be smaller than num_classes"):
        ex(x, torch.tensor([0, 1, 3, 1]))


def test_weight_norm_and_bilinear_layers_train_like_pytorch():
    """nn.utils.parametrizations.weight_norm (its own backward op) and nn.Bilinear (_trilinear)."""

    class Layers(nn.Module):
        def __init__(self):
            super().__init__()
            self.wn = nn.utils.parametrizations.weight_norm(nn.Linear(6, 5))
            self.bil = nn.Bilinear(5, 6, 3)

        def forward(self, x):
            return self.bil(torch.tanh(self.wn(x)), x)

    torch.manual_seed(0)
    _train_step_matches(WithLoss(Layers(), nn.CrossEntropyLoss()), torch.randn(4, 6),
                        torch.tensor([0, 1, 2, 1]))


ALL_ELEMENT_EXTREMES = {
    # ties: torch spreads the gradient of max()/min() evenly among the tied elements
    "max_min": lambda w: w / w.abs().max() + w.min() * w + torch.stack([w.max(), w.min()]).sum(),
    "max_ties": lambda w: torch.cat([w, w]).max() * 3 + torch.round(w * 0).min(),
}


def test_max_min_over_all_elements_train_like_pytorch():
    """x.max() / x.min() with no dim (aten.max.default), ties included."""
    _check_gradients(ALL_ELEMENT_EXTREMES, {k: (3, 4) for k in ALL_ELEMENT_EXTREMES})


class _AllExtremes(nn.Module):
    def forward(self, x, i):
        return x.max(), x.min(), i.max(), i.min(), (x > 0).max(), x.half().max()


def test_max_min_over_all_elements_inference():
    x, i = torch.randn(3, 4), torch.randint(-5, 5, (2, 3))
    want = _AllExtremes()(x, i)
    got = tilefx.inferenceModel(_AllExtremes())(x, i)
    for a, b in zip(got, want):
        assert a.shape == b.shape == () and a.dtype == b.dtype
        torch.testing.assert_close(a, b)


class _MultiLabel(nn.Module):
    def __init__(self, reduction):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 5))
        self.reduction = reduction

    def forward(self, t):
        y = self.w * 2
        return y, F.multilabel_margin_loss(y, t, reduction=self.reduction).sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_stops_at_the_first_minus_one(reduction):
    """Labels after a row's first -1 are ignored (torch's decomposition counted them as class 0)."""
    x = torch.tensor([[0.1, 0.2, 0.4, 0.8]])
    t = torch.tensor([[3, 0, -1, 1]])
    got = tilefx.inferenceModel(_Fn(lambda x, t: F.multilabel_margin_loss(x, t)))(x, t)
    torch.testing.assert_close(got, torch.tensor(0.85))
    targets = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 4, -1, 0], [-1, 1, 2, 3, 4]])
    ref = _MultiLabel(reduction)
    ours = copy.deepcopy(ref)
    want_out, want_loss = ref(targets)
    want_loss.backward()
    got_out, got_loss = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.1))(targets)
    torch.testing.assert_close(got_loss, want_loss.detach())
    torch.testing.assert_close(ours.w.detach(), (ref.w - 0.1 * ref.w.grad).detach())
    inf = tilefx.inferenceModel(_Fn(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction)))
    for x1, t1 in [(want_out.detach(), targets), (want_out.detach()[1], targets[1])]:
        want = F.multilabel_margin_loss(x1, t1, reduction=reduction)
        got = inf(x1, t1) if x1.dim() == 2 else tilefx.inferenceModel(
            _Fn(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction)))(x1, t1)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)


class _Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layer", ["bn2d", "bn1d", "instance2d"])
def test_half_batch_norm_in_eval_runs_like_pytorch(dtype, layer):
    """The eval-mode batch norm of an f16/bf16 model: its empty saved statistics are f16
    from the CPU kernel, f32 from torch's meta rule; the verifier takes both."""
    torch.manual_seed(3)
    mod = {"bn2d": nn.BatchNorm2d(4), "bn1d": nn.BatchNorm1d(4),
           "instance2d": nn.InstanceNorm2d(4, affine=True, track_running_stats=True)}[layer]
    with torch.no_grad():
        mod.running_mean.uniform_(-1, 1)
        mod.running_var.uniform_(0.5, 2)
        mod.weight.uniform_(0.5, 1.5)
        mod.bias.uniform_(-1, 1)
    mod = mod.to(dtype).eval()
    x = (torch.randn(3, 4, 5) if layer == "bn1d" else torch.randn(2, 4, 5, 5)).to(dtype)
    want = mod(x)
    got = tilefx.inferenceModel(copy.deepcopy(mod))(x)
    assert got.dtype == dtype and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2)


class _Bags(nn.Module):
    def __init__(self, mode, weighted):
        super().__init__()
        self.e = nn.EmbeddingBag(6, 3, mode=mode, include_last_offset=True)
        self.weighted = weighted

    def forward(self, i, o):
        psw = torch.linspace(0.5, 1.5, i.numel()) if self.weighted else None
        y = self.e(i, o, per_sample_weights=psw)
        return y, (y * torch.arange(1.0, 4.0)).sum()


@pytest.mark.parametrize("mode, weighted", [("sum", False), ("sum", True), ("mean", False), ("max", False)])
def test_embedding_bag_with_include_last_offset(mode, weighted):
    """The last offset closes the last bag (torch's meta rule sizes the auxiliary results
    one longer than the CPU kernel does; the verifier raised a raw VerifyException)."""
    torch.manual_seed(5)
    i, o = torch.tensor([0, 2, 4, 2, 1, 5]), torch.tensor([0, 2, 3, 6])
    ref = _Bags(mode, weighted)
    want_inf = ref(i, o)[0]
    got_inf = tilefx.inferenceModel(copy.deepcopy(ref))(i, o)[0]
    torch.testing.assert_close(got_inf, want_inf.detach())
    ours = copy.deepcopy(ref)
    _, want_loss = ref(i, o)
    want_loss.backward()
    _, got_loss = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.1))(i, o)
    torch.testing.assert_close(got_loss, want_loss.detach())
    torch.testing.assert_close(ours.e.weight.detach(), (ref.e.weight - 0.1 * ref.e.weight.grad).detach())


MORE_OPS = {
    "round_decimals": lambda w: torch.round(w * 30, decimals=-1) + torch.round(w, decimals=2) + w,
    "dist": lambda w: torch.dist(w, w.flip(0) * 0.5) + torch.dist(w, w.flip(1), 1)
    + torch.dist(w, w * 0.3, float("inf")),
    "addbmm": lambda w: torch.addbmm(w[:, :3], w.reshape(2, 3, 2), w.reshape(2, 2, 3)[:, :, :3], beta=0.5,
                                     alpha=2.0),
    "fmax_fmin": lambda w: torch.fmax(w, torch.where(torch.tensor([True, False, True, True]), w.flip(1), torch.nan))
    + torch.fmin(torch.where(torch.tensor([False, True, True, True]), w.flip(0), torch.nan), w),
    "xlogy_scalar": lambda w: torch.xlogy(2.0, w.abs() + 0.1) + torch.special.xlogy(w, 3.0),
    "cummax": lambda w: torch.cummax(w, 1).values + torch.cummax(w, 0).values,
    "replicate_pad1d": lambda w: F.pad(w[None], (2, 1), mode="replicate")[0] * torch.arange(7.0),
    "rrelu_eval": lambda w: F.rrelu(w, 0.1, 0.3, training=False),
    "index_reduce": lambda w: torch.ones(3, 4).index_reduce(0, torch.tensor([0, 2, 2]), w, "prod")
    + torch.zeros(3, 4).index_reduce(0, torch.tensor([1, 1, 0]), w, "amax", include_self=False)
    + torch.zeros(3, 4).index_reduce(1, torch.tensor([3, 0, 3, 1]), w, "mean"),
}


ANTIALIAS = {
    f"{mode}_{i}": (lambda w, mode=mode, kw=kw: F.interpolate(w, mode=mode, antialias=True, **kw))
    for mode in ("bilinear", "bicubic")
    for i, kw in enumerate([{"size": (2, 3)}, {"size": (5, 9)}, {"size": (3, 2), "align_corners": True},
                            {"scale_factor": (0.4, 0.6)}])
}


def test_antialiased_interpolation_like_pytorch():
    """F.interpolate(antialias=True), bilinear and bicubic, down- and upsampling."""
    _check_gradients(ANTIALIAS, {k: (2, 3, 6, 7) for k in ANTIALIAS})


def test_gradients_of_more_ops():
    """Ops beyond the core set: torch's decompositions or ours, or new kernels."""
    _check_gradients(MORE_OPS, {k: (3, 4) for k in MORE_OPS})


def test_integer_and_index_ops():
    def fn(x, a):
        return (x[tuple(torch.triu_indices(3, 4, 1))], x[tuple(torch.tril_indices(3, 4, -1))],
                torch.triu_indices(4, 3), a << 2, a >> 1, a >> 70, torch.lcm(a, torch.tensor([4, 6, 0])),
                torch.fmax(a, torch.tensor([0, 9, -9])), torch.round(x, decimals=1), torch.cummax(x, 1).indices,
                torch.cummin(a, 0))
    x, a = torch.randn(3, 4), torch.tensor([[1, -8, 3], [4, 6, 0]])
    want = fn(x, a)
    got = tilefx.inferenceModel(_Fn(fn))(x, a)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w)


def test_angle_of_real_numbers_and_the_deprecated_scatter_reduce():
    """angle of real (and integer) tensors, NaN and the infinities included,
    with ATen's zero gradient; scatter(reduce="add" | "multiply") with a tensor
    and a number (deprecated in torch, still in models)."""
    def fn(x, i, n):
        return (torch.angle(x), torch.angle(i),
                torch.zeros(3, 4).scatter(1, n, x[:3, :2] + 2, reduce="add"),
                torch.ones(3, 4).scatter(0, n[:, :1].clamp(max=2), 2.5, reduce="multiply"),
                torch.ones(3, 4).scatter(1, n, x[:3, :2], reduce="multiply"))

    x = torch.tensor([[1.0, -2.0, float("nan"), 0.0], [-0.0, float("inf"), -float("inf"), -1e-30],
                      [3.0, -3.0, 2.0, 1.0]])
    i, n = torch.tensor([1, -2, 0]), torch.tensor([[0, 0], [3, 1], [2, 2]])
    with warnings.catch_warnings():  # torch's deprecation of reduce= (once a process)
        warnings.simplefilter("ignore")
        want = fn(x, i, n)
    got = tilefx.inferenceModel(_Fn(fn))(x, i, n)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)

    class Angle(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1.0, -2.0, 0.5, -0.25]))

        def forward(self, x):
            y = torch.angle(self.w * x) + self.w
            return y, y.sum()

    m = Angle()
    _, loss = tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=1.0))(torch.ones(4))
    torch.testing.assert_close(loss, torch.tensor(2 * math.pi - 0.75))
    torch.testing.assert_close(m.w.detach(), torch.tensor([0.0, -3.0, -0.5, -1.25]))  # angle adds no gradient


class _RReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(-torch.ones(4000))
        self.a = nn.RReLU(0.1, 0.3)

    def forward(self, x):
        y = self.a(self.w * x)
        return y, y.sum()


def test_rrelu_in_training_draws_slopes_and_its_gradient_uses_them():
    """nn.RReLU in training: each negative element's slope ~ U(lower, upper), the same
    slope in the output and the gradient (eval mode is in test_gradients_of_more_ops)."""
    m = _RReLU()
    y, loss = tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=1.0))(torch.ones(4000))
    slopes = -(m.w.detach() + 1)  # w was -1; its gradient is the slope
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.01
    assert slopes.std() > 0.04  # U(0.1, 0.3): std 0.058
    torch.testing.assert_close(loss, -slopes.sum(), rtol=1e-5, atol=1e-3)
