"""Convolution (im2col + BLAS) and pooling."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _BOOL,
    _cast,
    _compute_dtype,
    _f32,
    _pair,
    _promote,
    _ret,
)

from tilefx.backend.kernels.convolution_nd import convolution_nd, convolution_nd_backward

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# convolution (im2col + BLAS)
# ---------------------------------------------------------------------------
#
# Column matrix: the input padded to (N, C, Hp, Wp), contiguous, unrolled to
# one row per (c, kh, kw) and one column per (n, oh, ow). When the width
# stride is 1, each (c, kh, kw, n, oh) piece is a contiguous run of OW input
# values, copied as one element of a void dtype (an order of magnitude faster
# than numpy's strided float copy with short rows).
# The matmuls are batched over images through strided views of the same
# buffers (no copies): OpenBLAS is markedly faster on these per-image
# products than on one very wide or very deep 2-D product.
# The input gradient of stride-1 convolutions goes through
# _conv_backward_rows instead, which works on flat padded planes.


class _Geom:
    __slots__ = (
        "N", "C", "H", "W", "Hp", "Wp", "KH", "KW", "sh", "sw", "ph", "pw",
        "dh", "dw", "OH", "OW", "R", "rows",
    )  # fmt: skip

    def __init__(self, xshape, wshape, stride, padding, dilation, grad_input):
        self.N, self.C, self.H, self.W = xshape
        self.KH, self.KW = wshape[2], wshape[3]
        self.sh, self.sw = stride
        self.ph, self.pw = padding
        self.dh, self.dw = dilation
        self.Hp, self.Wp = self.H + 2 * self.ph, self.W + 2 * self.pw
        self.OH = (self.Hp - self.dh * (self.KH - 1) - 1) // self.sh + 1
        self.OW = (self.Wp - self.dw * (self.KW - 1) - 1) // self.sw + 1
        self.R = self.OH * self.OW
        # The row-wise backward wastes (Wp - OW) / OW of its matmuls and
        # copies O*KW rows of grad_output, but replaces KH*KW strided col2im
        # adds over (N, C, OH, OW) by KH contiguous ones: measured better
        # when C*KH >= O (CNN conv2: 1.2 ms vs 2.2 ms), worse otherwise.
        self.rows = (
            grad_input
            and self.sh == 1
            and self.sw == 1
            and self.Wp <= 2 * self.OW
            and self.C * self.KH >= wshape[0]
        )


@lru_cache(maxsize=256)
def _geom(xshape, wshape, stride, padding, dilation, grad_input) -> _Geom:
    return _Geom(xshape, wshape, stride, padding, dilation, grad_input)


def _conv_args(input, weight, stride, padding, dilation, transposed, grad_input=False):
    if transposed:
        raise NotImplementedError("transposed convolution")
    nd = input.ndim - 2
    if nd == 1:
        input, weight = input[:, :, None, :], weight[:, :, None, :]
        stride = (1, _pair(stride)[0])
        padding = (0, _pair(padding)[0])
        dilation = (1, _pair(dilation)[0])
    elif nd == 2:
        stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    else:
        raise NotImplementedError(f"{nd}-d convolution")
    g = _geom(input.shape, weight.shape, stride, padding, dilation, grad_input)
    return input, weight, g, nd


def _pad_input(x: np.ndarray, g: _Geom) -> np.ndarray:
    """The zero-padded input, contiguous (x may hold any number of images)."""
    if g.ph or g.pw:
        xp = np.zeros((x.shape[0], g.C, g.Hp, g.Wp), dtype=x.dtype)
        xp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W] = x
        return xp
    return np.ascontiguousarray(x)


def _im2col(xp: np.ndarray, g: _Geom) -> np.ndarray:
    """(C*KH*KW, n*OH*OW) column matrix of the padded contiguous input."""
    isz = xp.itemsize
    sN, sC, sH, sW = xp.strides
    C, KH, KW, N = g.C, g.KH, g.KW, xp.shape[0]
    if g.sw == 1 and g.sh == 1 and g.OW * isz < 64:
        # short rows: unroll kw first, (c, kw, n, h) -> row of OW, then kh,
        # (c, kh, kw, n) -> OH consecutive rows: fewer, longer copy elements
        # (CNN conv2: 140 us instead of 227)
        rs = g.OW * isz
        s1 = np.ndarray(
            (C, KW, N, g.Hp), dtype=np.dtype((np.void, rs)), buffer=xp,
            strides=(sC, g.dw * sW, sN, sH),
        )  # fmt: skip
        s1 = np.ascontiguousarray(s1)
        s2 = np.ndarray(
            (C, KH, KW, N), dtype=np.dtype((np.void, g.OH * rs)), buffer=s1,
            strides=(KW * N * g.Hp * rs, g.dh * rs, N * g.Hp * rs, g.Hp * rs),
        )  # fmt: skip
        cols = np.ascontiguousarray(s2).view(xp.dtype)
    elif g.sw == 1:
        vt = np.dtype((np.void, g.OW * isz))
        shape = (C, KH, KW, N, g.OH)
        strides = (sC, g.dh * sH, g.dw * sW, sN, g.sh * sH)
        src = np.ndarray(shape, dtype=vt, buffer=xp, strides=strides)
        cols = np.ascontiguousarray(src).view(xp.dtype)
    else:
        src = as_strided(
            xp,
            (C, KH, KW, N, g.OH, g.OW),
            (sC, g.dh * sH, g.dw * sW, sN, g.sh * sH, g.sw * sW),
        )
        cols = np.ascontiguousarray(src)
    return cols.reshape(C * KH * KW, N * g.R)


def _per_image(m: np.ndarray, G: int, N: int) -> np.ndarray:
    """(G*rows, N*L) -> the (N, G, rows, L) view: one matrix per image."""
    rows, L = m.shape[0] // G, m.shape[1] // N
    return m.reshape(G, rows, N, L).transpose(2, 0, 1, 3)


# CONV_THREADS = 2 runs big convolutions as two halves of the batch on two
# threads (numpy and BLAS release the GIL in everything heavy here; with
# single-threaded BLAS this is how the conv kernels would use the second
# core, as PyTorch eager does). It pays only when the second core is idle:
# CNN training step 4.0 ms instead of 4.5 ms then, but 0.3 ms slower when a
# thread spins there, e.g. torch's OpenMP pool after the torch copy_ of the
# weight write-back each step. Off by default.
CONV_THREADS = 1
_POOL: list = [None, 0]  # executor, pid that created it
_NCPU = os.cpu_count() or 1
_PARALLEL_MIN_FLOPS = 20_000_000  # CNN conv1 (11.5 MFLOP) measured no faster split


def _batch_parallel(fn, N: int, flops: int) -> list:
    """[fn(0, N)], or [fn(0, h), fn(h, N)] run on two threads when the work is
    worth a thread hand-off (about 30 us)."""
    if min(CONV_THREADS, _NCPU) < 2 or N < 2 or flops < _PARALLEL_MIN_FLOPS:
        return [fn(0, N)]
    if _POOL[0] is None or _POOL[1] != os.getpid():  # none yet, or forked
        _POOL[0] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilefx-kernels")
        _POOL[1] = os.getpid()
    h = N // 2
    fut = _POOL[0].submit(fn, h, N)
    first = fn(0, h)
    return [first, fut.result()]


@_kernel("convolution.default")
def convolution(
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    if transposed:
        return _transposed_convolution(input, weight, bias, stride, padding, dilation,
                                       output_padding, groups)
    if input.ndim > 4:  # volumes: the general N-d form
        return convolution_nd(input, weight, bias, stride, padding, dilation, groups)
    rt = _promote(input.dtype, weight.dtype)
    ct = _compute_dtype(rt)
    x, w, g, nd = _conv_args(input, weight, stride, padding, dilation, transposed)
    x, w = _cast(x, ct), _cast(w, ct)
    O, G, N, R = w.shape[0], groups, g.N, g.R
    w3 = w.reshape(G, O // G, -1)
    b = None if bias is None else _cast(bias, ct)[:, None, None]
    out = np.empty((N, O, g.OH, g.OW), dtype=ct)

    def part(n0, n1):
        cols = _im2col(_pad_input(x[n0:n1], g), g)
        o = out[n0:n1]
        np.matmul(w3, _per_image(cols, G, n1 - n0), out=o.reshape(n1 - n0, G, O // G, R))
        if b is not None:
            o += b

    _batch_parallel(part, N, 2 * N * R * w.size)
    if nd == 1:
        out = out.reshape(N, O, g.OW)
    return _ret(out, rt)


def _transposed_convolution(input, weight, bias, stride, padding, dilation, output_padding, groups):
    """A transposed convolution is the input gradient of the convolution whose
    output it takes: weight (C_in, C_out / groups, k...) is that convolution's
    (O, C / groups, k...) weight, and the output size follows torch's rule."""
    nd = input.ndim - 2
    rep = lambda v: list(v) * nd if len(v) == 1 else list(v)  # noqa: E731
    s, p, d, op_ = rep(stride), rep(padding), rep(dilation), rep(output_padding)
    spatial = [(input.shape[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (weight.shape[2 + i] - 1)
               + op_[i] + 1 for i in range(nd)]
    shape = (input.shape[0], weight.shape[1] * groups, *spatial)
    like = np.zeros(shape, dtype=_promote(input.dtype, weight.dtype))
    out, _, _ = convolution_backward(input, like, weight, None, s, p, d, False, [0] * nd, groups,
                                     [True, False, False])
    if bias is not None:
        out = out + bias.astype(out.dtype).reshape(-1, *([1] * nd))
    return out


def _transposed_convolution_backward(grad_output, input, weight, stride, padding, dilation, groups,
                                     output_mask):
    """The transposed convolution y = C_w^T(x) is the adjoint of the convolution
    C_w, so its input gradient is the convolution C_w(gy) and its weight gradient
    that of C_w with gy as input and x as output gradient (<gy, C_w^T x> = <C_w gy, x>)."""
    nd = input.ndim - 2
    zeros = [0] * nd
    gi = gw = gb = None
    if output_mask[0]:
        gi = convolution(grad_output, weight, None, stride, padding, dilation, False, zeros, groups)
        gi = _ret(gi[(slice(None), slice(None)) + tuple(slice(0, n) for n in input.shape[2:])],
                  input.dtype)
    if output_mask[1]:
        _, gw, _ = convolution_backward(input, grad_output, weight, None, stride, padding, dilation,
                                        False, zeros, groups, [False, True, False])
    if output_mask[2]:
        gb = _ret(grad_output.sum(axis=(0, *range(2, grad_output.ndim)),
                                  dtype=_compute_dtype(grad_output.dtype)), grad_output.dtype)
    return gi, gw, gb


@_kernel("convolution_backward.default")
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    if transposed:
        return _transposed_convolution_backward(grad_output, input, weight, stride, padding,
                                                dilation, groups, output_mask)
    if input.ndim > 4:
        return convolution_nd_backward(grad_output, input, weight, stride, padding, dilation, groups,
                                       output_mask)
    x, w, g, nd = _conv_args(
        input, weight, stride, padding, dilation, transposed, bool(output_mask[0])
    )
    ct = _compute_dtype(_promote(_promote(input.dtype, weight.dtype), grad_output.dtype))
    O, G, N = w.shape[0], groups, g.N
    go = _cast(grad_output, ct).reshape(N, O, g.OH, g.OW)
    x = _cast(x, ct)
    wc = _cast(w, ct)
    gi = np.empty((N, g.C, g.H, g.W), dtype=ct) if output_mask[0] else None
    part_fn = _conv_backward_rows if g.rows else _conv_backward_cols

    def part(n0, n1):
        return part_fn(go[n0:n1], x[n0:n1], wc, g, G, output_mask, ct, gi, n0)

    parts = _batch_parallel(part, N, 2 * N * g.R * w.size * (bool(output_mask[0]) + 1))
    gw = gb = None
    if output_mask[1]:
        gw = parts[0][0] if len(parts) == 1 else parts[0][0] + parts[1][0]
    if output_mask[2]:
        gb = parts[0][1] if len(parts) == 1 else parts[0][1] + parts[1][1]
    return (
        None if gi is None else _ret(gi.reshape(input.shape), input.dtype),
        None if gw is None else _ret(gw.reshape(weight.shape), weight.dtype),
        None if gb is None else _ret(gb, grad_output.dtype),
    )


def _conv_backward_cols(go, x, w, g: _Geom, G: int, output_mask, ct, gi_out, n0):
    """Backward through the column matrix for the images of `go` / `x` (the
    batch [n0, n0 + len)): returns (grad_weight, grad_bias) partials and
    writes grad_input = col2im(W^T @ go) into gi_out."""
    O, N, R = w.shape[0], go.shape[0], g.R
    Og = O // G
    go4 = go.reshape(N, G, Og, R)  # per image and group: (Og, OH*OW) matrices
    gw = gb = None
    if output_mask[2]:
        gb = go.reshape(N, O, R).sum(axis=2, dtype=ct).sum(axis=0)
    if output_mask[1]:
        cols = _im2col(_pad_input(x, g), g)
        # sum over images of cols_n @ go_n^T: OpenBLAS is ~3x faster on these
        # per-image products than on one (CKK, N*OH*OW) x (N*OH*OW, O) product
        gw = np.matmul(_per_image(cols, G, N), go4.transpose(0, 1, 3, 2)).sum(axis=0)
        gw = gw.transpose(0, 2, 1)  # (G, Og, CgKK)
    if output_mask[0]:
        wt = w.reshape(G, Og, -1).transpose(0, 2, 1)  # (G, CgKK, Og)
        dcols = np.matmul(wt, go4)  # (N, G, CgKK, R)
        # col2im: one strided add per kernel position
        C, KH, KW = g.C, g.KH, g.KW
        dc = dcols.reshape(N, C, KH, KW, g.OH, g.OW)
        target = gi_out[n0 : n0 + N]
        padded = bool(g.ph or g.pw)
        if padded:
            gp = np.zeros((N, C, g.Hp, g.Wp), dtype=ct)
        else:
            gp = target
            gp.fill(0)
        eh, ew = g.sh * (g.OH - 1) + 1, g.sw * (g.OW - 1) + 1
        for i in range(KH):
            for j in range(KW):
                h0, w0 = i * g.dh, j * g.dw
                gp[:, :, h0 : h0 + eh : g.sh, w0 : w0 + ew : g.sw] += dc[:, :, i, j]
        if padded:
            target[...] = gp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W]
    return gw, gb


def _conv_backward_rows(go, x, w, g: _Geom, G: int, output_mask, ct, gi_out, n0):
    """Stride-1 backward in flat padded planes, with only the kernel rows (kh)
    unrolled on the input side and the kernel columns (kw) on the grad_output
    side (s < S = R + (KW-1)*dw, R = (OH-1)*Wp + OW):

        Xi[(c, i), n, s] = x[n, c, s + i*dh*Wp]
        Gj[(o, j), n, s] = go_flat[o, n, s - j*dw]     (0 outside the outputs)
        grad_weight[o, c, i, j] = sum_{n, s} Xi[(c, i), n, s] Gj[(o, j), n, s]
        P[n, (c, i)] = W[(c, i), (o, j)] @ Gj[n]
        grad_input[n, c, i*dh*Wp + s] += P[n, (c, i), s]

    so col2im is KH shifted contiguous adds instead of KH*KW strided ones,
    and neither operand is the KH*KW-times inflated column matrix. Same
    interface as _conv_backward_cols."""
    O, N, C, KH, KW = w.shape[0], go.shape[0], g.C, g.KH, g.KW
    Og, Cg = O // G, C // G
    isz = np.dtype(ct).itemsize
    R = (g.OH - 1) * g.Wp + g.OW
    pad = (KW - 1) * g.dw
    S = R + pad
    Lb = R + 2 * pad
    # grad_output in the flat padded plane, `pad` zeros on both sides
    gbuf = np.zeros((O, N, Lb), dtype=ct)
    np.copyto(
        as_strided(
            gbuf[:, :, pad:], (N, O, g.OH, g.OW), (Lb * isz, N * Lb * isz, g.Wp * isz, isz)
        ),
        go,
    )
    gb = np.sum(gbuf.reshape(O, -1), axis=1, dtype=ct) if output_mask[2] else None
    vt = np.dtype((np.void, S * isz))
    gj = np.ndarray(
        (O, KW, N), dtype=vt, buffer=gbuf, offset=pad * isz,
        strides=(N * Lb * isz, -g.dw * isz, Lb * isz),
    )  # fmt: skip
    gj = np.ascontiguousarray(gj).view(ct).reshape(O * KW, N * S)
    gw = None
    if output_mask[1]:
        xp = _pad_input(x, g)
        sN, sC, sH, _ = xp.strides
        xi = np.ndarray((C, KH, N), dtype=vt, buffer=xp, strides=(sC, g.dh * sH, sN))
        xi = np.ascontiguousarray(xi).view(ct).reshape(G, Cg * KH, N * S)
        gwm = np.matmul(xi, gj.reshape(G, Og * KW, N * S).transpose(0, 2, 1))
        gw = gwm.reshape(G, Cg, KH, Og, KW).transpose(0, 3, 1, 2, 4)
    if output_mask[0]:
        wr = w.reshape(G, Og, Cg, KH, KW).transpose(0, 2, 3, 1, 4)
        p = np.matmul(wr.reshape(G, Cg * KH, Og * KW), _per_image(gj, G, N))
        p = p.reshape(N, C, KH, S)
        target = gi_out[n0 : n0 + N]
        padded = bool(g.ph or g.pw)
        if padded:
            gp = np.zeros((N, C, g.Hp * g.Wp), dtype=ct)
        else:
            gp = target.reshape(N, C, g.Hp * g.Wp)
            gp.fill(0)
        for i in range(KH):
            off = i * g.dh * g.Wp
            gp[:, :, off : off + S] += p[:, :, i]
        if padded:
            gp = gp.reshape(N, C, g.Hp, g.Wp)
            target[...] = gp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W]
    return gw, gb


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------


def _pool_out(L: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = L + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= L + p:
        out -= 1
    return out


def _pool_params(kernel_size, stride, padding, dilation=1):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    return kh, kw, sh, sw, ph, pw, dh, dw


@lru_cache(maxsize=256)
def _maxpool_plan(H, W, kh, kw, sh, sw, ph, pw, dh, dw, ceil):
    OH = _pool_out(H, kh, sh, ph, dh, ceil)
    OW = _pool_out(W, kw, sw, pw, dw, ceil)
    pad_b = max(0, (OH - 1) * sh + (kh - 1) * dh + 1 - H - ph)
    pad_r = max(0, (OW - 1) * sw + (kw - 1) * dw + 1 - W - pw)
    oh = np.arange(OH) * sh - ph
    ow = np.arange(OW) * sw - pw
    # flat index of each window's top-left corner (may be in the padding)
    base = (oh[:, None] * W + ow[None, :]).astype(np.int64)
    # flat offset of kernel position k = i * kw + j from the corner
    koff = np.array([i * dh * W + j * dw for i in range(kh) for j in range(kw)], np.int64)
    # first in-bounds kernel position of each window: torch's initial index
    i0 = (np.maximum(-oh, 0) + dh - 1) // dh
    j0 = (np.maximum(-ow, 0) + dw - 1) // dw
    kdt = np.int8 if kh * kw < 127 else np.int32
    kfirst = (i0[:, None] * kw + j0[None, :]).astype(kdt)
    return OH, OW, pad_b, pad_r, base, koff, kfirst


@_kernel("max_pool2d_with_indices.default")
def max_pool2d_with_indices(
    self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    x = self if self.ndim == 4 else self[None]
    N, C, H, W = x.shape
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_params(kernel_size, stride, padding, dilation)
    OH, OW, pad_b, pad_r, base, koff, kfirst = _maxpool_plan(
        H, W, kh, kw, sh, sw, ph, pw, dh, dw, bool(ceil_mode)
    )
    is_float = x.dtype.kind == "f"
    lowest = -np.inf if is_float else np.iinfo(x.dtype).min
    padded = bool(ph or pw or pad_b or pad_r)
    if padded:
        xp = np.full((N, C, ph + H + pad_b, pw + W + pad_r), lowest, dtype=x.dtype)
        xp[:, :, ph : ph + H, pw : pw + W] = x
    else:
        xp = x
    nan_aware = False
    if is_float:
        with np.errstate(all="ignore"):
            nan_aware = bool(np.isnan(np.add.reduce(x, axis=None)))
    # all windows at once, kernel position first: (kh*kw, N, C, OH, OW)
    sN, sC, sH, sW = xp.strides
    win = np.ascontiguousarray(
        as_strided(xp, (kh, kw, N, C, OH, OW), (dh * sH, dw * sW, sN, sC, sh * sH, sw * sW))
    ).reshape(kh * kw, N, C, OH, OW)
    # running max and the kernel position that holds it; a later position
    # wins only when strictly greater (or NaN), as in ATen's loop
    shape = (N, C, OH, OW)
    kid = np.empty(shape, dtype=kfirst.dtype)
    if padded:
        best = np.full(shape, lowest, dtype=x.dtype)
        kid[...] = kfirst
        k0 = 0
    else:
        best = win[0].copy()
        kid[...] = 0
        k0 = 1
    m = np.empty(shape, dtype=_BOOL)
    tmp = np.empty(shape, dtype=kid.dtype)
    for k in range(k0, kh * kw):
        v = win[k]
        np.greater(v, best, out=m)
        if nan_aware:
            m |= np.isnan(v)
        np.maximum(best, v, out=best)
        # positions only grow, so "last k where m" is a running maximum
        np.multiply(m, kid.dtype.type(k), out=tmp)
        np.maximum(kid, tmp, out=kid)
    idx = np.take(koff, kid)
    idx += base
    if self.ndim == 3:
        best, idx = best[0], idx[0]
    return best, idx


@lru_cache(maxsize=64)
def _plane_offsets(planes: int, plane_size: int) -> np.ndarray:
    return (np.arange(planes, dtype=np.int64) * plane_size)[:, None]


@_kernel("max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(
    grad_output, self, indices, kernel_size, stride, padding, dilation, ceil_mode
):
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_params(kernel_size, stride, padding, dilation)
    H, W = self.shape[-2:]
    planes = self.size // (H * W) if self.size else 0
    go = _f32(grad_output).reshape(planes, -1)
    ind = indices.reshape(planes, -1)
    overlap = sh < (kh - 1) * dh + 1 or sw < (kw - 1) * dw + 1
    if not overlap:
        # every input position is in at most one window: a plain scatter
        gi = np.zeros((planes, H * W), dtype=go.dtype)
        flat = (ind + _plane_offsets(planes, H * W)).reshape(-1)
        gi.reshape(-1)[flat] = go.reshape(-1)
    else:
        flat = (ind + _plane_offsets(planes, H * W)).reshape(-1)
        gi = np.bincount(flat, weights=go.reshape(-1), minlength=planes * H * W)
    return _ret(gi.reshape(self.shape), grad_output.dtype)


def _avg_plan(H, W, kh, kw, sh, sw, ph, pw, ceil, count_include_pad, divisor_override):
    OH = _pool_out(H, kh, sh, ph, 1, ceil)
    OW = _pool_out(W, kw, sw, pw, 1, ceil)

    def sizes(L, O, k, s, p):
        start = np.arange(O) * s - p
        end = np.minimum(start + k, L + p)
        full = end - start
        clipped = np.minimum(end, L) - np.maximum(start, 0)
        return full, clipped

    fh, ch = sizes(H, OH, kh, sh, ph)
    fw, cw = sizes(W, OW, kw, sw, pw)
    if divisor_override:
        div = np.full((OH, OW), float(divisor_override))
    elif count_include_pad:
        div = (fh[:, None] * fw[None, :]).astype(np.float64)
    else:
        div = (ch[:, None] * cw[None, :]).astype(np.float64)
    pad_b = max(0, (OH - 1) * sh + kh - H - ph)
    pad_r = max(0, (OW - 1) * sw + kw - W - pw)
    return OH, OW, pad_b, pad_r, div


@_kernel("avg_pool2d.default")
def avg_pool2d(
    self,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    x = _f32(self if self.ndim == 4 else self[None])
    N, C, H, W = x.shape
    kh, kw, sh, sw, ph, pw, _, _ = _pool_params(kernel_size, stride, padding)
    OH, OW, pad_b, pad_r, div = _avg_plan(
        H, W, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override
    )
    if ph or pw or pad_b or pad_r:
        xp = np.zeros((N, C, ph + H + pad_b, pw + W + pad_r), dtype=x.dtype)
        xp[:, :, ph : ph + H, pw : pw + W] = x
    else:
        xp = x
    eh, ew = sh * (OH - 1) + 1, sw * (OW - 1) + 1
    acc = np.zeros((N, C, OH, OW), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            acc += xp[:, :, i : i + eh : sh, j : j + ew : sw]
    acc /= div.astype(x.dtype)
    if self.ndim == 3:
        acc = acc[0]
    return _ret(acc, self.dtype)


@_kernel("avg_pool2d_backward.default")
def avg_pool2d_backward(
    grad_output,
    self,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
):
    g = _f32(grad_output if grad_output.ndim == 4 else grad_output[None])
    N, C, H, W = (self if self.ndim == 4 else self[None]).shape
    kh, kw, sh, sw, ph, pw, _, _ = _pool_params(kernel_size, stride, padding)
    OH, OW, pad_b, pad_r, div = _avg_plan(
        H, W, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override
    )
    g = g / div.astype(g.dtype)
    gp = np.zeros((N, C, ph + H + pad_b, pw + W + pad_r), dtype=g.dtype)
    eh, ew = sh * (OH - 1) + 1, sw * (OW - 1) + 1
    for i in range(kh):
        for j in range(kw):
            gp[:, :, i : i + eh : sh, j : j + ew : sw] += g
    gi = gp[:, :, ph : ph + H, pw : pw + W]
    return _ret(gi.reshape(self.shape), self.dtype)
