"""Convolution over any number of spatial dimensions (3-d volumes: Conv3d).

The 1-d and 2-d cases have tuned kernels in convolution.py; this is the
general im2col form they specialise, used for the rest: the padded input is
viewed (no copy) as (N, C, K1..Kd, O1..Od) windows, copied once into a
column matrix per group, and multiplied with the weight as one batched
product. The backward is the same product transposed for the weight
gradient and one strided add per kernel offset (col2im) for the input
gradient. Called by convolution.py's kernels; registers no op of its own.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tilefx.backend.kernels._common import _cast, _compute_dtype, _promote, _ret


def _expand(v, nd: int) -> list[int]:
    v = [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    return v * nd if len(v) == 1 else v


class _Shape:
    """The geometry of one N-d convolution."""

    def __init__(self, xshape, wshape, stride, padding, dilation):
        self.nd = len(xshape) - 2
        self.N, self.C = xshape[:2]
        self.sizes = list(xshape[2:])
        self.kernel = list(wshape[2:])
        self.stride = _expand(stride, self.nd)
        self.pad = _expand(padding, self.nd)
        self.dil = _expand(dilation, self.nd)
        self.padded = [s + 2 * p for s, p in zip(self.sizes, self.pad)]
        self.out = [(p - d * (k - 1) - 1) // s + 1
                    for p, d, k, s in zip(self.padded, self.dil, self.kernel, self.stride)]
        self.K = int(np.prod(self.kernel))
        self.R = int(np.prod(self.out))


def _padded(x: np.ndarray, g: _Shape) -> np.ndarray:
    if not any(g.pad):
        return np.ascontiguousarray(x)
    xp = np.zeros((x.shape[0], x.shape[1], *g.padded), dtype=x.dtype)
    xp[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(g.pad, g.sizes))] = x
    return xp


def _columns(xp: np.ndarray, g: _Shape, G: int) -> np.ndarray:
    """(N, G, C/G * K, R): each image's windows, one row per (c, kernel offset)."""
    sN, sC, *ss = xp.strides
    windows = as_strided(
        xp, (g.N, g.C, *g.kernel, *g.out),
        (sN, sC, *[d * s for d, s in zip(g.dil, ss)], *[st * s for st, s in zip(g.stride, ss)]))
    return np.ascontiguousarray(windows).reshape(g.N, G, (g.C // G) * g.K, g.R)


def convolution_nd(input, weight, bias, stride, padding, dilation, groups):
    rt = _promote(input.dtype, weight.dtype)
    ct = _compute_dtype(rt)
    x, w = _cast(input, ct), _cast(weight, ct)
    g = _Shape(x.shape, w.shape, stride, padding, dilation)
    O, G = w.shape[0], groups
    cols = _columns(_padded(x, g), g, G)
    out = np.matmul(w.reshape(G, O // G, -1), cols)  # (N, G, O/G, R)
    out = out.reshape(g.N, O, *g.out)
    if bias is not None:
        out += _cast(bias, ct).reshape([-1] + [1] * g.nd)
    return _ret(out, rt)


def convolution_nd_backward(grad_output, input, weight, stride, padding, dilation, groups, output_mask):
    ct = _compute_dtype(_promote(_promote(input.dtype, weight.dtype), grad_output.dtype))
    x, w = _cast(input, ct), _cast(weight, ct)
    g = _Shape(x.shape, w.shape, stride, padding, dilation)
    O, G = w.shape[0], groups
    go = _cast(grad_output, ct).reshape(g.N, G, O // G, g.R)
    gi = gw = gb = None
    if output_mask[2]:
        gb = _ret(go.reshape(g.N, O, g.R).sum(axis=(0, 2), dtype=ct), grad_output.dtype)
    if output_mask[1]:
        cols = _columns(_padded(x, g), g, G)
        gw = np.matmul(go, cols.transpose(0, 1, 3, 2)).sum(axis=0)  # (G, O/G, C/G * K)
        gw = _ret(gw.reshape(weight.shape), weight.dtype)
    if output_mask[0]:
        dcols = np.matmul(w.reshape(G, O // G, -1).transpose(0, 2, 1), go)  # (N, G, C/G * K, R)
        dcols = dcols.reshape(g.N, g.C, *g.kernel, *g.out)
        gp = np.zeros((g.N, g.C, *g.padded), dtype=ct)
        for offset in itertools.product(*[range(k) for k in g.kernel]):
            where = tuple(slice(i * d, i * d + s * (o - 1) + 1, s)
                          for i, d, s, o in zip(offset, g.dil, g.stride, g.out))
            gp[(slice(None), slice(None)) + where] += dcols[(slice(None), slice(None)) + offset]
        inner = tuple(slice(p, p + s) for p, s in zip(g.pad, g.sizes))
        gi = _ret(gp[(slice(None), slice(None)) + inner], input.dtype)
    return gi, gw, gb
