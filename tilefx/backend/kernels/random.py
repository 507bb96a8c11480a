"""Random kernels: dropout, drawn from the executor's seeded generator."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _BOOL,
    _F32,
    _I64,
    _f32,
    _ret,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------


@_kernel("native_dropout.default")
def native_dropout(input, p, train, *, rng=None):
    """train True or None: keep each element with probability 1 - p,
    mask = rng.random(shape) >= p, scaled by 1 / (1 - p); train False:
    identity and an all-True mask. `rng` (np.random.Generator) makes it
    reproducible; None means a fresh default_rng(0)."""
    if rng is None:
        rng = np.random.default_rng(0)
    if train is False:
        return input.copy(), np.ones(input.shape, dtype=_BOOL)
    if p >= 1:
        return np.zeros_like(input), np.zeros(input.shape, dtype=_BOOL)
    mask = rng.random(input.shape) >= p
    x = _f32(input)
    out = x * mask * x.dtype.type(1.0 / (1.0 - p))
    return _ret(out, input.dtype), _ret(mask)


@_kernel("native_dropout_backward.default")
def native_dropout_backward(grad_output, mask, scale):
    g = _f32(grad_output)
    return _ret(g * (mask.astype(g.dtype) * g.dtype.type(scale)), grad_output.dtype)




# ---------------------------------------------------------------------------
# sampling: every kernel draws from `rng`, the executor's generator for this
# replica (seeded from Options.randomSeed); None means default_rng(0)
# ---------------------------------------------------------------------------


def _gen(rng):
    return np.random.default_rng(0) if rng is None else rng


def _float_dtype(dtype, like=None):
    if dtype is not None:
        return np.dtype(dtype)
    if like is not None and like.dtype.kind == "f":
        return like.dtype
    return _F32


@_kernel("rand.default")
def rand(size, *, dtype=None, rng=None):
    """Uniform on [0, 1)."""
    return _gen(rng).random(tuple(size), dtype=np.float32).astype(_float_dtype(dtype))


@_kernel("randn.default")
def randn(size, *, dtype=None, rng=None):
    """Standard normal."""
    return _gen(rng).standard_normal(tuple(size), dtype=np.float32).astype(_float_dtype(dtype))


@_kernel("rand_like.default")
def rand_like(self, *, dtype=None, rng=None):
    return rand(self.shape, dtype=_float_dtype(dtype, self), rng=rng)


@_kernel("randn_like.default")
def randn_like(self, *, dtype=None, rng=None):
    return randn(self.shape, dtype=_float_dtype(dtype, self), rng=rng)


def _randint(low, high, size, dtype, rng):
    if high <= low:
        raise ValueError(f"randint: empty range [{low}, {high})")
    dt = _I64 if dtype is None else np.dtype(dtype)
    return _gen(rng).integers(low, high, tuple(size)).astype(dt)


@_kernel("randint.low")
def randint_low(low, high, size, *, dtype=None, rng=None):
    """Integers uniform on [low, high); int64 unless dtype says otherwise."""
    return _randint(low, high, size, dtype, rng)


@_kernel("randint.default")
def randint_default(high, size, *, dtype=None, rng=None):
    return _randint(0, high, size, dtype, rng)


@_kernel("randint_like.default")
def randint_like(self, high, *, dtype=None, rng=None):
    return _randint(0, high, self.shape, self.dtype if dtype is None else dtype, rng)


@_kernel("randperm.default")
def randperm(n, *, dtype=None, rng=None):
    """A random permutation of 0..n-1 (int64 unless dtype says otherwise)."""
    return _gen(rng).permutation(n).astype(_I64 if dtype is None else np.dtype(dtype))


@_kernel("normal_functional.default")
def normal_functional(self, mean=0.0, std=1.0, *, rng=None):
    """A tensor like `self` of N(mean, std^2) samples."""
    z = _gen(rng).standard_normal(self.shape, dtype=np.float32)
    return _ret(z * np.float32(std) + np.float32(mean), _float_dtype(None, self))


def _normal(mean, std, rng):
    m, s = np.asarray(mean), np.asarray(std)
    shape = np.broadcast_shapes(m.shape, s.shape)
    z = _gen(rng).standard_normal(shape, dtype=np.float32)
    dt = m.dtype if isinstance(mean, np.ndarray) else s.dtype
    return _ret(z * _f32(s).astype(np.float32) + _f32(m).astype(np.float32), dt)


@_kernel("normal.Tensor_float")
def normal_Tensor_float(mean, std=1.0, *, rng=None):
    return _normal(mean, std, rng)


@_kernel("normal.float_Tensor")
def normal_float_Tensor(std, mean, *, rng=None):
    return _normal(mean, std, rng)


@_kernel("normal.Tensor_Tensor")
def normal_Tensor_Tensor(mean, std, *, rng=None):
    return _normal(mean, std, rng)


@_kernel("normal.float_float")
def normal_float_float(mean, std, size, *, dtype=None, rng=None):
    """`torch.normal(mean, std, size)`: N(mean, std^2) samples of that size."""
    z = _gen(rng).standard_normal(tuple(size), dtype=np.float32)
    return _ret(z * np.float32(std) + np.float32(mean), _float_dtype(dtype))


@_kernel("uniform.default")
def uniform(self, from_=0.0, to=1.0, *, rng=None):
    """A tensor like `self` uniform on [from, to) (`from` is a Python keyword:
    the executor passes it as `from_`)."""
    u = _gen(rng).random(self.shape, dtype=np.float32)
    return _ret(np.float32(from_) + u * np.float32(to - from_), _float_dtype(None, self))


@_kernel("bernoulli.p")
def bernoulli_p(self, p, *, rng=None):
    """1 with probability p, else 0, in self's dtype."""
    return (_gen(rng).random(self.shape) < p).astype(self.dtype)


@_kernel("bernoulli.Tensor")
def bernoulli_Tensor(self, p, *, rng=None):
    probs = np.broadcast_to(_f32(p), self.shape)
    return (_gen(rng).random(self.shape) < probs).astype(self.dtype)


@_kernel("exponential.default")
def exponential(self, lambd=1.0, *, rng=None):
    return _ret(_gen(rng).exponential(1.0 / lambd, self.shape), _float_dtype(None, self))
