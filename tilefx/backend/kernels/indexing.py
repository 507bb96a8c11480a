"""Indexing kernels beyond gather/scatter: index_select, masked_scatter,
scatter_reduce, embedding bags, and the ops whose result shape depends on
the data (nonzero, _local_scalar_dense), which the executor can run but the
torch frontend rejects (the IR needs static shapes)."""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import _I64, _cast, _f32, _ret, _ufunc_at, _wrap, registrar
from tilefx.backend.kernels.views import _scatter_index

KERNELS: dict = {}
_kernel = registrar(KERNELS)


@_kernel("index_select.default")
def index_select(self, index, dim):
    if self.ndim == 0:
        return self.reshape(1)[index.reshape(-1)].reshape(index.shape if index.ndim else ())
    return np.take(self, index.reshape(-1), axis=_wrap(dim, self.ndim))


@_kernel("masked_scatter.default")
def masked_scatter(self, mask, source):
    shape = np.broadcast_shapes(self.shape, mask.shape)
    out = np.broadcast_to(self, shape).copy()
    m = np.broadcast_to(mask, shape)
    n = int(m.sum())
    out[m] = source.reshape(-1)[:n]
    return out


@_kernel("nonzero.default")
def nonzero(self):
    return _ret(np.argwhere(self), _I64).reshape(-1, self.ndim)


@_kernel("_local_scalar_dense.default")
def _local_scalar_dense(self):
    return np.asarray(self.reshape(()))


_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


@_kernel("scatter_reduce.two")
def scatter_reduce_two(self, index, src, dim, reduce, *, include_self=True):
    if reduce not in (*_REDUCE_UFUNC, "mean"):
        raise ValueError(f"scatter_reduce: unknown reduce {reduce!r}")
    x = self.reshape(1) if self.ndim == 0 else self
    d = 0 if self.ndim == 0 else _wrap(dim, self.ndim)
    idx = _scatter_index(index.reshape(-1) if self.ndim == 0 else index, d)
    src = src.reshape(-1) if self.ndim == 0 else src
    src = src[tuple(slice(0, s) for s in np.shape(idx[d]))]
    ct = _f32(x).dtype
    out = x.astype(ct, copy=True)
    hit = np.zeros(x.shape, bool)
    hit[idx] = True
    ufunc = np.add if reduce == "mean" else _REDUCE_UFUNC[reduce]
    if not include_self:
        ident = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
        if ct.kind in "iu" and reduce in ("amax", "amin"):
            info = np.iinfo(ct)
            ident = info.min if reduce == "amax" else info.max
        out[hit] = ident
    ufunc.at(out, idx, _cast(src, ct))
    if reduce == "mean":
        count = np.zeros(x.shape, np.int64) + (1 if include_self else 0)
        np.add.at(count, idx, 1)
        count = np.maximum(count, 1)
        out = out / count if ct.kind == "f" else np.floor_divide(out, count)
    return _ret(out, self.dtype).reshape(self.shape)


@_kernel("_embedding_bag.default")
def _embedding_bag(weight, indices, offsets, per_sample_weights=None, scale_grad_by_freq=False, mode=0,
                   sparse=False, include_last_offset=False, padding_idx=-1):
    """mode 0 sum, 1 mean, 2 max over each bag of 1-d `indices` cut at
    `offsets`; returns (output, offset2bag, bag_size, max_indices) the way
    ATen's CPU kernel fills them (the sum path leaves the last three empty
    or zero)."""
    if indices.ndim == 2:  # fixed-size bags
        n_bags, size = indices.shape
        offsets = np.arange(0, n_bags * size, size, dtype=_I64)
        indices = indices.reshape(-1)
    offs = [int(o) for o in offsets]
    n_bags = len(offs) - 1 if include_last_offset else len(offs)
    ends = (offs[1:] + [indices.size])[:n_bags]
    dim = weight.shape[1]
    w = _f32(weight)
    out = np.zeros((n_bags, dim), w.dtype)
    bag_size = np.zeros(n_bags, _I64)
    max_idx = np.zeros((n_bags, dim), _I64)
    offset2bag = np.zeros(indices.size, _I64)
    for b in range(n_bags):
        lo, hi = offs[b], ends[b]
        offset2bag[lo:hi] = b
        sel = [i for i in range(lo, hi) if padding_idx < 0 or indices[i] != padding_idx]
        bag_size[b] = len(sel)
        if not sel:
            continue
        rows = w[indices[sel]]
        if per_sample_weights is not None:
            rows = rows * _f32(per_sample_weights)[sel][:, None]
        if mode == 0:
            out[b] = rows.sum(0)
        elif mode == 1:
            out[b] = rows.sum(0) / w.dtype.type(len(sel))
        else:
            arg = np.argmax(rows, axis=0)
            out[b] = rows[arg, np.arange(dim)]
            max_idx[b] = indices[np.asarray(sel)[arg]]
    if mode == 0:
        zeros = np.zeros(n_bags, _I64)
        return (_ret(out, weight.dtype), offset2bag if padding_idx >= 0 else np.zeros(0, _I64),
                zeros, zeros.copy())
    if mode == 1:
        return _ret(out, weight.dtype), offset2bag, bag_size, bag_size.copy()
    return _ret(out, weight.dtype), offset2bag, bag_size, max_idx


@_kernel("masked_scatter_backward.default")
def masked_scatter_backward(grad_output, mask, sizes):
    """The gradient of masked_scatter's `source`: the masked gradient values
    in order, zero-padded to source's size."""
    m = np.broadcast_to(mask, grad_output.shape)
    picked = grad_output[m]
    out = np.zeros(int(np.prod(sizes)), grad_output.dtype)
    out[: picked.size] = picked[: out.size]
    return out.reshape(tuple(sizes))


@_kernel("_embedding_bag_backward.default")
def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            per_sample_weights, num_weights, scale_grad_by_freq, mode, sparse,
                            padding_idx=-1):
    g = _f32(grad)
    idx = indices.reshape(-1)
    if indices.ndim == 2:
        bag_of = np.repeat(np.arange(indices.shape[0]), indices.shape[1])
    else:
        starts = np.asarray(offsets[: g.shape[0]], _I64)
        bag_of = np.searchsorted(starts, np.arange(idx.size), side="right") - 1
    out = np.zeros((num_weights, g.shape[1]), g.dtype)
    keep = idx != padding_idx if padding_idx >= 0 else np.ones(idx.size, bool)
    if mode == 2:
        for b in range(g.shape[0]):
            for d in range(g.shape[1]):
                w = maximum_indices[b, d]
                if w >= 0 and (padding_idx < 0 or w != padding_idx) and bag_size[b] > 0:
                    out[w, d] += g[b, d]
        return _ret(out, grad.dtype)
    rows = g[bag_of]
    if per_sample_weights is not None:
        rows = rows * _f32(per_sample_weights).reshape(-1, 1)
    if mode == 1:
        counts = np.zeros(g.shape[0], g.dtype)
        np.add.at(counts, bag_of[keep], 1)
        rows = rows / np.maximum(counts, 1)[bag_of][:, None]
    if scale_grad_by_freq:
        freq = np.bincount(idx, minlength=num_weights)
        rows = rows / np.maximum(freq[idx], 1)[:, None]
    _ufunc_at(np.add, out, (idx[keep],), rows[keep])
    return _ret(out, grad.dtype)
