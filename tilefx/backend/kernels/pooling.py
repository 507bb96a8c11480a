"""Max and average pooling (2-d, NCHW or CHW).

Max pooling gathers every window position into one contiguous array
(kernel position first) and reduces over it with whole-array ufuncs; the
index of each maximum follows ATen's scan (row-major over the window, a
later position wins only when strictly greater, or NaN). The 2x2 windows of
the common CNN pooling have a branch-free index formula (`_max_pool_2x2`),
and `max_pool2d_values` computes the values alone for graphs that never read
the indices (inference): the executor picks it through
FIRST_RESULT_KERNELS.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tilefx.backend.kernels._common import _BOOL, _f32, _pair, _ret, registrar

KERNELS: dict = {}
_kernel = registrar(KERNELS)
# kernels of multi-result ops that compute the first result only (the others
# None): the executor uses one when no op reads the op's other results
FIRST_RESULT_KERNELS: dict = {}
_first_result_kernel = registrar(FIRST_RESULT_KERNELS)



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


def _windows(x: np.ndarray, kh, kw, sh, sw, dh, dw, OH, OW) -> np.ndarray:
    """Every window position of the (padded) input as one contiguous
    (kh*kw, N, C, OH, OW) array: one strided copy."""
    N, C = x.shape[:2]
    sN, sC, sH, sW = x.strides
    return np.ascontiguousarray(
        as_strided(x, (kh, kw, N, C, OH, OW), (dh * sH, dw * sW, sN, sC, sh * sH, sw * sW))
    ).reshape(kh * kw, N, C, OH, OW)


def _has_nan(a: np.ndarray) -> bool:
    """Whether a float array holds a NaN (a sum is NaN then; +inf and -inf
    together also give NaN, a false alarm that only costs the slow path)."""
    if a.dtype.kind != "f":
        return False
    with np.errstate(all="ignore"):
        return bool(np.isnan(np.add.reduce(a, axis=None)))


def _max_pool_2x2(win: np.ndarray, base: np.ndarray, W: int, dh: int, dw: int):
    """Values and flat indices of 2x2 windows without padding, or None when a
    window holds a NaN (the general loop has ATen's NaN rule). With the
    window (a b / c d): the running maximum of ATen's scan ends in the second
    row iff max(c, d) > max(a, b) (strictly), and within a row on the second
    column iff it is strictly greater than the first, so

        index = r * dh*W + (r ? (d > c) : (b > a)) * dw,  r = max(c, d) > max(a, b)

    in nine whole-array passes instead of the general loop's take."""
    a, b, c, d = win
    top, bottom = np.maximum(a, b), np.maximum(c, d)
    best = np.maximum(top, bottom)
    if _has_nan(best):
        return None
    r = np.greater(bottom, top)
    col = np.greater(b, a)
    col2 = np.greater(d, c)
    col2 ^= col  # col = r ? col2 : col, branch-free on booleans
    col2 &= r
    col ^= col2
    it = np.int32 if best.size and (dh + 1) * W < 2**31 else np.int64
    local = np.multiply(r, it(dh * W), dtype=it)
    if dw == 1:
        local += col
    else:
        local += np.multiply(col, it(dw), dtype=it)
    return best, np.add(local, base, dtype=np.int64)


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
    # all windows at once, kernel position first: (kh*kw, N, C, OH, OW)
    win = _windows(xp, kh, kw, sh, sw, dh, dw, OH, OW)
    if kh == kw == 2 and not padded:
        fast = _max_pool_2x2(win, base, W, dh, dw)
        if fast is not None:
            best, idx = fast
            return (best[0], idx[0]) if self.ndim == 3 else (best, idx)
    nan_aware = _has_nan(x)
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
    idx = np.take(koff, kid.astype(np.intp))  # take is ~10x slower with int8 indices
    idx += base
    if self.ndim == 3:
        best, idx = best[0], idx[0]
    return best, idx


@_first_result_kernel("max_pool2d_with_indices.default")
def max_pool2d_values(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d_with_indices without the indices (None): windows that tile
    the input without padding reduce first over their rows (whole input rows
    at a time, contiguous), then over the columns of the row maxima; other
    windows take the general kernel."""
    x = self if self.ndim == 4 else self[None]
    H, W = x.shape[2:]
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_params(kernel_size, stride, padding, dilation)
    OH, OW, pad_b, pad_r = _maxpool_plan(H, W, kh, kw, sh, sw, ph, pw, dh, dw, bool(ceil_mode))[:4]
    if (sh, sw, dh, dw) != (kh, kw, 1, 1) or ph or pw or pad_b or pad_r or kh * kw < 2 or \
            not x.size:
        return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)[0], None
    eh, ew = OH * kh, OW * kw
    rows = np.maximum(x[:, :, 0:eh:kh], x[:, :, 1:eh:kh]) if kh > 1 else x[:, :, :eh]
    for i in range(2, kh):
        np.maximum(rows, x[:, :, i:eh:kh], out=rows)
    if kw == 1:
        best = rows[..., :ew]  # rows is a new array (kh > 1)
    else:
        best = np.maximum(rows[..., 0:ew:kw], rows[..., 1:ew:kw])
        for j in range(2, kw):
            np.maximum(best, rows[..., j:ew:kw], out=best)
    return (best[0] if self.ndim == 3 else best), None


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
