"""The ops a review of ~680 op variants found unsupported, against PyTorch on
the CPU: where torch's own Python reads a value on the host (BatchNorm's
cumulative average, gaussian_nll_loss's check of var, the gradient of
`x[mask] = parameter` and of index_fill's tensor value), ops without a
kernel or decomposition (put/take in training, fractional max pooling, 5-D
grid_sample, special functions, histogram). Forward and, where torch
differentiates, one SGD step through `tilefx.trainingModel`.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tilefx

TOL = {"rtol": 1e-5, "atol": 1e-6}


def _train_like_eager(model, *inputs, steps=2, lr=0.1, tol=TOL):
    """`steps` SGD steps through tilefx and eager; outputs, loss (the last
    output) and parameters equal. Returns both models."""
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=lr))
    for _ in range(steps):
        opt.zero_grad()
        want = ref(*inputs)
        want[-1].backward()
        opt.step()
        got = trainer(*inputs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w.detach(), **tol)
    trainer.copyWeightsToHost()
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        torch.testing.assert_close(q.detach(), p.detach(), **tol, msg=lambda m, n=n: f"{n}: {m}")
    return model, ref


class _Fn(nn.Module):
    """fn(w, *inputs) of one parameter w; returns (y, a fixed weighting of y summed)."""

    def __init__(self, fn, shape):
        super().__init__()
        self.fn = fn
        self.w = nn.Parameter(torch.randn(*shape))

    def forward(self, *inputs):
        y = self.fn(self.w, *inputs)
        probe = torch.sin(torch.arange(y.numel(), dtype=y.dtype)).reshape(y.shape)
        return y, (y * probe).sum()


# ---------------------------------------------------------------------------
# host reads in torch's Python
# ---------------------------------------------------------------------------


class _BN(nn.Module):
    def __init__(self, pre, bn):
        super().__init__()
        self.pre, self.bn = pre, bn

    def forward(self, x):
        y = self.bn(self.pre(x))
        return y, (y * torch.sin(torch.arange(y.numel(), dtype=y.dtype)).reshape(y.shape)).sum()


@pytest.mark.parametrize("pre, bn, shape", [
    (nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3, momentum=None), (4, 2, 3, 3)),
    (nn.Linear(5, 5), nn.BatchNorm1d(5, momentum=None, affine=False), (6, 5)),
    (nn.Linear(5, 5), nn.SyncBatchNorm(5, momentum=None), (6, 5))])
def test_batch_norm_cumulative_average_trains_like_pytorch(pre, bn, shape):
    """BatchNorm(momentum=None): the running statistics are the cumulative
    average of the batches' (torch reads num_batches_tracked on the host)."""
    torch.manual_seed(0)
    x = torch.randn(*shape) * 2 + 0.5
    # atol 1e-5 (torch.testing's float32 default): after three steps an output
    # near 0 moved 1.4e-6 with the convolution's backward on 1 thread against 2
    tol = {"rtol": 1e-5, "atol": 1e-5}
    model, ref = _train_like_eager(_BN(pre, bn), x, steps=3, tol=tol)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(model.bn, name), getattr(ref.bn, name), **TOL)
    assert int(model.bn.num_batches_tracked) == 3
    model.eval()
    ref.eval()
    torch.testing.assert_close(tilefx.inferenceModel(model)(x)[0], ref(x)[0].detach(), **tol)


class _GaussianNLL(nn.Module):
    def __init__(self, var_shape, **kw):
        super().__init__()
        self.mu = nn.Linear(4, 3)
        self.log_var = nn.Parameter(torch.randn(*var_shape) * 0.3)
        self.loss = nn.GaussianNLLLoss(**kw)

    def forward(self, x, target):
        mu = self.mu(x)
        return mu, self.loss(mu, target, self.log_var.exp())


@pytest.mark.parametrize("var_shape, kw", [((5, 3), {}), ((5,), {"full": True}), ((5, 1), {"reduction": "sum"}),
                                           ((5, 3), {"reduction": "none", "eps": 0.5})])
def test_gaussian_nll_loss_trains_like_pytorch(var_shape, kw):
    """F.gaussian_nll_loss: torch checks var >= 0 on the host; here the check is
    a graph op, the numbers and the (clamp-free) gradient are torch's."""
    torch.manual_seed(1)
    x, target = torch.randn(5, 4), torch.randn(5, 3)
    model = _GaussianNLL(var_shape, **kw)
    if kw.get("reduction") == "none":
        class Summed(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x, target):
                mu, loss = self.inner(x, target)
                return loss, loss.sum()

        model = Summed(model)
    _train_like_eager(model, x, target)


def test_gaussian_nll_loss_inference_and_negative_variance_error():
    def fn(mu, target, var):
        return F.gaussian_nll_loss(mu, target, var), F.gaussian_nll_loss(mu, target, 0.25, reduction="sum")

    class M(nn.Module):
        def forward(self, *a):
            return fn(*a)

    mu, target, var = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4, 3)
    run = tilefx.inferenceModel(M())
    for g, w in zip(run(mu, target, var), fn(mu, target, var)):
        torch.testing.assert_close(g, w, **TOL)
    with pytest.raises(tilefx.Error, match="var has negative entry"):
        run(mu, target, var - 0.5)


class _MaskToken(nn.Module):
    """MAE / BERT-style masking: x[mask] = a learned token."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.randn(4))
        self.fc = nn.Linear(4, 2)

    def forward(self, x, mask):
        x = x.clone()
        x[mask] = self.token
        y = self.fc(x)
        return y, (y * y).mean()


def test_assigning_a_parameter_through_a_mask_trains_like_pytorch():
    """x[mask] = v where v needs a gradient (torch's backward takes grad[mask],
    a data-dependent shape); index_put(_) with a mask likewise."""
    torch.manual_seed(2)
    x = torch.randn(2, 5, 4)
    mask = torch.tensor([[True, False, True, False, False], [False, False, False, True, True]])
    _train_like_eager(_MaskToken(), x, mask)

    def cols(w, m):  # a mask after a full slice, a 0-d value
        y = torch.zeros(2, 3, 4)
        y[:, m] = w[0, 0] * 2
        return y

    def rows(w, m):  # one row of values per masked position (their count is checked when run)
        y = w.detach() * 0 + 1
        y[m] = w[1:3] * 3
        return y

    def index_put(w, m):  # index_put(_), accumulate too
        return (torch.index_put(w.detach(), (m,), w[0] * 2) + w.detach().index_put((m,), w[1], accumulate=True)
                + torch.zeros(3, 4).index_put_((m,), w[:2] * 3, accumulate=True))

    def leading_ones(w, m):  # torch's assignment drops a value's leading ones
        y = torch.zeros(3, 4)
        y[m] = w[None, None, 2]
        return y

    m = torch.tensor([True, False, True])
    _train_like_eager(_Fn(cols, (3, 4)), m)
    _train_like_eager(_Fn(leading_ones, (3, 4)), m)
    _train_like_eager(_Fn(index_put, (3, 4)), m)
    model, _ = _train_like_eager(_Fn(rows, (3, 4)), m)
    with pytest.raises(tilefx.Error, match="shape mismatch"):
        tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))(
            torch.tensor([True, True, True]))


def test_index_fill_with_a_tensor_value_trains_like_pytorch():
    """The value's gradient sums over the filled positions once each (torch's
    formula takes `_unique(index)`, a data-dependent shape); duplicate indices
    included, and negative ones in inference (eager's backward fails on them)."""
    torch.manual_seed(3)
    idx = torch.tensor([0, 2, 2, 4])
    _train_like_eager(_Fn(lambda w: w.index_fill(1, idx, w[0, 1] * 2), (3, 5)))
    _train_like_eager(_Fn(lambda w: (w * 1).index_fill_(0, idx[:2], w.sum()), (3, 5)))

    class Fill(nn.Module):
        def forward(self, x, v):
            return x.index_fill(-1, torch.tensor([-1, 1]), v), x.index_fill(0, torch.tensor([1]), v)

    x, v = torch.randn(3, 4), torch.tensor(2.5)
    for g, w in zip(tilefx.inferenceModel(Fill())(x, v), Fill()(x, v)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# ops without a kernel
# ---------------------------------------------------------------------------


def test_take_and_put_train_like_pytorch():
    """take's backward is a put; put (Tensor.put_) is an index_put into the
    flattened tensor: duplicate indices accumulate, negative ones count from the end."""
    torch.manual_seed(4)
    idx = torch.tensor([[0, 5], [11, 5], [-1, 3]])
    _train_like_eager(_Fn(lambda w: torch.take(w, idx), (3, 4)))
    _train_like_eager(_Fn(lambda w: (w * 2).put_(torch.tensor([0, 5, -2]), w[0, :3] * 3), (3, 4)))
    _train_like_eager(_Fn(lambda w: w.put(idx, w[:3, :2].exp(), accumulate=True), (3, 4)))


def test_put_and_take_out_of_range_are_errors():
    class Put(nn.Module):
        def forward(self, x, i):
            return x.put(i, x[0, :2]), torch.take(x, i)

    x = torch.randn(3, 4)
    run = tilefx.inferenceModel(Put())
    for g, w in zip(run(x, torch.tensor([-12, 11])), Put()(x, torch.tensor([-12, 11]))):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    with pytest.raises(tilefx.Error, match="out of bounds"):
        run(x, torch.tensor([12, 0]))


@pytest.mark.parametrize("nd, shape, kernel, out", [(2, (2, 3, 7, 6), (2, 3), (4, 3)), (2, (3, 9, 9), 3, (5, 5)),
                                                    (3, (1, 2, 5, 6, 7), (2, 2, 3), (3, 4, 3))])
def test_fractional_max_pool_like_pytorch(nd, shape, kernel, out):
    """Given the random samples: values and indices equal, NaN windows included,
    and the gradient (one SGD step); unbatched input too."""
    torch.manual_seed(5)
    pool = F.fractional_max_pool2d if nd == 2 else F.fractional_max_pool3d
    planes = (shape[0] if len(shape) == nd + 2 else 1, shape[-nd - 1])
    samples = torch.rand(*planes, nd)

    class Pool(nn.Module):
        def forward(self, x, s):
            return pool(x, kernel, output_size=out, _random_samples=s, return_indices=True)

    x = torch.randn(*shape)
    x.view(-1)[[3, 4, 17]] = float("nan")
    for g, w in zip(tilefx.inferenceModel(Pool())(x, samples), Pool()(x, samples)):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
    _train_like_eager(_Fn(lambda w, s: pool(w, kernel, output_size=out, _random_samples=s), shape), samples)


def test_fractional_max_pool_draws_its_samples():
    """Without samples the module draws them (a random op of the program): every
    output is the maximum of a window of the kernel's size the index points into."""
    torch.manual_seed(6)
    layer = nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)
    x = torch.randn(2, 3, 8, 10)
    out, idx = tilefx.inferenceModel(layer)(x)
    assert out.shape == idx.shape == (2, 3, 4, 5)
    torch.testing.assert_close(out, x.flatten(2).gather(2, idx.flatten(2)).reshape(out.shape), rtol=0, atol=0)
    rows, cols = idx // 10, idx % 10  # windows 2 apart (alpha = 2): disjoint, in order
    assert (rows[..., 1:, :] > rows[..., :-1, :]).all() and (cols[..., 1:] > cols[..., :-1]).all()
    windows = F.max_pool2d(x, 2, 1)  # every 2 x 2 window's maximum, by its top-left corner
    assert torch.isin(out, windows).all()


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_volumetric_grid_sample_like_pytorch(mode, padding_mode):
    """5-D F.grid_sample (grid_sampler_3d): inference, and one SGD step through
    the input's and (bilinear) the grid's gradients."""
    torch.manual_seed(7)
    grid = torch.rand(2, 3, 2, 4, 3) * 2.4 - 1.2  # some points outside

    def sample(w, g, align_corners):
        return F.grid_sample(w, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)

    class Warp(nn.Module):
        def forward(self, x, g):
            return sample(x, g, False), sample(x, g, True)

    x = torch.randn(2, 3, 4, 5, 6)
    for got, want in zip(tilefx.inferenceModel(Warp())(x, grid), Warp()(x, grid)):
        torch.testing.assert_close(got, want, **TOL)

    class Learned(nn.Module):
        def __init__(self):
            super().__init__()
            self.x = nn.Parameter(torch.randn(2, 3, 4, 5, 6))
            self.g = nn.Parameter(grid.clone())

        def forward(self):
            y = sample(self.x, self.g, padding_mode == "border")
            return y, (y * torch.sin(torch.arange(y.numel(), dtype=y.dtype)).reshape(y.shape)).sum()

    _train_like_eager(Learned(), tol={"rtol": 1e-4, "atol": 1e-5})


BESSEL = ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
          "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
          "spherical_bessel_j0", "i0e", "i1", "i1e")


class _Special(nn.Module):
    def forward(self, x, a):
        return (*[getattr(torch.special, n)(x) for n in BESSEL], torch.special.zeta(x + 1.5, a),
                torch.special.zeta(x + 1.5, 2.0), torch.special.zeta(3.0, a), torch.special.gammainc(a, x),
                torch.special.gammaincc(a, x), torch.igamma(a, x), torch.igammac(a, x))


def test_special_functions_like_pytorch():
    """torch.special's Bessel functions, the Hurwitz zeta (tensor or number operands)
    and the incomplete gamma functions: float32 runs ATen's kernels (bit for bit),
    the numpy kernels (scipy.special in double) agree within float32 rounding."""
    torch.manual_seed(8)
    x, a = torch.rand(3, 5) * 12 - 2, torch.rand(3, 5) * 3 + 0.1
    x[0, :3] = torch.tensor([0.0, -0.0, 1e-3])
    want = _Special()(x, a)
    for g, w in zip(tilefx.inferenceModel(_Special())(x, a), want):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


def test_special_functions_numpy_kernels(monkeypatch):
    monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    x, a = torch.rand(3, 5) * 10 + 0.05, torch.rand(3, 5) * 3 + 0.1
    for g, w in zip(tilefx.inferenceModel(_Special())(x, a), _Special()(x, a)):
        torch.testing.assert_close(g, w, rtol=2e-5, atol=1e-6, equal_nan=True)


POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
               "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
               "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")


class _Polynomials(nn.Module):
    def forward(self, x, n):
        return (torch.special.airy_ai(x * 3), *[getattr(torch.special, p)(x, n) for p in POLYNOMIALS],
                *[getattr(torch.special, p)(x, 5) for p in POLYNOMIALS],
                *[getattr(torch.special, p)(0.3, n) for p in POLYNOMIALS])


@pytest.mark.parametrize("kernels", ["aten", "numpy"])
def test_airy_and_orthogonal_polynomials_like_pytorch(kernels, monkeypatch):
    """torch.special's Airy function and orthogonal polynomials (tensor or number x
    and degree n; a negative degree gives 0): ATen's kernels bit for bit, the numpy
    kernels' recurrences in double within float32 rounding."""
    if kernels == "numpy":
        monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    torch.manual_seed(11)
    x, n = torch.rand(4, 6) * 2.4 - 1.2, torch.arange(24.0).reshape(4, 6) % 9 - 1
    tol = {"rtol": 0, "atol": 0} if kernels == "aten" else {"rtol": 2e-5, "atol": 1e-5}
    for g, w in zip(tilefx.inferenceModel(_Polynomials())(x, n), _Polynomials()(x, n)):
        torch.testing.assert_close(g, w, **tol)


def test_zeta_and_incomplete_gamma_train_like_pytorch():
    """The gradients torch defines: zeta's and igamma(c)'s with respect to their
    second operand (the first has none in torch); the Bessel functions have none."""
    torch.manual_seed(9)
    s = torch.rand(3, 4) * 2 + 1.5
    x = torch.rand(3, 4) * 5
    tol = {"rtol": 1e-4, "atol": 1e-5}
    _train_like_eager(_Fn(lambda w, s: torch.special.zeta(s, w.abs() + 0.5), (3, 4)), s, tol=tol)
    _train_like_eager(_Fn(lambda w, s: torch.special.gammainc(s, w.abs() + 0.1)
                          + torch.special.gammaincc(s * 2, w * w), (3, 4)), s, tol=tol)
    _train_like_eager(_Fn(lambda w, x: w * torch.special.bessel_y1(x + 0.1)
                          + torch.special.modified_bessel_k1(x + w.detach().abs() + 0.1), (3, 4)), x)


class _Hist(nn.Module):
    def forward(self, x, w, edges):
        dd = torch.histogramdd(x.reshape(-1, 2), [3, 2])
        dd_given = torch.histogramdd(x.reshape(-1, 2), [edges, edges[1:]], weight=w.reshape(-1, 2)[:, 0],
                                     density=True)
        return (*torch.histogram(x, 6), *torch.histogram(x, 4, range=(-1.0, 1.5), weight=w, density=True),
                *torch.histogram(x, edges, weight=w), torch.histogram(x.clamp(0.5, 0.5), 3).bin_edges,
                dd.hist, *dd.bin_edges, dd_given.hist, *dd_given.bin_edges)


@pytest.mark.parametrize("kernels", ["aten", "numpy"])
def test_histogram_like_pytorch(kernels, monkeypatch):
    """torch.histogram and histogramdd: the data's range or a given one, weights,
    density, given edges; a constant input widens its range by 0.5. A range that is not finite
    (a NaN or infinity in the data) fails the call as in torch."""
    if kernels == "numpy":
        monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    torch.manual_seed(10)
    x, w = torch.randn(5, 8), torch.rand(5, 8)
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0])
    run = tilefx.inferenceModel(_Hist())
    exact = {"rtol": 0, "atol": 0} if kernels == "aten" else {"rtol": 1e-6, "atol": 1e-6}
    for g, want in zip(run(x, w, edges), _Hist()(x, w, edges)):
        torch.testing.assert_close(g, want, **exact)
    x[1, 2] = float("nan")
    with pytest.raises(tilefx.Error, match="not finite"):
        run(x, w, edges)


@pytest.mark.parametrize("fn, args, match", [
    (lambda x: F.fractional_max_pool2d(x, 3, output_size=(5, 5), _random_samples=torch.rand(1, 2, 2)),
     (torch.randn(1, 2, 6, 6),), "pool height 3 too large relative to input height 6"),
    (lambda x, s: F.fractional_max_pool3d(x, 2, output_size=(2, 2, 2), _random_samples=s),
     (torch.randn(1, 2, 4, 4, 4), torch.rand(1, 3, 3)), "expected _random_samples of shape"),
    (lambda x: x.put(torch.tensor([1, 2]), x[0, :1]), (torch.randn(3, 4),), "same number of elements"),
    (lambda x: x.put(torch.tensor([1, 2], dtype=torch.int32), x[0, :2]), (torch.randn(3, 4),), "long tensor"),
    (lambda x: x.index_fill(1, torch.tensor([0]), torch.tensor([2.0])), (torch.randn(3, 4),), "0-dimensional"),
    (lambda x, i: x.index_fill(1, i, torch.tensor(2.0)), (torch.randn(3, 4), torch.tensor([7])), "out of bounds"),
    (lambda x: torch.histogram(x, 3, range=(1.0, 0.0)), (torch.randn(5),), "min should not exceed max"),
    (lambda a, v: F.gaussian_nll_loss(a, a, v), (torch.randn(4, 3), torch.rand(2)), "var is of incorrect size"),
])
def test_bad_input_is_a_clear_error(fn, args, match):
    """The checks torch makes in the ops decomposed or swapped here are kept
    (while tracing, or when the call runs)."""
    class M(nn.Module):
        def forward(self, *a):
            return fn(*a)

    with pytest.raises(tilefx.Error, match=match):
        tilefx.inferenceModel(M())(*args)


def test_numpy_randomness_while_tracing_warns():
    """What numpy's global random functions draw while the model is traced is a
    constant of the program (eager draws anew each call): a warning says so."""
    import numpy as np

    class Noisy(nn.Module):
        def forward(self, x):
            return x * torch.tensor(np.random.rand(3), dtype=x.dtype)

    with pytest.warns(UserWarning, match="numpy.random.rand was called while tilefx traced the model"):
        tilefx.inferenceModel(Noisy())(torch.randn(3))
    assert np.random.rand.__self__ is np.random.mtrand._rand  # put back after the trace


def test_shifts_by_a_tensor_count_run_like_torch():
    """`x >> t` / `x << t` with a tensor count (`__rshift__.Tensor`): ATen's
    bitwise shifts, counts past the width and negative values included."""
    class Shifts(nn.Module):
        def forward(self, x, n):
            return (x >> n) + (x << n) - (x >> 3) + (x << 2)

    x = torch.tensor([[-100, -1, 0, 1, 7, 2 ** 40], [5, -7, 3, 12, -(2 ** 35), 99]])
    n = torch.tensor([0, 1, 2, 5, 63, 70])
    torch.testing.assert_close(tilefx.inferenceModel(Shifts())(x, n), Shifts()(x, n), rtol=0, atol=0)
