"""Elementwise kernels with more than a numpy call: powers, shifts, selection,
clamping, activations and their backwards. The one-call arithmetic,
comparisons and unary math are rows of `alu.py`'s tables."""

from __future__ import annotations

import math

import numpy as np

from tilefx.backend.kernels._common import in_chunks, registrar
from tilefx.backend.kernels._common import (
    _BOOL,
    _binary,
    _cast,
    _compute_dtype,
    _f32,
    _float_unary,
    _result_type,
    _ret,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


@_kernel("pow.Tensor_Scalar")
def pow_Tensor_Scalar(self, exponent):
    def fn(x, e):
        if x.dtype.kind == "f" and e == 2:
            return x * x
        return np.power(x, e)

    return _binary(fn, self, exponent)


def _shift(self, other, left: bool):
    """ATen's shifts of an integer tensor by a scalar: a count past the width (or
    negative) gives 0, or the sign for a right shift of a negative; bool shifts as int64."""
    if self.dtype.kind == "f":
        raise ValueError(f"shifts are not implemented for {self.dtype} tensors (as in torch)")
    if self.dtype.kind == "b":
        self = self.astype(np.int64)
    n = int(other)
    bits = self.dtype.itemsize * 8
    if n < 0 or n >= bits:
        return _ret(np.zeros_like(self) if left or self.dtype.kind == "u" else
                    np.where(self < 0, -1, 0), self.dtype)
    out = np.left_shift(self, self.dtype.type(n)) if left else np.right_shift(self, self.dtype.type(n))
    return _ret(out, self.dtype)


@_kernel("__lshift__.Scalar")
def __lshift___Scalar(self, other):
    return _shift(self, other, True)


@_kernel("__rshift__.Scalar")
def __rshift___Scalar(self, other):
    return _shift(self, other, False)


_INT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_SELECT_MIN = 4096  # below: np.where (1.6 us against 17 for 64 elements)


def _select(cond: np.ndarray, a, b, dt: np.dtype) -> np.ndarray:
    """np.where(cond, a, b) in dtype `dt`, by bit masks: the bits of `a` where
    cond, of `b` elsewhere, so NaNs, infinities and signed zeros are kept
    exactly. np.where branches per element and a random mask (ReLU's) makes
    the branch mispredict: 254 us against 39 for 65,536 float32."""
    shape = np.broadcast_shapes(np.shape(cond), np.shape(a), np.shape(b))
    if math.prod(shape) < _SELECT_MIN:  # its five numpy calls cost more than mispredictions
        return np.where(cond, np.asarray(a, dt), np.asarray(b, dt))
    it = _INT_OF_SIZE[dt.itemsize]
    take_a = np.broadcast_to(np.subtract(False, cond, dtype=it), shape)  # all ones where cond
    a_bits = np.asarray(a, dt).view(it)
    b_bits = np.asarray(b, dt).view(it)
    if not b_bits.any() and b_bits.ndim == 0:  # `where(c, x, 0)`: one pass
        return np.bitwise_and(a_bits, take_a).view(dt)
    out = np.bitwise_and(a_bits, take_a)
    if out.shape != shape:
        out = np.broadcast_to(out, shape).copy()
    out |= np.bitwise_and(b_bits, np.invert(take_a))
    return out.view(dt)


@_kernel("where.self")
def where_self(condition, self, other):
    rt = _result_type(self, other)
    ct = _compute_dtype(rt)
    cond = condition if condition.dtype == _BOOL else condition.astype(_BOOL)
    if ct.itemsize in _INT_OF_SIZE and ct.kind in "fiub":
        return _ret(_select(cond, _cast(self, ct), _cast(other, ct), np.dtype(ct)), rt)
    return _ret(np.where(cond, _cast(self, ct), _cast(other, ct)), rt)


@_kernel("clamp.default")
def clamp(self, min=None, max=None):  # noqa: A002 - schema names
    rt = _result_type(self, min, max)
    ct = _compute_dtype(rt)
    r = _cast(self, ct)
    with np.errstate(invalid="ignore"):
        if min is not None:
            r = np.maximum(r, ct.type(min))
        if max is not None:
            r = np.minimum(r, ct.type(max))
    if r is self:
        r = r.copy()
    return _ret(r, rt)


# erf(x) ~ x P(x^2) / Q(x^2) on [-4, 4] (erf(+-4) is +-1 in float32): the
# float32 rational approximation of Eigen and XLA (`generic_fast_erf_float`)
_ERF_NUM = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))
_ERF_DEN = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))


def _horner(x2: np.ndarray, coeffs: tuple, acc: np.ndarray) -> np.ndarray:
    np.multiply(x2, coeffs[0], out=acc)
    for c in coeffs[1:-1]:
        acc += c
        acc *= x2
    acc += coeffs[-1]
    return acc


def _by_chunks(x: np.ndarray, body, scratch: int) -> np.ndarray:
    """A fresh float32 array of x's shape whose every chunk is body(x_chunk,
    out_chunk, *scratch_chunks): the ~20 passes of a polynomial run on data in
    cache instead of memory (1.5x faster on 2^20 elements)."""
    out = np.empty(x.shape, np.float32)
    in_chunks(body, [x, out], scratch)
    return out


def _erf_chunk(x, out, xc, x2, den):
    np.clip(x, np.float32(-4), np.float32(4), out=xc)  # NaN stays NaN
    np.square(xc, out=x2)
    _horner(x2, _ERF_NUM, out)
    out *= xc
    out /= _horner(x2, _ERF_DEN, den)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf; float32 by a rational approximation in a few in-place passes.

    scipy.special.erf's float32 loop goes through the double routine: 76 ns
    an element measured, the dominant cost of GELU and its backward. The
    rational form (relative error <= 4.5e-7 against float64 erf, no
    cancellation near 0) is ~12x faster; other dtypes keep scipy."""
    if x.dtype != np.float32:
        from scipy.special import erf  # imported here: 0.1-0.5 s that most programs never need

        return erf(x)
    return _by_chunks(np.asarray(x, order="C"), _erf_chunk, 3)


@_kernel("relu.default")
def relu(self):
    if self.dtype == _BOOL:
        return self.copy()
    return _ret(np.maximum(self, self.dtype.type(0)))


@_kernel("leaky_relu.default")
def leaky_relu(self, negative_slope=0.01):
    x = _f32(self)
    return _ret(np.where(x > 0, x, x * x.dtype.type(negative_slope)), self.dtype)


_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_GELU_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
_GELU_KAPPA = 0.044715


@_kernel("gelu.default")
def gelu(self, *, approximate="none"):
    def fn(x):
        t = x.dtype.type
        if approximate == "tanh":
            inner = t(_GELU_BETA) * (x + t(_GELU_KAPPA) * (x * x * x))
            return t(0.5) * x * (t(1) + np.tanh(inner))
        if x.dtype != np.float32:
            r = _erf(x * t(_SQRT1_2))  # a fresh array: finish in place
            r += t(1)
            r *= x
            r *= t(0.5)
            return r

        def chunk(xs, out, u, xc, x2, den):  # 0.5 x (1 + erf(x / sqrt 2)), chunk by chunk
            np.multiply(xs, t(_SQRT1_2), out=u)
            _erf_chunk(u, out, xc, x2, den)
            out += t(1)
            out *= xs
            out *= t(0.5)

        return _by_chunks(np.asarray(x, order="C"), chunk, 4)

    return _float_unary(fn, self)


@_kernel("gelu_backward.default")
def gelu_backward(grad_output, self, *, approximate="none"):
    rt = _result_type(grad_output, self)
    ct = _compute_dtype(rt)
    g, x = _cast(grad_output, ct), _cast(self, ct)
    t = ct.type
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            x_sq = x * x
            inner = t(_GELU_BETA) * (x + t(_GELU_KAPPA) * x_sq * x)
            th = np.tanh(inner)
            left = t(0.5) * x
            right = t(1) + th
            left_d = t(0.5) * right
            right_d = left * (t(1) - th * th) * t(_GELU_BETA) * (t(1) + t(3 * _GELU_KAPPA) * x_sq)
            r = g * (left_d + right_d)
        else:
            cdf = t(0.5) * (t(1) + _erf(x * t(_SQRT1_2)))
            pdf = np.exp(t(-0.5) * x * x) * t(_INV_SQRT_2PI)
            r = g * (cdf + x * pdf)
    return _ret(r, rt)


@_kernel("threshold_backward.default")
def threshold_backward(grad_output, self, threshold):
    rt = _result_type(grad_output, self)
    if rt.itemsize in _INT_OF_SIZE:  # 0 where self <= threshold, the gradient's bits elsewhere
        return _ret(_select(~(self <= threshold), _cast(grad_output, rt), rt.type(0), np.dtype(rt)), rt)
    return _ret(np.where(self <= threshold, rt.type(0), _cast(grad_output, rt)), rt)


