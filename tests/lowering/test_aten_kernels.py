"""ATen's own kernels in the executor (lowering/aten_kernels.py,
lowering/aten_optimizers.py) and the backward ops the tracer keeps whole
(lowering/decompositions.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend import emitter
from tilefx.lowering import aten_kernels
from tilefx.lowering.decompositions import KEPT_WHOLE
from models import WithLoss


class Net(nn.Module):
    """A small attention block: its products, norm, softmax and activations take ATen's kernels."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)
        self.ln = nn.LayerNorm(64)
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, tok):
        h = self.ln(self.emb(tok))
        a = torch.softmax(h @ h.transpose(1, 2) / 8.0, dim=-1) @ h
        return self.fc2(nn.functional.gelu(self.fc1(a)).relu()).mean(dim=1)


def _data():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 100, (8, 32), generator=g), torch.randint(0, 10, (8,), generator=g)


def _train(kernels: str, monkeypatch, optimizer, steps=3):
    monkeypatch.setenv(aten_kernels.KERNELS_ENV, kernels)
    torch.manual_seed(0)
    model = WithLoss(Net(), nn.CrossEntropyLoss())
    tok, y = _data()
    ex = tilefx.trainingModel(model, optimizer=optimizer(model.parameters()))
    losses = [float(ex(tok, y)[1]) for _ in range(steps)]
    ex.copyWeightsToHost()
    ex.destroy()
    return model, losses


@pytest.mark.parametrize("make_opt", [
    lambda p: tilefx.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
    lambda p: tilefx.optim.AdamW(p, lr=1e-2, weight_decay=0.01),
], ids=["sgd", "adamw"])
def test_aten_and_numpy_kernels_agree_with_torch(make_opt, monkeypatch):
    """Both kernel sets train the model as PyTorch does; each against torch eager."""
    torch.manual_seed(0)
    ref = WithLoss(Net(), nn.CrossEntropyLoss())
    tok, y = _data()
    torch_opt = {"SGD": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
                 "AdamW": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.01)}
    opt = torch_opt[type(make_opt(ref.parameters())).__name__](ref.parameters())
    ref_losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = ref(tok, y)[1]
        ref_losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
    for kernels in ("aten", "numpy"):
        model, losses = _train(kernels, monkeypatch, make_opt)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_large_ops_run_on_aten_small_and_half_on_numpy(monkeypatch):
    """Which kernel each op gets: ATen for full-precision ops, numpy for small
    one-flop ops, float16, random ops and views, and numpy for all with
    TILEFX_KERNELS=numpy."""
    seen: dict[str, bool] = {}
    orig = emitter.provided_kernel

    def spy(op):
        k = orig(op)
        seen[op.name] = seen.get(op.name, False) or k is not None
        return k

    monkeypatch.setattr(emitter, "provided_kernel", spy)
    tok, _ = _data()
    tilefx.inferenceModel(Net().eval())(tok)
    assert any(seen.get(f"aten.{p}") for p in ("mm", "bmm", "addmm")), seen
    assert seen["aten.native_layer_norm"] and seen["aten.gelu"]
    # the attention's softmax is never offered alone: its group runs as ATen's
    # fused attention kernel (analysis/attention.py)
    assert "aten._softmax" not in seen
    assert not seen.get("aten.view")  # views are numpy views, never offered to ATen

    seen.clear()
    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.log_softmax(self.fc(x), -1) * x

    tilefx.inferenceModel(Small())(torch.randn(2, 4))
    # every op but one-flop arithmetic on ATen at any size; a 2x4 mul on numpy
    assert seen["aten.addmm"] and seen["aten._log_softmax"] and not seen["aten.mul.Tensor"], seen

    seen.clear()
    tilefx.inferenceModel(copy.deepcopy(Net()).half().eval())(tok)
    assert not any(seen.values())  # float16: the IPU's fp32-partials kernels

    seen.clear()
    monkeypatch.setenv(aten_kernels.KERNELS_ENV, "numpy")
    tilefx.inferenceModel(Net().eval())(tok)
    assert seen and not any(seen.values())


def _torch_step(kind, w, g, states, step, fused=None, **hp):
    """One torch.optim step from the given weight, gradient and state."""
    p = torch.nn.Parameter(torch.from_numpy(w.copy()))
    p.grad = torch.from_numpy(g.copy())
    if kind in ("adam", "adamw"):
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        opt = cls([p], lr=hp["lr"], weight_decay=hp["weight_decay"], foreach=False if not fused else None,
                  fused=fused)
        opt.state[p] = {"step": torch.tensor(float(step - 1)), "exp_avg": torch.from_numpy(states[0].copy()),
                        "exp_avg_sq": torch.from_numpy(states[1].copy())}
    else:
        opt = torch.optim.SGD([p], lr=hp["lr"], momentum=hp.get("momentum", 0.9),
                              dampening=hp.get("dampening", 0.0), nesterov=hp.get("nesterov", False),
                              weight_decay=hp["weight_decay"], foreach=False)
        if step > 1 and hp.get("momentum", 0.9):
            opt.state[p] = {"momentum_buffer": torch.from_numpy(states[0].copy())}
    opt.step()
    st = opt.state[p]
    if kind in ("adam", "adamw"):
        return [p.detach().numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy()]
    return [p.detach().numpy()] + ([st["momentum_buffer"].numpy()] if hp.get("momentum", 0.9) else [])


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("step", [1, 5])
@pytest.mark.parametrize("decoupled", [True, False])
def test_adam_is_torch_fused_adam_bit_for_bit(step, inplace, decoupled):
    """ipu.adam on float32 is torch's fused Adam / AdamW (`fused=True`) exactly,
    in place or not, and torch's default single-tensor update up to a few
    units in the last place (the same formula, rounded differently)."""
    kern = aten_kernels._optimizers()  # make(torch, as_tensor), as the executor gets it
    rng = np.random.default_rng(0)
    w, g = rng.standard_normal((2, 5000)).astype(np.float32)
    m, v = rng.standard_normal(5000).astype(np.float32), rng.random(5000).astype(np.float32)
    lr = np.float32(1e-2)
    kind = "adamw" if decoupled else "adam"
    got = kern["ipu.adam"](w.copy(), g, m.copy(), v.copy(), np.float32(step), lr, None, None, None,
                           None, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=decoupled,
                           bias_correction=True, grad_scale=1.0, inplace=inplace)
    fused = _torch_step(kind, w, g, [m, v], step, fused=True, lr=float(lr), weight_decay=0.01)
    single = _torch_step(kind, w, g, [m, v], step, lr=float(lr), weight_decay=0.01)
    for a, b, c in zip(got, fused, single):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("step", [1, 5])
@pytest.mark.parametrize("variant", [dict(), dict(nesterov=True), dict(dampening=0.3),
                                     dict(momentum=0.0), dict(weight_decay=0.0)])
def test_sgd_is_torch_optim_sgd_bit_for_bit(step, inplace, variant):
    """ipu.sgd on float32 (torch's fused kernel) equals torch.optim.SGD's
    default single-tensor update exactly, in place or not."""
    kern = aten_kernels._optimizers()  # make(torch, as_tensor), as the executor gets it
    rng = np.random.default_rng(1)
    w, g, m = rng.standard_normal((3, 5000)).astype(np.float32)
    lr = np.float32(1e-2)
    hp = dict(momentum=0.9, dampening=0.0, nesterov=False, weight_decay=1e-3) | variant
    want = _torch_step("sgd", w, g, [m], step, lr=float(lr), **hp)
    got = kern["ipu.sgd"](w.copy(), g, lr, m.copy() if hp["momentum"] else None, np.float32(step),
                          None, None, None, None, None, momentum=hp["momentum"],
                          dampening=hp["dampening"], weight_decay=hp["weight_decay"],
                          nesterov=hp["nesterov"], inplace=inplace)
    got = got if isinstance(got, tuple) else (got,)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_out_of_range_index_on_aten_kernel_is_a_tilefx_error():
    """ATen's own index check becomes the executor's error naming the op."""
    rows = 4096  # 262,144 weights: above the one-flop ops' threshold, so ATen's embedding
    op = _op("embedding.default", [((rows, 64), np.float32), ((4, 32), np.int64)], {},
             [((4, 32, 64), np.float32)])
    assert aten_kernels.provide(op) is not None
    ex = tilefx.inferenceModel(nn.Embedding(rows, 64))
    ex(torch.randint(0, rows, (4, 32)))
    with pytest.raises(tilefx.Error, match="embedding"):
        ex(torch.full((4, 32), rows))


def _op(name, operand_types, props, result_types):
    """An aten op over block arguments of the given types (no function around it)."""
    from xdsl.ir import Block

    from tilefx.dialects.aten import ATEN_SCHEMAS, create_aten_op, tensor_type

    block = Block(arg_types=[tensor_type(*t) for t in operand_types])
    names = [a.name for a in ATEN_SCHEMAS[name].operands]
    return create_aten_op(name, dict(zip(names, block.args)), props,
                          [tensor_type(*t) for t in result_types])


def test_clone_of_transposed_value_is_row_major():
    """aten.clone on ATen's kernel gives a row-major result, as the numpy
    kernel does (the IR has no layouts; ATen's default would keep the
    transposed strides and every later view would copy)."""
    op = _op("clone.default", [((512, 512), np.float32)], {}, [((512, 512), np.float32)])
    kernel = aten_kernels.provide(op)
    assert kernel is not None
    x = np.arange(512 * 512, dtype=np.float32).reshape(512, 512).T
    out = kernel(x)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, x)


def test_provided_kernel_binds_properties_and_optionals():
    """Properties and absent optional operands reach ATen in its schema's order."""
    op = _op("native_layer_norm.default", [((8, 1024), np.float32), ((1024,), np.float32)],
             {"normalized_shape": [1024], "eps": 1e-5},
             [((8, 1024), np.float32), ((8, 1), np.float32), ((8, 1), np.float32)])
    kernel = aten_kernels.provide(op)
    x = np.random.default_rng(0).standard_normal((8, 1024)).astype(np.float32)
    w = np.linspace(0.5, 1.5, 1024, dtype=np.float32)
    out, mean, rstd = kernel(x, w, None)
    want = torch.ops.aten.native_layer_norm(torch.from_numpy(x), [1024], torch.from_numpy(w), None, 1e-5)
    for a, b in zip((out, mean, rstd), want):
        np.testing.assert_array_equal(a, b.numpy())
    # a dtype property reaches ATen as torch's dtype
    cast = aten_kernels.provide(_op("_to_copy.default", [((512, 512), np.float32)],
                                    {"dtype": np.dtype(np.float64)}, [((512, 512), np.float64)]))
    x = np.random.default_rng(1).random((512, 512), dtype=np.float32)
    got = cast(x)
    assert got.dtype == np.float64 and np.array_equal(got, x.astype(np.float64))


def test_thread_hook_restores_the_users_setting(monkeypatch):
    """The call hook sets one thread on a loaded machine and gives the
    user's count back; an executor call leaves threads and grad mode as the
    user had them, and its outputs carry no graph."""
    before = torch.get_num_threads()
    monkeypatch.setattr(aten_kernels, "blas_cores", lambda own_threads=0: 1)
    undo = aten_kernels.threads_for_call()
    if before > 1:
        assert torch.get_num_threads() == 1
        undo()
    assert torch.get_num_threads() == before
    model = nn.Sequential(nn.Linear(64, 4096), nn.ReLU(), nn.Linear(4096, 4))
    x = torch.randn(8, 64, requires_grad=True)
    out = tilefx.inferenceModel(model)(x)
    assert torch.is_grad_enabled() and torch.get_num_threads() == before
    assert not out.requires_grad and out.grad_fn is None


def test_backward_ops_kept_whole_in_the_traced_graph():
    """The tracer keeps layer norm's, softmax's, log-softmax's, GELU's and
    ReLU's backward as single ops (lowering/decompositions.py)."""
    model = WithLoss(Net(), nn.CrossEntropyLoss())
    tok, y = _data()
    text = str(tilefx.compile(model, tok, y, training=True,
                              optimizer=torch.optim.SGD(model.parameters(), lr=0.1)).ir("import"))
    for name in KEPT_WHOLE:
        if name != "logaddexp":  # not in this model: test_logaddexp_kept_whole_trains_as_pytorch
            assert f"aten.{name}" in text, name


def test_logaddexp_kept_whole_trains_as_pytorch():
    """torch.logaddexp reaches the IR as one op (its trait `kept_whole`, in
    place of core ATen's 15-op decomposition), runs ATen's kernel forward and
    autograd's formula backward: a training step equal to PyTorch's."""

    class LogAddExp(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 4))

        def forward(self, a, b):
            return torch.logaddexp(a * self.w, b).square().mean()

    torch.manual_seed(0)
    model, ref = LogAddExp(), LogAddExp()
    ref.load_state_dict(model.state_dict())
    a, b = torch.randn(3, 4) * 30, torch.randn(3, 4)
    compiled = tilefx.compile(model, a, b, training=True, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    loss = compiled(a, b)
    want = ref(a, b)
    want.backward()
    torch.optim.SGD(ref.parameters(), lr=0.1).step()
    assert "aten.logaddexp" in str(compiled.ir("import"))
    torch.testing.assert_close(torch.as_tensor(loss), want.detach(), rtol=1e-6, atol=0)
    torch.testing.assert_close(model.w.detach(), ref.w.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64])
def test_numpy_where_and_relu_backward_keep_every_bit(dtype):
    """The numpy kernels of where and threshold_backward select by bit masks
    (kernels/elementwise.py `_select`): NaN, infinities and -0.0 come out as
    torch's, for broadcast and 0-d operands too."""
    from tilefx.backend.kernels import KERNELS

    rng = np.random.default_rng(0)
    for shape in [(64, 70), (3, 1, 5), ()]:
        x = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        g = np.asarray(rng.standard_normal(shape) * 3).astype(dtype)
        if x.dtype.kind == "f" and x.size > 5:
            g.flat[:3] = [np.nan, -0.0, np.inf]
            x.flat[:2] = [np.nan, 0]
        got = np.asarray(KERNELS["threshold_backward.default"](g, x, 0))
        want = torch.ops.aten.threshold_backward(torch.from_numpy(g.copy()), torch.from_numpy(x.copy()), 0)
        assert got.dtype == want.numpy().dtype and got.tobytes() == want.numpy().tobytes()
        cond = np.asarray(x > 0)
        for a, b in [(g, x), (g, np.asarray(0, dtype)), (np.asarray(1, dtype), g),
                     (g[..., :1] if g.ndim else g, x)]:
            got = np.asarray(KERNELS["where.self"](cond, a, b))
            want = torch.where(torch.from_numpy(cond.copy()), torch.from_numpy(np.array(a)),
                               torch.from_numpy(np.array(b))).numpy()
            assert got.shape == want.shape and got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_ops_whose_aten_kernel_writes_an_operand_stay_numpy():
    """`_native_batch_norm_legit` updates its running statistics in place in
    ATen; the executor's arrays are values, so it keeps the numpy kernel."""
    c = 64
    op = _op("_native_batch_norm_legit.default",
             [((8, c, 16, 16), np.float32), ((c,), np.float32), ((c,), np.float32),
              ((c,), np.float32), ((c,), np.float32)],
             {"training": True, "momentum": 0.1, "eps": 1e-5},
             [((8, c, 16, 16), np.float32), ((c,), np.float32), ((c,), np.float32)])
    assert aten_kernels.provide(op) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eigen_and_singular_vectors_carry_torchs_signs(dtype):
    """Dense linear algebra runs on ATen's LAPACK at every size: the vectors,
    defined only up to sign, are torch's exactly."""

    class Decompose(nn.Module):
        def forward(self, a):
            _, v = torch.linalg.eigh(a @ a.transpose(-1, -2))
            u, _, vh = torch.linalg.svd(a)
            q, _ = torch.linalg.qr(a)
            return v, u, vh, q

    a = torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(0), dtype=dtype)
    for got, want in zip(tilefx.inferenceModel(Decompose())(a), Decompose()(a)):
        assert torch.equal(got, want)


def test_numpy_kernels_kept_where_they_measured_faster():
    """2x2 max pooling with indices keeps tilefx's numpy kernel; every
    convolution's backward takes ATen's, a first layer's (few input channels)
    included (benchmarks/RESULTS.md, 2026-11-28)."""
    def conv_bwd(ci):
        return _op("convolution_backward.default",
                   [((8, 16, 12, 12), np.float32), ((8, ci, 16, 16), np.float32),
                    ((16, ci, 5, 5), np.float32)],
                   {"bias_sizes": [16], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1],
                    "transposed": False, "output_padding": [0, 0], "groups": 1,
                    "output_mask": [True, True, True]},
                   [((8, ci, 16, 16), np.float32), ((16, ci, 5, 5), np.float32), ((16,), np.float32)])

    assert aten_kernels.provide(conv_bwd(1)) is not None
    assert aten_kernels.provide(conv_bwd(32)) is not None
    pool = _op("max_pool2d_with_indices.default", [((8, 16, 32, 32), np.float32)],
               {"kernel_size": [2, 2], "stride": [2, 2]},
               [((8, 16, 16, 16), np.float32), ((8, 16, 16, 16), np.int64)])
    assert aten_kernels.provide(pool) is None


def test_fused_updates_read_a_transposed_gradient_by_its_values():
    """The fused kernels walk memory in one order: a gradient that is a
    transposed view (a convolution's weight gradient can be) is read by its
    values, as torch.optim reads it."""
    kern = aten_kernels._optimizers()  # make(torch, as_tensor), as the executor gets it
    rng = np.random.default_rng(2)
    w, m = rng.standard_normal((2, 64, 48)).astype(np.float32)
    g = rng.standard_normal((48, 64)).astype(np.float32).T  # not row-major
    lr = np.float32(0.01)  # the executor's learning rate is a float32
    want = _torch_step("sgd", w, np.ascontiguousarray(g), [m], 5, lr=float(lr), weight_decay=1e-3)
    got = kern["ipu.sgd"](w.copy(), g, lr, m.copy(), np.float32(5), None, None, None,
                          None, None, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=False)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    v = rng.random((64, 48)).astype(np.float32)
    want = _torch_step("adamw", w, np.ascontiguousarray(g), [m, v], 5, fused=True, lr=float(lr),
                       weight_decay=0.01)
    got = kern["ipu.adam"](w.copy(), g, m.copy(), v.copy(), np.float32(5), lr, None, None,
                           None, None, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01,
                           decoupled=True, bias_correction=True, grad_scale=1.0)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_batched_updates_equal_one_call_per_weight():
    """The optimizer kernels' batched form (one fused call per set of equal
    hyper-parameters, executor._batched_step) gives each weight exactly what
    its own call gives, for mixed learning rates, with and without momentum,
    and with a float64 weight that takes the numpy kernel."""
    kern = aten_kernels._optimizers()  # make(torch, as_tensor), as the executor gets it
    rng = np.random.default_rng(3)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    sgd_members = [
        ((f32(30, 20), f32(30, 20), np.float32(0.1), f32(30, 20), np.float32(4), None, None, None, None, None),
         dict(momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=False)),
        ((f32(7), f32(7), np.float32(0.05), f32(7), np.float32(4), None, None, None, None, None),
         dict(momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=False)),
        ((f32(5, 5), f32(5, 5), np.float32(0.1), None, np.float32(4), None, None, None, None, None),
         dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False)),
        ((rng.standard_normal(6), rng.standard_normal(6), np.float32(0.1), rng.standard_normal(6),
          np.float32(4), None, None, None, None, None),
         dict(momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=False)),
    ]
    def copies(vals):
        return tuple(v.copy() if isinstance(v, np.ndarray) and v.ndim else v for v in vals)
    want = [kern["ipu.sgd"](*copies(v), **p) for v, p in sgd_members]
    got = kern["ipu.sgd"].batched([(copies(v), p, False) for v, p in sgd_members])
    for w, g in zip(want, got):
        w = w if isinstance(w, tuple) else (w,)
        assert len(w) == len(g)
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)
    adam_members = [
        ((f32(30, 20), f32(30, 20), f32(30, 20), np.abs(f32(30, 20)), np.float32(3), np.float32(1e-3),
          None, None, None, None),
         dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True, bias_correction=True,
              grad_scale=1.0)),
        ((f32(9), f32(9), f32(9), np.abs(f32(9)), np.float32(3), np.float32(1e-3), None, None, None, None),
         dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=False, bias_correction=True,
              grad_scale=1.0)),
        ((f32(4), f32(4), f32(4), np.abs(f32(4)), np.float32(3), np.float32(1e-3), None, None, None, None),
         dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True, bias_correction=True,
              grad_scale=1.0)),
    ]
    want = [kern["ipu.adam"](*copies(v), **p) for v, p in adam_members]
    got = kern["ipu.adam"].batched([(copies(v), p, False) for v, p in adam_members])
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)
