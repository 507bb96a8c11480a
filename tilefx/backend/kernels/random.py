"""Random kernels: dropout, drawn from the executor's seeded generator."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _BOOL,
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


