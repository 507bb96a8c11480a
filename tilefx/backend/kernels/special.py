"""Ops outside the core-ATen set that models call and the decompositions
keep: heaviside, a log-space scan (logcumsumexp), searches in sorted tables
(bucketize, searchsorted), order statistics (kthvalue, median, nanmedian,
cummin, cummax), polygamma, frexp and the values of torch.special's
orthogonal polynomials. The special functions that are one call of numpy or
scipy.special (i0, hypot, copysign, the Bessel functions, the Hurwitz zeta,
the incomplete gamma functions, ...) are rows of `alu.py`'s tables, computed
in double and rounded: float32 programs run ATen's own kernels
(lowering/aten_kernels.py), so these serve float16/bfloat16 and
`TILEFX_KERNELS=numpy`. Dtype rules are ATen's, as in `_common`.
"""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import (
    _F32,
    _I64,
    _float_unary,
    _result_type,
    _ret,
    _wrap,
    registrar,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)

_I32 = np.dtype(np.int32)


@_kernel("heaviside.default")
def heaviside(self, values):
    """0 below zero, 1 above, `values` at zero (torch.heaviside)."""
    rt = _result_type(self, values)
    return _ret(np.heaviside(self, values), rt)


@_kernel("logcumsumexp.default")
def logcumsumexp(self, dim):
    rt = self.dtype if self.dtype.kind == "f" else _F32
    ct = _F32 if rt == np.float16 else rt
    if self.ndim == 0:
        return self.astype(rt)
    with np.errstate(all="ignore"):
        r = np.logaddexp.accumulate(self.astype(ct), axis=_wrap(dim, self.ndim))
    return _ret(r, rt)


def _search(sorted_sequence, values, right: bool, out_int32: bool, sorter=None):
    side = "right" if right else "left"
    seq = sorted_sequence if sorter is None else np.take_along_axis(sorted_sequence, sorter, -1)
    if seq.ndim <= 1:
        idx = np.searchsorted(seq, values, side=side)
    else:  # one sorted row per leading index of `values`
        rows = seq.reshape(-1, seq.shape[-1])
        vals = values.reshape(rows.shape[0], -1)
        idx = np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, vals)]).reshape(values.shape)
    return _ret(idx, _I32 if out_int32 else _I64)


@_kernel("bucketize.Tensor")
def bucketize_Tensor(self, boundaries, *, out_int32=False, right=False):
    """The bucket of each value: boundaries[i-1] < x <= boundaries[i] (`right`: <, <=)."""
    return _search(boundaries, self, bool(right), bool(out_int32))


@_kernel("searchsorted.Tensor")
def searchsorted_Tensor(sorted_sequence, self, sorter=None, *, out_int32=False, right=False, side=None):
    if side is not None and side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if side is not None and right and side == "left":
        raise ValueError("searchsorted: side='left' contradicts right=True")
    return _search(sorted_sequence, self, bool(right) or side == "right", bool(out_int32), sorter)


def _select(x: np.ndarray, pos_of, dim: int, keepdim: bool, nan_wins: bool):
    """The value at sorted position pos_of(n_valid) along dim, and its index.
    NaN counts as the largest value; with `nan_wins` a row with a NaN gives its
    first NaN (torch.median), otherwise NaNs are skipped (nanmedian)."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    axis = _wrap(dim, x.ndim)
    moved = np.moveaxis(x, axis, -1)
    order = np.argsort(moved, axis=-1, kind="stable")
    if x.dtype.kind == "f":
        nan = np.isnan(moved)
        count = moved.shape[-1] - nan.sum(-1)
    else:
        nan, count = None, np.full(moved.shape[:-1], moved.shape[-1])
    pos = np.clip(pos_of(count), 0, moved.shape[-1] - 1)
    idx = np.take_along_axis(order, pos[..., None], -1)[..., 0]
    if nan is not None and nan_wins:
        has = nan.any(-1)
        idx = np.where(has, np.argmax(nan, axis=-1), idx)
    vals = np.take_along_axis(moved, idx[..., None], -1)[..., 0]
    if keepdim:
        vals, idx = np.expand_dims(vals, axis), np.expand_dims(idx, axis)
    return _ret(vals, x.dtype), _ret(idx, _I64)


@_kernel("kthvalue.default")
def kthvalue(self, k, dim=-1, keepdim=False):
    n = self.shape[_wrap(dim, self.ndim)] if self.ndim else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue: k = {k} is out of range for a dimension of size {n}")
    return _select(self, lambda count: np.full(np.shape(count), k - 1), dim, keepdim, nan_wins=False)


@_kernel("median.dim")
def median_dim(self, dim, keepdim=False):
    """The lower median ((n - 1) // 2 of the sorted values), NaN if the row has one."""
    n = self.shape[_wrap(dim, self.ndim)] if self.ndim else 1
    return _select(self, lambda count: np.full(np.shape(count), (n - 1) // 2), dim, keepdim, nan_wins=True)


@_kernel("median.default")
def median_default(self):
    return median_dim(self.reshape(-1), 0)[0]


@_kernel("nanmedian.dim")
def nanmedian_dim(self, dim, keepdim=False):
    """The lower median of the values that are not NaN (NaN when all are)."""
    return _select(self, lambda count: (count - 1) // 2, dim, keepdim, nan_wins=False)


@_kernel("nanmedian.default")
def nanmedian_default(self):
    return nanmedian_dim(self.reshape(-1), 0)[0]


# torch.special's orthogonal polynomials of degree n (truncated to an integer;
# negative degrees give 0) by their three-term recurrences in double:
# (P1(x), P(k+1) from k, x, P(k), P(k-1)), and whether x is shifted to 2x - 1
_POLYNOMIALS = {
    "chebyshev_polynomial_t": (lambda x: x, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_polynomial_u": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_polynomial_v": (lambda x: 2 * x - 1, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_polynomial_w": (lambda x: 2 * x + 1, lambda k, x, p, q: 2 * x * p - q),
    "hermite_polynomial_h": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q),
    "hermite_polynomial_he": (lambda x: x, lambda k, x, p, q: x * p - k * q),
    "laguerre_polynomial_l": (lambda x: 1 - x, lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)),
    "legendre_polynomial_p": (lambda x: x, lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)),
}


def _polynomial(first, step, shifted: bool):
    """The values of a polynomial of degree n at x, in double."""

    def values(x, n):
        x = x.astype(np.float64)
        if shifted:
            x = 2 * x - 1
        degree = np.where(np.isfinite(n), n, -1).astype(np.int64)
        x, degree = np.broadcast_arrays(x, degree)
        q, p = np.ones_like(x), first(x)
        out = np.where(degree == 0, 1.0, np.where(degree == 1, p, 0.0))
        for k in range(1, int(degree.max(initial=0))):
            q, p = p, step(k, x, p, q)
            out = np.where(degree == k + 1, p, out)
        return out

    return values


# op name (without overload) -> values(x, n): the kernels are rows of
# kernels/alu.py's FLOAT_BINARY table (integers give float32)
POLYNOMIALS = {
    **{f"special_{name}": _polynomial(first, step, False) for name, (first, step) in _POLYNOMIALS.items()},
    **{f"special_shifted_{name}": _polynomial(first, step, True) for name, (first, step) in _POLYNOMIALS.items()
       if name.startswith("chebyshev")},
}


@_kernel("polygamma.default")
def polygamma(self, n):
    from scipy import special

    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    return _float_unary(lambda x: special.polygamma(int(n), x).astype(x.dtype), self)


@_kernel("frexp.Tensor")
def frexp_Tensor(self):
    mantissa, exponent = np.frexp(self)
    return _ret(mantissa, self.dtype), _ret(exponent, _I32)


@_kernel("signbit.default")
def signbit(self):
    return np.signbit(self) if self.dtype.kind != "b" else np.zeros(self.shape, bool)


@_kernel("cummin.default")
def cummin(self, dim):
    """Running minimum and the index where it was reached (the latest on ties, as torch)."""
    return _cumulative_extreme(self, dim, False)


@_kernel("cummax.default")
def cummax(self, dim):
    """Running maximum and the index where it was reached (the latest on ties, as torch)."""
    return _cumulative_extreme(self, dim, True)


def _cumulative_extreme(self, dim, largest: bool):
    """A NaN, once seen, stays the running value (with its index)."""
    if self.ndim == 0:
        return self.copy(), np.zeros((), _I64)
    axis = _wrap(dim, self.ndim)
    x = np.moveaxis(self, axis, -1)
    vals = np.empty_like(x)
    idx = np.empty(x.shape, _I64)
    best, at = x[..., 0].copy(), np.zeros(x.shape[:-1], _I64)
    for i in range(x.shape[-1]):
        v = x[..., i]
        better = v >= best if largest else v <= best
        take = better | np.isnan(v) if x.dtype.kind == "f" else better
        take &= ~np.isnan(best) if x.dtype.kind == "f" else True
        best = np.where(take, v, best)
        at = np.where(take, i, at)
        vals[..., i], idx[..., i] = best, at
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)
