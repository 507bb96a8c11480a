"""Kernels that order values: sort, topk, and max/min along a dimension
with their indices."""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import _I64, _ret, _wrap, registrar

KERNELS: dict = {}
_kernel = registrar(KERNELS)


def _order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort along `axis`; NaN counts as the largest value (ATen)."""
    if x.dtype.kind == "b":
        x = x.astype(np.int8)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    moved = np.moveaxis(x, axis, -1)
    if x.dtype.kind == "f":
        nan = np.isnan(moved)
        key = np.where(nan, 0, moved)
        # lexsort: last key is primary: NaNs first, then larger values first
        idx = np.lexsort((-key.astype(np.float64), ~nan), axis=-1)
    else:
        idx = np.lexsort((-moved.astype(np.float64),), axis=-1)
    return np.moveaxis(idx, -1, axis)


@_kernel("sort.default")
def sort(self, dim=-1, descending=False):
    if self.ndim == 0:
        return self.copy(), np.zeros((), _I64)
    axis = _wrap(dim, self.ndim)
    idx = _order(self, axis, descending)
    return _ret(np.take_along_axis(self, idx, axis)), _ret(idx, _I64)


@_kernel("sort.stable")
def sort_stable(self, stable, dim=-1, descending=False):
    """Equal values keep their order whatever `stable` says (the numpy sort is stable)."""
    return sort(self, dim, descending)


@_kernel("topk.default")
def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - schema name
    if self.ndim == 0:
        return self.copy(), np.zeros((), _I64)
    axis = _wrap(dim, self.ndim)
    if k > self.shape[axis]:
        raise ValueError(f"topk: k ({k}) is larger than dimension {axis} ({self.shape[axis]})")
    idx = np.take(_order(self, axis, largest), np.arange(k), axis=axis)
    return _ret(np.take_along_axis(self, idx, axis)), _ret(idx, _I64)


def _extreme(x, dim, keepdim, largest):
    if x.ndim == 0:
        return x.copy(), np.zeros((), _I64)
    axis = _wrap(dim, x.ndim)
    # NaN wins (propagates), like ATen: np.argmax/argmin give the first NaN
    idx = np.argmax(x, axis=axis, keepdims=True) if largest else np.argmin(x, axis=axis, keepdims=True)
    vals = np.take_along_axis(x, idx, axis)
    if not keepdim:
        vals, idx = np.squeeze(vals, axis), np.squeeze(idx, axis)
    return _ret(vals), _ret(idx, _I64)


@_kernel("max.dim")
def max_dim(self, dim, keepdim=False):
    return _extreme(self, dim, keepdim, True)


@_kernel("min.dim")
def min_dim(self, dim, keepdim=False):
    return _extreme(self, dim, keepdim, False)


def _extreme_all(x: np.ndarray, largest: bool) -> np.ndarray:
    """max()/min() over every element, as a 0-d tensor of x's dtype (NaN wins)."""
    if x.size == 0:
        raise ValueError(f"{'max' if largest else 'min'}(): expected a non-empty tensor (an empty one "
                         "has no maximum or minimum; pass a dim to reduce an empty dimension)")
    return _ret(np.max(x) if largest else np.min(x), x.dtype)


@_kernel("max.default")
def max_default(self):
    return _extreme_all(self, True)


@_kernel("min.default")
def min_default(self):
    return _extreme_all(self, False)
