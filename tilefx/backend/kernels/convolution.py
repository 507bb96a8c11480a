"""Convolution (im2col + BLAS); pooling is in pooling.py."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _cast,
    _compute_dtype,
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
        P[(c, i), n] = W[(c, i), (o, j)] @ Gj[(o, j), n]
        grad_input[n, c, i*dh*Wp + s] += P[(c, i), n, s]

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
        # one 2-D product per group over all the images (CNN conv2: 0.65 ms
        # against 1.1 for per-image ones); the adds read it transposed
        p = np.matmul(wr.reshape(G, Cg * KH, Og * KW), gj.reshape(G, Og * KW, N * S))
        p = p.reshape(C, KH, N, S).transpose(2, 0, 1, 3)
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
