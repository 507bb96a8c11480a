"""Elementwise math beyond arithmetic: sign and classification, integer
division modes, clamping by tensors, powers of a scalar, masked fills,
bounded activations and their backwards. Trigonometric, hyperbolic,
logarithmic, rounding, bitwise and logical ops that are one numpy call are
rows of `alu.py`'s tables.

Dtype rules are ATen's (see `_common`): transcendental functions make
integers float32, rounding/sign keep the dtype, float16 computes in float32.
"""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import (
    _BOOL,
    _F32,
    _binary,
    _cast,
    _category,
    _compute_dtype,
    _f32,
    _float_unary,
    _result_type,
    _ret,
    _same_unary,
    registrar,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


def _sign(x):
    """torch.sign: 0 for NaN (numpy's sign keeps NaN)."""
    r = np.sign(x)
    return np.where(np.isnan(r), r.dtype.type(0), r) if r.dtype.kind == "f" else r


@_kernel("sign.default")
def sign(self):
    if self.dtype == _BOOL:
        return self.copy()
    return _same_unary(_sign, self)


@_kernel("isnan.default")
def isnan(self):
    if self.dtype.kind != "f":
        return np.zeros(self.shape, _BOOL)
    return _ret(np.isnan(self))


@_kernel("isinf.default")
def isinf(self):
    if self.dtype.kind != "f":
        return np.zeros(self.shape, _BOOL)
    return _ret(np.isinf(self))


@_kernel("atan2.out")
def atan2_out(self, other, out):
    """The functional form of `atan2(..., out=out)`: a new tensor of out's dtype
    (the write-back to `out` is the frontend's, as for every out= form)."""
    r = _binary(np.arctan2, self, other, float_result=True)
    return _ret(r, out.dtype)


def _div_mode(a, b, rounding_mode):
    if rounding_mode is None:
        return _binary(np.true_divide, a, b, float_result=True)

    def fn(x, y):
        if x.dtype.kind in "iu":
            _no_integer_zero(y)
            if rounding_mode == "floor":
                return np.floor_divide(x, y)
            q = np.floor_divide(np.abs(x), np.abs(y))  # trunc: toward zero
            return np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)
        q = np.true_divide(x, y)
        if rounding_mode == "floor":
            # ATen's floor division: floor(x / y) corrected for x - q * y
            return np.floor_divide(x, y)
        return np.trunc(q)

    if rounding_mode not in ("trunc", "floor"):
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    return _binary(fn, a, b)


@_kernel("div.Tensor_mode")
def div_Tensor_mode(self, other, *, rounding_mode):
    return _div_mode(self, other, rounding_mode)


@_kernel("div.Scalar_mode")
def div_Scalar_mode(self, other, *, rounding_mode):
    return _div_mode(self, other, rounding_mode)


def _no_integer_zero(y) -> None:
    """Integer division, floor division and remainder by zero raise in
    torch (numpy returns 0 with a warning): the user's data, reported as the
    op's error."""
    if np.any(np.asarray(y) == 0):
        raise ZeroDivisionError("ZeroDivisionError")


@_kernel("clamp.Tensor")
def clamp_Tensor(self, min=None, max=None):  # noqa: A002 - schema names
    rt = _result_type(self, min, max)
    ct = _compute_dtype(rt)
    r = _cast(self, ct)
    if min is not None:
        r = np.maximum(r, _cast(min, ct))
    if max is not None:
        r = np.minimum(r, _cast(max, ct))
    if r is self:
        r = r.copy()
    return _ret(np.broadcast_to(r, np.broadcast_shapes(*[np.shape(v) for v in (self, min, max)
                                                          if v is not None])).copy(), rt)


@_kernel("pow.Scalar")
def pow_Scalar(exponent, self):
    rt = _result_type(exponent, self)
    if _category(rt) < 2 and isinstance(self, float):
        rt = _F32
    ct = _compute_dtype(rt)
    with np.errstate(all="ignore"):
        r = np.power(ct.type(self), _cast(exponent, ct))
    return _ret(r, rt)


@_kernel("masked_fill.Scalar")
def masked_fill_Scalar(self, mask, value):
    fill = np.asarray(value).astype(self.dtype)
    return _ret(np.where(mask, fill, self), self.dtype)


@_kernel("hardtanh.default")
def hardtanh(self, min_val=-1, max_val=1):
    x = _f32(self)
    t = x.dtype.type
    r = np.minimum(np.maximum(x, t(min_val)), t(max_val))
    r = np.where(np.isnan(x), x, r) if x.dtype.kind == "f" else r
    return _ret(r, self.dtype)


@_kernel("hardtanh_backward.default")
def hardtanh_backward(grad_output, self, min_val, max_val):
    """The gradient passes where min_val < x < max_val (ATen: zero at the bounds)."""
    rt = _result_type(grad_output, self)
    g = _cast(grad_output, rt)
    inside = (self > min_val) & (self < max_val)
    return _ret(np.where(inside, g, rt.type(0)), rt)


@_kernel("elu.default")
def elu(self, alpha=1, scale=1, input_scale=1):
    def fn(x):
        t = x.dtype.type
        neg = t(alpha) * np.expm1(x * t(input_scale))
        return t(scale) * np.where(x > 0, x, neg)

    return _float_unary(fn, self)


@_kernel("elu_backward.default")
def elu_backward(grad_output, self_or_result, alpha, scale, input_scale, is_result):
    rt = _result_type(grad_output, self_or_result)
    ct = _compute_dtype(rt)
    g, y = _cast(grad_output, ct), _cast(self_or_result, ct)
    t = ct.type
    if is_result:  # y = scale * alpha * (exp(x * s) - 1) for y <= 0
        neg = g * t(input_scale) * (y + t(alpha * scale))
        r = np.where(y <= 0, neg, g * t(scale))
    else:
        neg = g * t(input_scale * alpha * scale) * np.exp(y * t(input_scale))
        r = np.where(y <= 0, neg, g * t(scale))
    return _ret(r, rt)
