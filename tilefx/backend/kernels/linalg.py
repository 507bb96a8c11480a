"""Matmul kernels (BLAS through numpy)."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _cast,
    _compute_dtype,
    _promote,
    _result_type,
    _ret,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


def _matmul(a, b):
    rt = _promote(a.dtype, b.dtype)
    ct = _compute_dtype(rt)
    return _ret(np.matmul(_cast(a, ct), _cast(b, ct)), rt)


@_kernel("mm.default")
def mm(self, mat2):
    return _matmul(self, mat2)


@_kernel("bmm.default")
def bmm(self, mat2):
    return _matmul(self, mat2)


@_kernel("addmm.default")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    rt = _result_type(self, mat1, mat2)
    ct = _compute_dtype(rt)
    r = np.matmul(_cast(mat1, ct), _cast(mat2, ct))
    if alpha != 1:
        r *= ct.type(alpha)
    if beta != 0:
        s = _cast(self, ct)
        if beta != 1:
            s = s * ct.type(beta)
        if r.shape == np.broadcast_shapes(r.shape, s.shape):
            r += s
        else:
            r = r + s
    return _ret(r, rt)


