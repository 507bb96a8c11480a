"""Reductions and softmax."""

from __future__ import annotations

import math

import numpy as np

from tilefx.backend.kernels._common import CHUNK, by_rows, registrar
from tilefx.backend.kernels._common import (
    _BOOL,
    _F16,
    _F32,
    _I64,
    _axes,
    _cast,
    _compute_dtype,
    _dtype,
    _f32,
    _ret,
    _wrap,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------


def _sum(x, axes, keepdim, dtype):
    dt = _dtype(dtype)
    if dt is None:
        dt = _I64 if x.dtype.kind in "biu" else x.dtype
    ct = _compute_dtype(dt)
    r = _sum_by_blas(x, axes, keepdim) if ct == _F32 and x.dtype in (_F32, _F16) else None
    if r is not None:
        return _ret(r, dt)
    return _ret(np.sum(_cast(x, ct), axis=axes, keepdims=keepdim, dtype=ct), dt)


SUM_BY_BLAS_MIN = 4096  # elements: below this numpy's own loop is as quick


def _sum_by_blas(x: np.ndarray, axes, keepdim: bool) -> np.ndarray | None:
    """A float32 sum over the trailing axes of a C-contiguous array, as a
    product with a vector of ones: the per-row sums of a decomposed
    layer-norm or softmax backward. numpy sums each short row in a loop of
    its own (2x slower measured on 4096 rows of 128); the BLAS product is
    vectorised and sums in float32 with several partial sums, as torch
    does (its error against a float64 sum is numpy's, measured). The
    executor gives it BLAS threads by its size (backend/emitter.py
    gemm_flops). None when the sum is not of that form (sums over the
    leading axes stay numpy's: no faster by BLAS)."""
    if axes is None or not x.flags.c_contiguous or x.ndim < 2 or x.size < SUM_BY_BLAS_MIN:
        return None
    axes = tuple(axes)
    k = len(axes)
    if k == 0 or k == x.ndim or axes != tuple(range(x.ndim - k, x.ndim)):
        return None
    n = int(np.prod(x.shape[x.ndim - k:]))
    r = x.reshape(-1, n).astype(_F32, copy=False) @ np.ones(n, _F32)
    shape = x.shape[:x.ndim - k] + ((1,) * k if keepdim else ())
    return r.reshape(shape)


@_kernel("sum.dim_IntList")
def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None):
    return _sum(self, _axes(dim, self.ndim), keepdim, dtype)


@_kernel("sum.default")
def sum_default(self, *, dtype=None):
    return _sum(self, None, False, dtype)


def _mean(x, axes, keepdim, dtype):
    dt = _dtype(dtype, x.dtype if x.dtype.kind == "f" else _F32)
    ct = _compute_dtype(dt)
    return _ret(np.mean(_cast(x, ct), axis=axes, keepdims=keepdim, dtype=ct), dt)


@_kernel("mean.default")
def mean_default(self, *, dtype=None):
    return _mean(self, None, False, dtype)


@_kernel("mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    return _mean(self, _axes(dim, self.ndim), keepdim, dtype)


@_kernel("amax.default")
def amax(self, dim=(), keepdim=False):
    return _ret(np.max(self, axis=_axes(dim, self.ndim), keepdims=keepdim))


@_kernel("amin.default")
def amin(self, dim=(), keepdim=False):
    return _ret(np.min(self, axis=_axes(dim, self.ndim), keepdims=keepdim))


@_kernel("linalg_vector_norm.default")
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm (F.normalize, clip_grad_norm_): sum(|x|^ord)^(1/ord),
    max |x| for inf, min |x| for -inf, the count of non-zeros for 0."""
    dt = _dtype(dtype, self.dtype)
    ct = _compute_dtype(dt)
    a = np.abs(_cast(self, ct))
    axes = None if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) \
        else _axes(dim, self.ndim)
    ord = float(ord)
    if self.size == 0 and ord == -math.inf:
        raise ValueError("linalg.vector_norm of an empty tensor with ord=-inf")
    if ord == math.inf:
        r = np.max(a, axis=axes, keepdims=keepdim, initial=ct.type(0))
    elif ord == -math.inf:
        r = np.min(a, axis=axes, keepdims=keepdim)
    elif ord == 0:
        r = np.sum(a != 0, axis=axes, keepdims=keepdim, dtype=ct)
    elif ord == 1:
        r = np.sum(a, axis=axes, keepdims=keepdim, dtype=ct)
    elif ord == 2:
        r = np.sqrt(np.sum(a * a, axis=axes, keepdims=keepdim, dtype=ct))
    else:
        r = np.power(np.sum(np.power(a, ct.type(ord)), axis=axes, keepdims=keepdim, dtype=ct),
                     ct.type(1.0 / ord))
    return _ret(r, dt)


@_kernel("_assert_async.msg")
def _assert_async_msg(self, assert_msg):
    """A check the traced graph keeps (F.one_hot's index range, ...): the call
    fails, as torch would, when the condition is false."""
    if not np.all(self):
        raise ValueError(assert_msg)


@_kernel("any.dim")
def any_dim(self, dim, keepdim=False):
    r = np.any(self, axis=_axes(dim, self.ndim), keepdims=keepdim)
    return _ret(r, np.dtype(np.uint8) if self.dtype == np.uint8 else _BOOL)


@_kernel("argmax.default")
def argmax(self, dim=None, keepdim=False):
    if self.ndim == 0:
        return np.zeros((), dtype=_I64)
    if dim is None:
        r = np.argmax(self.reshape(-1))
        return _ret(r, _I64).reshape((1,) * self.ndim if keepdim else ())
    return _ret(np.argmax(self, axis=_wrap(dim, self.ndim), keepdims=keepdim), _I64)


@_kernel("var_mean.correction")
def var_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    axes = _axes(dim, self.ndim)
    x = _f32(self) if self.dtype.kind == "f" else self.astype(_F32)
    n = 1
    for a in axes:
        n *= self.shape[a]
    c = 1 if correction is None else correction
    m = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    d = x - m
    with np.errstate(all="ignore"):
        var = np.sum(d * d, axis=axes, keepdims=keepdim, dtype=x.dtype)
        var /= x.dtype.type(max(0, n - c))
    if not keepdim:
        m = m.reshape(var.shape)
    rt = self.dtype if self.dtype.kind == "f" else _F32
    return _ret(var, rt), _ret(m, rt)


# ---------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------


def _rowwise(x: np.ndarray, dim: int, body) -> np.ndarray | None:
    """Along the last axis of a large array: body(rows_in, rows_out) on runs
    of rows of a 2-d view, in cache and over the kernel threads (the
    reductions are per row, so the split changes nothing). None otherwise:
    the caller runs on the whole array."""
    if dim != x.ndim - 1 or x.size < CHUNK or x.shape[-1] == 0:
        return None
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    out = np.empty(x.shape, x.dtype)
    o2 = out.reshape(-1, n)
    by_rows(lambda lo, hi: body(x2[lo:hi], o2[lo:hi]), x2.shape[0], n)
    return out


def _softmax_rows(x, e, dim=-1):
    np.subtract(x, np.max(x, axis=dim, keepdims=True), out=e)
    np.exp(e, out=e)  # in place: one array for the whole softmax
    e /= np.sum(e, axis=dim, keepdims=True)


def _log_softmax_rows(x, s, dim=-1):
    np.subtract(x, np.max(x, axis=dim, keepdims=True), out=s)
    with np.errstate(divide="ignore"):
        s -= np.log(np.sum(np.exp(s), axis=dim, keepdims=True))


@_kernel("_softmax.default")
def _softmax(self, dim, half_to_float):
    rt = _F32 if half_to_float and self.dtype == _F16 else self.dtype
    x = _f32(self)
    if x.ndim == 0:
        return _ret(np.exp(x - x), rt)
    dim = _wrap(dim, x.ndim)
    if x.size == 0:  # no rows, or rows of no elements: an empty result, as torch's
        return _ret(np.empty(x.shape, x.dtype), rt)
    e = _rowwise(x, dim, _softmax_rows)
    if e is None:
        e = np.empty(x.shape, x.dtype)
        _softmax_rows(x, e, dim)
    return _ret(e, rt)


@_kernel("_log_softmax.default")
def _log_softmax(self, dim, half_to_float):
    rt = _F32 if half_to_float and self.dtype == _F16 else self.dtype
    x = _f32(self)
    if x.ndim == 0:
        return _ret(x - x, rt)
    dim = _wrap(dim, x.ndim)
    if x.size == 0:  # no rows, or rows of no elements: an empty result, as torch's
        return _ret(np.empty(x.shape, x.dtype), rt)
    s = _rowwise(x, dim, _log_softmax_rows)
    if s is None:
        s = np.empty(x.shape, x.dtype)
        _log_softmax_rows(x, s, dim)
    return _ret(s, rt)


@_kernel("_softmax_backward_data.default")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _f32(grad_output), _f32(output)
    dim = _wrap(dim, g.ndim)
    r = np.multiply(g, y)
    s = np.sum(r, axis=dim, keepdims=True)
    np.subtract(g, s, out=r)  # y (g - sum(g y)), in the one temporary
    r *= y
    return _ret(r, np.dtype(input_dtype))


@_kernel("_log_softmax_backward_data.default")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _f32(grad_output), _f32(output)
    dim = _wrap(dim, g.ndim)
    r = np.exp(y)
    r *= np.sum(g, axis=dim, keepdims=True)
    np.subtract(g, r, out=r)  # g - exp(y) sum(g), in the one temporary
    return _ret(r, np.dtype(input_dtype))




# ---------------------------------------------------------------------------
# more reductions: products, variance, any, argmin, cumulative sums
# ---------------------------------------------------------------------------


def _prod(x, axis, keepdim, dtype):
    dt = _dtype(dtype)
    if dt is None:
        dt = _I64 if x.dtype.kind in "biu" else x.dtype
    ct = _compute_dtype(dt)
    return _ret(np.prod(_cast(x, ct), axis=axis, keepdims=keepdim, dtype=ct), dt)


@_kernel("prod.default")
def prod_default(self, *, dtype=None):
    return _prod(self, None, False, dtype)


@_kernel("prod.dim_int")
def prod_dim_int(self, dim, keepdim=False, *, dtype=None):
    return _prod(self, _axes(dim, self.ndim), keepdim, dtype)


@_kernel("var.correction")
def var_correction(self, dim=None, *, correction=None, keepdim=False):
    return var_mean_correction(self, dim, correction=correction, keepdim=keepdim)[0]


@_kernel("var.dim")
def var_dim(self, dim, unbiased=True, keepdim=False):
    return var_mean_correction(self, dim, correction=1 if unbiased else 0, keepdim=keepdim)[0]


@_kernel("any.default")
def any_default(self):
    return _ret(np.any(self), np.dtype(np.uint8) if self.dtype == np.uint8 else _BOOL)


@_kernel("_is_all_true.default")
def is_all_true(self):
    """`torch._is_all_true` of a bool tensor (torch.distributions' argument
    checks trace it): a 0-d bool."""
    return _ret(np.all(self), _BOOL)


@_kernel("_is_any_true.default")
def is_any_true(self):
    return _ret(np.any(self), _BOOL)


@_kernel("any.dims")
def any_dims(self, dim=None, keepdim=False):
    return any_dim(self, dim, keepdim)


@_kernel("argmin.default")
def argmin(self, dim=None, keepdim=False):
    if self.ndim == 0:
        return np.zeros((), dtype=_I64)
    if dim is None:
        r = np.argmin(self.reshape(-1))
        return _ret(r, _I64).reshape((1,) * self.ndim if keepdim else ())
    return _ret(np.argmin(self, axis=_wrap(dim, self.ndim), keepdims=keepdim), _I64)


@_kernel("cumsum.default")
def cumsum(self, dim, *, dtype=None):
    dt = _dtype(dtype)
    if dt is None:
        dt = _I64 if self.dtype.kind in "biu" else self.dtype
    ct = _compute_dtype(dt)
    if self.ndim == 0:
        return _ret(_cast(self, dt).copy(), dt)
    return _ret(np.cumsum(_cast(self, ct), axis=_wrap(dim, self.ndim), dtype=ct), dt)


@_kernel("histc.default")
def histc(self, bins=100, min=0, max=0):
    """Counts in `bins` equal bins over [min, max] (both 0: the data's range;
    a value equal to max falls in the last bin, values outside are dropped):
    a static shape whatever the data (MoE routers count tokens per expert)."""
    ct = _compute_dtype(self.dtype)
    x = _cast(self, ct).reshape(-1)
    lo, hi = ct.type(min), ct.type(max)
    if lo == hi and x.size:
        lo, hi = x.min(), x.max()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    keep = x[(x >= lo) & (x <= hi)]
    with np.errstate(all="ignore"):
        pos = ((keep - lo) * ct.type(bins) / (hi - lo)).astype(np.int64)
    counts = np.bincount(np.minimum(pos, bins - 1), minlength=bins)
    return _ret(counts, self.dtype)


def _linspace32(lo: float, hi: float, steps: int, dt) -> np.ndarray:
    """torch.linspace in `dt` as ATen's kernel computes it: start + i * step for
    the first half, end - (steps - 1 - i) * step for the second."""
    start, end = dt.type(lo), dt.type(hi)
    i = np.arange(steps)
    with np.errstate(all="ignore"):
        step = (end - start) / dt.type(max(steps - 1, 1))
        first = start + step * i.astype(dt)
        second = end - step * (steps - 1 - i).astype(dt)
    return np.where(i < steps // 2, first, second).astype(dt)


def _histogram(x: np.ndarray, edges: list, weight, density: bool) -> np.ndarray:
    """Counts (or summed weights) of the points x [N, D] per bin: along axis d,
    bin i is [edges[d][i], edges[d][i + 1]), the last one closed; points with
    a NaN or outside the edges are dropped. `density` divides by the total and
    by each bin's width along every axis."""
    w = None if weight is None else weight.reshape(-1).astype(x.dtype)
    keep = np.ones(x.shape[0], bool)
    for d, e in enumerate(edges):
        keep &= (x[:, d] >= e[0]) & (x[:, d] <= e[-1])
    shape = tuple(len(e) - 1 for e in edges)
    pos = [np.minimum(np.searchsorted(e, x[keep, d], side="right") - 1, len(e) - 2) for d, e in enumerate(edges)]
    flat = np.ravel_multi_index(pos, shape) if pos else np.zeros(0, np.int64)
    hist = np.bincount(flat, weights=None if w is None else w[keep], minlength=math.prod(shape))
    hist = hist.astype(x.dtype).reshape(shape)
    if density:
        with np.errstate(all="ignore"):
            hist = hist / hist.sum(dtype=x.dtype)
            for d, e in enumerate(edges):
                hist = hist / np.diff(e).reshape([-1 if i == d else 1 for i in range(len(edges))])
    return hist.astype(x.dtype)


def _bin_edges(x: np.ndarray, bins, range) -> list:
    """Each axis's `bins[d]` equal bins over range[2d:2d + 2] (default: the data's
    minimum and maximum, widened by 0.5 each way when they are equal), as
    torch.linspace in x's type."""
    edges = []
    for d, n in enumerate(bins):
        if n <= 0:
            raise ValueError(f"torch.histogramdd(): bins must be > 0, but got {n} for dimension {d}")
        if range is not None:
            lo, hi = float(range[2 * d]), float(range[2 * d + 1])
        elif x.shape[0]:
            lo, hi = float(np.min(x[:, d])), float(np.max(x[:, d]))
        else:
            lo, hi = 0.0, 0.0
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(f"torch.histogramdd: dimension {d}'s range [{lo}, {hi}] is not finite")
        if lo > hi:
            raise ValueError(f"torch.histogramdd: min should not exceed max, but got min {lo} max {hi} "
                             f"for dimension {d}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(_linspace32(lo, hi, n + 1, x.dtype))
    return edges


@_kernel("histogram.bin_ct")
def histogram_bin_ct(self, weight=None, *, bins=100, range=None, density=False):
    """torch.histogram with `bins` equal bins (see _bin_edges)."""
    x = self.reshape(-1, 1)
    edges = _bin_edges(x, [bins], range)
    return _histogram(x, edges, weight, density), edges[0]


@_kernel("histogram.bins_tensor")
def histogram_bins_tensor(self, bins, weight=None, *, density=False):
    """torch.histogram over the given (increasing) bin edges."""
    return _histogram(self.reshape(-1, 1), [bins.astype(self.dtype)], weight, density), bins.astype(self.dtype)


# torch.histogramdd: the points are self's last dimension
@_kernel("_histogramdd_bin_edges.default")
def _histogramdd_bin_edges(self, weight=None, *, bins, range=None, density=False):
    return _bin_edges(self.reshape(-1, self.shape[-1]), bins, range)


@_kernel("_histogramdd_from_bin_cts.default")
def _histogramdd_from_bin_cts(self, weight=None, *, bins, range=None, density=False):
    x = self.reshape(-1, self.shape[-1])
    return _histogram(x, _bin_edges(x, bins, range), weight, density)


@_kernel("_histogramdd_from_bin_tensors.default")
def _histogramdd_from_bin_tensors(self, bins, weight=None, *, density=False):
    return _histogram(self.reshape(-1, self.shape[-1]), [b.astype(self.dtype) for b in bins], weight, density)


@_kernel("cumprod.default")
def cumprod(self, dim, *, dtype=None):
    dt = _dtype(dtype)
    if dt is None:
        dt = _I64 if self.dtype.kind in "biu" else self.dtype
    ct = _compute_dtype(dt)
    if self.ndim == 0:
        return _ret(_cast(self, dt).copy(), dt)
    return _ret(np.cumprod(_cast(self, ct), axis=_wrap(dim, self.ndim), dtype=ct), dt)


# -- negative log-likelihood (kept whole by the tracer: lowering/decompositions.py)
# reduction: 0 none, 1 mean, 2 sum (torch's Reduction enum)

def _nll_picked(self, target, weight, ignore_index):
    """Rows of `self` as [N, C], the target class of each (0 where ignored)
    and its weight (0 where ignored); a 1-D input is one row."""
    x = _f32(self).reshape(1, -1) if self.ndim == 1 else _f32(self)
    t = np.asarray(target).reshape(-1).astype(np.int64, copy=False)
    keep = t != ignore_index
    if np.any(keep & ((t < 0) | (t >= x.shape[1]))):
        bad = t[keep & ((t < 0) | (t >= x.shape[1]))][0]
        raise IndexError(f"Target {bad} is out of bounds.")
    safe = np.where(keep, t, 0)
    w = np.ones(len(t), x.dtype) if weight is None else _f32(weight)[safe].astype(x.dtype, copy=False)
    return x, safe, np.where(keep, w, x.dtype.type(0))


@_kernel("nll_loss_forward.default")
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    x, safe, w = _nll_picked(self, target, weight, ignore_index)
    losses = -x[np.arange(len(safe)), safe] * w
    total = w.sum(dtype=x.dtype)
    if reduction == 0:  # a batch's total weight is 0 then, a single row's its weight (as torch)
        if self.ndim == 1:
            return _ret(losses.reshape(()), self.dtype), _ret(total, self.dtype)
        return _ret(losses, self.dtype), _ret(np.zeros((), x.dtype), self.dtype)
    out = losses.sum(dtype=x.dtype)
    if reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = out / total
    return _ret(out, self.dtype), _ret(total, self.dtype)


@_kernel("nll_loss_backward.default")
def nll_loss_backward(grad_output, self, target, weight, total_weight, reduction, ignore_index):
    """The operands first (ATen's schema puts `total_weight` after the
    properties): the executor passes operands in order, properties by name."""
    x, safe, w = _nll_picked(self, target, weight, ignore_index)
    g = _f32(np.asarray(grad_output))
    if reduction == 0:
        scale = g.reshape(-1) if g.ndim else g
    elif reduction == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = g / _f32(np.asarray(total_weight))
    else:
        scale = g
    grad = np.zeros(x.shape, x.dtype)
    grad[np.arange(len(safe)), safe] = -w * scale
    return _ret(grad.reshape(self.shape), self.dtype)
