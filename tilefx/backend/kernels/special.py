"""Ops outside the core-ATen set that models call and the decompositions
keep: special functions and sign manipulation (i0, hypot, copysign,
heaviside), a log-space scan (logcumsumexp), searches in sorted tables
(bucketize, searchsorted), order statistics (kthvalue, median, nanmedian,
cummin) and special functions through scipy.special (Bessel functions, the
Hurwitz zeta, the incomplete gamma functions), computed in double and
rounded: float32 programs run ATen's own kernels (lowering/aten_kernels.py),
so these serve float16/bfloat16 and `TILEFX_KERNELS=numpy`. Dtype rules are
ATen's, as in `_common`.
"""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import (
    _F32,
    _I64,
    _binary,
    _float_unary,
    _result_type,
    _ret,
    _wrap,
    registrar,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)

_I32 = np.dtype(np.int32)


@_kernel("i0.default")
def i0(self):
    """The modified Bessel function of the first kind, order 0."""
    return _float_unary(lambda x: np.i0(x.astype(np.float64)).astype(x.dtype), self)


@_kernel("hypot.default")
def hypot(self, other):
    return _binary(np.hypot, self, other, float_result=True)


@_kernel("logaddexp.default")
def logaddexp(self, other):
    """log(exp(self) + exp(other)) without overflow (numpy's logaddexp)."""
    return _binary(np.logaddexp, self, other, float_result=True)


@_kernel("copysign.Tensor")
def copysign_Tensor(self, other):
    return _binary(np.copysign, self, other, float_result=True)


@_kernel("copysign.Scalar")
def copysign_Scalar(self, other):
    return _binary(np.copysign, self, other, float_result=True)


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


def _scipy_unary(name: str, fn_name: str) -> None:
    """A float unary op computed by scipy.special (float16 in float32, integers as float32)."""

    def kernel(self):
        from scipy import special  # imported on first use: most programs never need it

        fn = getattr(special, fn_name)
        return _float_unary(lambda x: fn(x).astype(x.dtype), self)

    kernel.__name__ = name.split(".")[0]
    KERNELS[name] = kernel


for _name, _fn in {
    "erfinv.default": "erfinv", "erfc.default": "erfc", "lgamma.default": "gammaln",
    "digamma.default": "psi", "special_i0e.default": "i0e", "special_i1.default": "i1",
    "special_i1e.default": "i1e", "special_erfcx.default": "erfcx", "special_ndtri.default": "ndtri",
    "special_bessel_j0.default": "j0", "exp2.default": "exp2",
    "special_bessel_j1.default": "j1", "special_bessel_y0.default": "y0", "special_bessel_y1.default": "y1",
    "special_modified_bessel_i0.default": "i0", "special_modified_bessel_i1.default": "i1",
    "special_modified_bessel_k0.default": "k0", "special_modified_bessel_k1.default": "k1",
}.items():
    _scipy_unary(_name, _fn)


@_kernel("special_scaled_modified_bessel_k0.default")
def special_scaled_modified_bessel_k0(x):
    """exp(x) K0(x) (ATen names this operand x)."""
    from scipy import special

    return _float_unary(lambda v: special.k0e(v).astype(v.dtype), x)


@_kernel("special_scaled_modified_bessel_k1.default")
def special_scaled_modified_bessel_k1(x):
    """exp(x) K1(x)."""
    from scipy import special

    return _float_unary(lambda v: special.k1e(v).astype(v.dtype), x)


@_kernel("special_spherical_bessel_j0.default")
def special_spherical_bessel_j0(x):
    """sin(x) / x, 1 at 0."""
    from scipy import special

    return _float_unary(lambda v: special.spherical_jn(0, v).astype(v.dtype), x)


def _scipy_binary(name: str, fn_name: str) -> None:
    """A float binary op computed by scipy.special (integers give float32)."""

    def kernel(self, other):
        from scipy import special

        return _binary(getattr(special, fn_name), self, other, float_result=True)

    kernel.__name__ = name.split(".")[0]
    KERNELS[name] = kernel


# the Hurwitz zeta function zeta(x, q); the regularized lower and upper incomplete gamma functions
for _name, _fn in {"special_zeta.default": "zeta", "igamma.default": "gammainc",
                   "igammac.default": "gammaincc"}.items():
    _scipy_binary(_name, _fn)


@_kernel("special_airy_ai.default")
def special_airy_ai(x):
    """The Airy function Ai(x)."""
    from scipy import special

    return _float_unary(lambda v: special.airy(v)[0].astype(v.dtype), x)


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

    def kernel(x, n):
        return _binary(values, x, n, float_result=True)
    return kernel


for _name, (_first, _step) in _POLYNOMIALS.items():
    KERNELS[f"special_{_name}.default"] = _polynomial(_first, _step, False)
    if _name.startswith("chebyshev"):
        KERNELS[f"special_shifted_{_name}.default"] = _polynomial(_first, _step, True)


@_kernel("polygamma.default")
def polygamma(self, n):
    from scipy import special

    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    return _float_unary(lambda x: special.polygamma(int(n), x).astype(x.dtype), self)


@_kernel("ldexp.Tensor")
def ldexp_Tensor(self, other):
    """self * 2 ** other, in self's float type (integers give float32)."""
    return _binary(lambda a, b: a * np.exp2(b), self, other, float_result=True)


@_kernel("nextafter.default")
def nextafter(self, other):
    return _binary(np.nextafter, self, other)


@_kernel("frexp.Tensor")
def frexp_Tensor(self):
    mantissa, exponent = np.frexp(self)
    return _ret(mantissa, self.dtype), _ret(exponent, _I32)


@_kernel("gcd.default")
def gcd(self, other):
    return _binary(np.gcd, self, other)


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
