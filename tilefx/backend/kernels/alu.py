"""The one-line elementwise kernels as tables: op name -> numpy function.

An elementwise op whose kernel is "this numpy function under that dtype
rule" is one line in the table of its rule, as in tinygrad's single ALU
table, instead of a wrapper function of its own:

    SAME_UNARY     the result keeps the operand's dtype (abs, neg)
    FLOAT_UNARY    integers and bools give float32 (exp, sin, erf, ...)
    ROUNDING       identity on integers and bools, as in ATen (ceil, ...)
    BINARY         torch's type promotion of the two operands (mul, fmod, ...)
    FLOAT_BINARY   promotion, then integers give float32 (div, atan2, ...)
    COMPARE        compare in the promoted dtype, give bool (eq, lt, ...)
    AS_NUMPY       numpy's own result dtype is ATen's (logical ops, invert)
    ALPHA          `self + alpha * other` forms: the .Tensor and .Scalar overloads

The dtype rules are `_common`'s. Each table's kernels come from one generic
function; their parameters are the schema's arguments, in its order, with
its names (the executor passes properties by name and, when the operands
lead, operands by position), so a row needs no signature of its own. A row
must name an op of `dialects/aten_schema.py`; the op's arguments pick the
template (`_TEMPLATES`), and an op whose arguments have no template is an
error at import. Ops with more than one numpy call, properties or special
cases keep a function in their family module.
"""

from __future__ import annotations

import functools

import numpy as np

from tilefx.backend.kernels._common import (
    _binary,
    _compare,
    _float_unary,
    _ret,
    _same_unary,
)
from tilefx.backend.kernels.elementwise import _erf
from tilefx.backend.kernels.pointwise_math import _no_integer_zero
from tilefx.backend.kernels.special import POLYNOMIALS
from tilefx.dialects.aten_schema import ATEN_SCHEMAS

KERNELS: dict = {}


# ---------------------------------------------------------------------------
# the numpy functions the tables name that numpy does not have as one call
# ---------------------------------------------------------------------------


def _special():
    """scipy.special, imported on first use: 0.1-0.5 s that most programs never need."""
    from scipy import special

    return special


def _scipy_unary(fn_name: str):
    """scipy.special's `fn_name` of one operand, rounded to the operand's dtype
    (float16 computes in float32, integers as float32)."""

    def fn(x):
        return getattr(_special(), fn_name)(x).astype(x.dtype)

    return fn


def _scipy_binary(fn_name: str):
    def fn(a, b):
        return getattr(_special(), fn_name)(a, b)

    return fn


def _sigmoid(x):
    return np.reciprocal(np.exp(-x) + x.dtype.type(1))


def _fmod(x, y):
    if x.dtype.kind in "iu":
        _no_integer_zero(y)
    return np.fmod(x, y)


def _remainder(x, y):
    if x.dtype.kind in "iu":
        _no_integer_zero(y)
    return np.remainder(x, y)


def _shift(left: bool):
    """torch's shifts of integers: a count of the type's width or more gives 0 (left)
    or the sign fill (right, arithmetic for signed types), as torch's CPU kernels;
    numpy's own shifts by such counts are the C operators' undefined behaviour."""
    def fn(a, n):
        bits = a.dtype.itemsize * 8
        n = n.astype(a.dtype, copy=False)
        inside = np.clip(n, 0, bits - 1)
        if left:
            out = np.left_shift(a, inside)
            return np.where(n >= bits, np.zeros_like(out), out)
        return np.right_shift(a, inside)  # a count past the width shifts bits - 1: the sign fill
    return fn


_LEFT_SHIFT, _RIGHT_SHIFT = _shift(True), _shift(False)


# ---------------------------------------------------------------------------
# the tables
# ---------------------------------------------------------------------------

SAME_UNARY = {
    "abs.default": np.abs,
    "neg.default": np.negative,
}

FLOAT_UNARY = {
    "cos.default": np.cos,
    "sin.default": np.sin,
    "tan.default": np.tan,
    "acos.default": np.arccos,
    "asin.default": np.arcsin,
    "atan.default": np.arctan,
    "cosh.default": np.cosh,
    "sinh.default": np.sinh,
    "tanh.default": np.tanh,
    "acosh.default": np.arccosh,
    "asinh.default": np.arcsinh,
    "atanh.default": np.arctanh,
    "exp.default": np.exp,
    "expm1.default": np.expm1,
    "log.default": np.log,
    "log10.default": np.log10,
    "log1p.default": np.log1p,
    "log2.default": np.log2,
    "sqrt.default": np.sqrt,
    "reciprocal.default": np.reciprocal,
    "rsqrt.default": lambda x: np.reciprocal(np.sqrt(x)),
    "sigmoid.default": _sigmoid,
    "erf.default": _erf,
    # the modified Bessel function of the first kind, order 0
    "i0.default": lambda x: np.i0(x.astype(np.float64)).astype(x.dtype),
    "erfinv.default": _scipy_unary("erfinv"),
    "erfc.default": _scipy_unary("erfc"),
    "lgamma.default": _scipy_unary("gammaln"),
    "digamma.default": _scipy_unary("psi"),
    "exp2.default": _scipy_unary("exp2"),
    "special_i0e.default": _scipy_unary("i0e"),
    "special_i1.default": _scipy_unary("i1"),
    "special_i1e.default": _scipy_unary("i1e"),
    "special_erfcx.default": _scipy_unary("erfcx"),
    "special_ndtri.default": _scipy_unary("ndtri"),
    "special_bessel_j0.default": _scipy_unary("j0"),
    "special_bessel_j1.default": _scipy_unary("j1"),
    "special_bessel_y0.default": _scipy_unary("y0"),
    "special_bessel_y1.default": _scipy_unary("y1"),
    "special_modified_bessel_i0.default": _scipy_unary("i0"),
    "special_modified_bessel_i1.default": _scipy_unary("i1"),
    "special_modified_bessel_k0.default": _scipy_unary("k0"),
    "special_modified_bessel_k1.default": _scipy_unary("k1"),
    "special_scaled_modified_bessel_k0.default": _scipy_unary("k0e"),  # exp(x) K0(x)
    "special_scaled_modified_bessel_k1.default": _scipy_unary("k1e"),  # exp(x) K1(x)
    # sin(x) / x, 1 at 0
    "special_spherical_bessel_j0.default": lambda v: _special().spherical_jn(0, v).astype(v.dtype),
    # the Airy function Ai(x)
    "special_airy_ai.default": lambda v: _special().airy(v)[0].astype(v.dtype),
}

ROUNDING = {
    "ceil.default": np.ceil,
    "floor.default": np.floor,
    "round.default": np.round,  # half to even, like torch.round
    "trunc.default": np.trunc,
}

BINARY = {
    "mul.Tensor": np.multiply,
    "mul.Scalar": np.multiply,
    "pow.Tensor_Tensor": np.power,
    "maximum.default": np.maximum,
    "minimum.default": np.minimum,
    "fmod.Tensor": _fmod,
    "fmod.Scalar": _fmod,
    "remainder.Tensor": _remainder,
    "remainder.Scalar": _remainder,
    "bitwise_and.Tensor": np.bitwise_and,
    "bitwise_and.Scalar": np.bitwise_and,
    "bitwise_or.Tensor": np.bitwise_or,
    "bitwise_or.Scalar": np.bitwise_or,
    "bitwise_xor.Tensor": np.bitwise_xor,
    "bitwise_xor.Scalar": np.bitwise_xor,
    "bitwise_left_shift.Tensor": _LEFT_SHIFT,
    "bitwise_left_shift.Tensor_Scalar": _LEFT_SHIFT,
    "bitwise_right_shift.Tensor": _RIGHT_SHIFT,
    "bitwise_right_shift.Tensor_Scalar": _RIGHT_SHIFT,
    "nextafter.default": np.nextafter,
    "gcd.default": np.gcd,
    "tanh_backward.default": lambda g, y: g * (y.dtype.type(1) - y * y),
    "sigmoid_backward.default": lambda g, y: g * (y.dtype.type(1) - y) * y,
}

FLOAT_BINARY = {
    "div.Tensor": np.true_divide,
    "div.Scalar": np.true_divide,
    "atan2.default": np.arctan2,
    "hypot.default": np.hypot,
    "logaddexp.default": np.logaddexp,  # log(exp(self) + exp(other)) without overflow
    "copysign.Tensor": np.copysign,
    "copysign.Scalar": np.copysign,
    "ldexp.Tensor": lambda a, b: a * np.exp2(b),  # self * 2 ** other, in self's float type
    # the Hurwitz zeta function zeta(x, q); the regularized lower and upper incomplete gamma functions
    "special_zeta.default": _scipy_binary("zeta"),
    "igamma.default": _scipy_binary("gammainc"),
    "igammac.default": _scipy_binary("gammaincc"),
    **{f"{name}.default": values for name, values in POLYNOMIALS.items()},
}

COMPARE = {
    f"{name}.{overload}": fn
    for name, fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                     ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal))
    for overload in ("Tensor", "Scalar")
}

AS_NUMPY = {
    "bitwise_not.default": np.invert,
    "logical_not.default": np.logical_not,
    "logical_and.default": np.logical_and,
    "logical_or.default": np.logical_or,
    "logical_xor.default": np.logical_xor,
}

# `self + alpha * other`: each gives its .Tensor overload (alpha keyword-only,
# as ATen's `add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1)`) and
# its .Scalar overload (alpha positional)
ALPHA = {
    "add": np.add,
    "sub": np.subtract,
}


# ---------------------------------------------------------------------------
# the generic functions the kernels are made by
# ---------------------------------------------------------------------------


def _rounding(fn, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "biu":
        return x.copy()
    return _same_unary(fn, x)


def _as_numpy(fn, *operands) -> np.ndarray:
    return _ret(fn(*operands))


def _with_alpha(op, a, b, alpha) -> np.ndarray:
    def fn(x, y):  # x, y already in the compute dtype
        if alpha != 1:
            y = y * x.dtype.type(alpha)
        return op(x, y)

    return _binary(fn, a, b)


RULES = (
    (SAME_UNARY, _same_unary),
    (FLOAT_UNARY, _float_unary),
    (ROUNDING, _rounding),
    (BINARY, _binary),
    (FLOAT_BINARY, functools.partial(_binary, float_result=True)),
    (COMPARE, _compare),
    (AS_NUMPY, _as_numpy),
)


# One template per argument list of the schema (names in order): a kernel
# calling rule(fn, *arguments), the call a wrapper function would make.
def _self(rule, fn):
    def kernel(self):
        return rule(fn, self)
    return kernel


def _x(rule, fn):
    def kernel(x):
        return rule(fn, x)
    return kernel


def _self_other(rule, fn):
    def kernel(self, other):
        return rule(fn, self, other)
    return kernel


def _self_exponent(rule, fn):
    def kernel(self, exponent):
        return rule(fn, self, exponent)
    return kernel


def _grad_output_output(rule, fn):
    def kernel(grad_output, output):
        return rule(fn, grad_output, output)
    return kernel


def _x_n(rule, fn):
    def kernel(x, n):
        return rule(fn, x, n)
    return kernel


_TEMPLATES = {
    ("self",): _self,
    ("x",): _x,
    ("self", "other"): _self_other,
    ("self", "exponent"): _self_exponent,
    ("grad_output", "output"): _grad_output_output,
    ("x", "n"): _x_n,
}


def _alpha_tensor(op):
    def kernel(self, other, *, alpha=1):
        return _with_alpha(op, self, other, alpha)
    return kernel


def _alpha_scalar(op):
    def kernel(self, other, alpha=1):
        return _with_alpha(op, self, other, alpha)
    return kernel


def _arguments(name: str) -> tuple[str, ...]:
    schema = ATEN_SCHEMAS.get(name)
    if schema is None:
        raise ValueError(f"kernel table row {name!r} names no op of dialects/aten_schema.py")
    return tuple(a.name for a in schema.args)


def _enter(name: str, kernel) -> None:
    if name in KERNELS:
        raise ValueError(f"kernel table rows for {name} in two tables")
    kernel.__name__ = kernel.__qualname__ = name.replace(".", "_")
    KERNELS[name] = kernel


def _make_kernels() -> None:
    for table, rule in RULES:
        for name, fn in table.items():
            arguments = _arguments(name)
            template = _TEMPLATES.get(arguments)
            defaults = [a.name for a in ATEN_SCHEMAS[name].args if a.has_default]
            if template is None or defaults:
                why = f"defaults for {', '.join(defaults)}" if defaults else "no template for the arguments " \
                    + ", ".join(arguments)
                raise ValueError(f"kernel table row {name}: {why} (give the op a function in its family module)")
            _enter(name, template(rule, fn))
    for name, op in ALPHA.items():
        for overload, template in (("Tensor", _alpha_tensor), ("Scalar", _alpha_scalar)):
            if _arguments(f"{name}.{overload}") != ("self", "other", "alpha"):
                raise ValueError(f"kernel table row {name}.{overload}: the schema's arguments are not "
                                 "(self, other, alpha)")
            _enter(f"{name}.{overload}", template(op))


_make_kernels()
