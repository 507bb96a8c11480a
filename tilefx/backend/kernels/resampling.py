"""Kernels that move values between positions: reflection/replication
padding, upsampling, grid sampling, col2im, adaptive and 3-d pooling."""

from __future__ import annotations

import itertools
import math

import numpy as np

from tilefx.backend.kernels._common import _I64, _f32, _ret, registrar

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# padding
# ---------------------------------------------------------------------------


def _pad_width(ndim: int, padding) -> list[tuple[int, int]]:
    """ATen's padding list runs from the last dimension backwards, (before, after) pairs."""
    pairs = [(int(padding[2 * i]), int(padding[2 * i + 1])) for i in range(len(padding) // 2)]
    return [(0, 0)] * (ndim - len(pairs)) + pairs[::-1]


def _pad(x: np.ndarray, padding, mode: str) -> np.ndarray:
    width = _pad_width(x.ndim, padding)
    # negative padding crops
    crop = tuple(slice(max(-a, 0), x.shape[i] - max(-b, 0)) for i, (a, b) in enumerate(width))
    x = x[crop]
    width = [(max(a, 0), max(b, 0)) for a, b in width]
    if mode == "reflect":
        for (a, b), n in zip(width, x.shape):
            if a >= n or b >= n:
                raise ValueError(f"reflection padding ({a}, {b}) must be smaller than the dimension ({n})")
    return np.pad(x, width, mode=mode)


for _nd in (1, 2, 3):
    def _make(nd, mode, name):
        def kernel(self, padding):
            return _pad(self, padding, mode)

        kernel.__name__ = name
        KERNELS[f"{name}.default"] = kernel

    _make(_nd, "reflect", f"reflection_pad{_nd}d")
    if _nd > 1:
        _make(_nd, "edge", f"replication_pad{_nd}d")


def _replication_pad_backward(grad_output, self, padding):
    """The transpose of edge padding: each output position adds its gradient
    to the input position it copied."""
    g = _f32(grad_output)
    width = _pad_width(self.ndim, padding)
    for axis, ((before, _), n) in enumerate(zip(width, self.shape)):
        if g.shape[axis] == n and before == 0:
            continue
        src = np.clip(np.arange(g.shape[axis]) - before, 0, n - 1)
        onehot = np.zeros((g.shape[axis], n), g.dtype)
        onehot[np.arange(g.shape[axis]), src] = 1
        g = np.moveaxis(np.tensordot(g, onehot, axes=([axis], [0])), -1, axis)
    return _ret(g, self.dtype)


@_kernel("replication_pad1d_backward.default")
def replication_pad1d_backward(grad_output, self, padding):
    return _replication_pad_backward(grad_output, self, padding)


@_kernel("replication_pad2d_backward.default")
def replication_pad2d_backward(grad_output, self, padding):
    return _replication_pad_backward(grad_output, self, padding)


@_kernel("replication_pad3d_backward.default")
def replication_pad3d_backward(grad_output, self, padding):
    return _replication_pad_backward(grad_output, self, padding)


# ---------------------------------------------------------------------------
# col2im
# ---------------------------------------------------------------------------


@_kernel("col2im.default")
def col2im(self, output_size, kernel_size, dilation, padding, stride):
    batched = self.ndim == 3
    cols = self if batched else self[None]
    (H, W), (kh, kw) = output_size, kernel_size
    (dh, dw), (ph, pw), (sh, sw) = dilation, padding, stride
    n, ckk, L = cols.shape
    c = ckk // (kh * kw)
    oh = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh * ow != L:
        raise ValueError(f"col2im: {L} blocks do not match output_size {list(output_size)}")
    x = _f32(cols).reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, H + 2 * ph + sh, W + 2 * pw + sw), x.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += x[:, :, i, j]
    out = out[:, :, ph:ph + H, pw:pw + W]
    out = _ret(np.ascontiguousarray(out), self.dtype)
    return out if batched else out[0]


# ---------------------------------------------------------------------------
# upsampling
# ---------------------------------------------------------------------------


def _out_sizes(x, output_size, scale_factors):
    if output_size:
        return [int(s) for s in output_size], [None, None]
    sizes = [int(math.floor(n * s)) for n, s in zip(x.shape[2:], scale_factors)]
    return sizes, list(scale_factors)


@_kernel("upsample_nearest2d.vec")
def upsample_nearest2d_vec(input, output_size, scale_factors):
    (oh, ow), scales = _out_sizes(input, output_size, scale_factors)
    idx = []
    for n_in, n_out, s in zip(input.shape[2:], (oh, ow), scales):
        scale = (1.0 / s) if s else n_in / n_out
        src = np.floor(np.arange(n_out, dtype=np.float32) * np.float32(scale)).astype(_I64)
        idx.append(np.minimum(src, n_in - 1))
    return input[:, :, idx[0][:, None], idx[1][None, :]]


def _linear_weights(n_in, n_out, align_corners, s):
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        src = np.arange(n_out, dtype=np.float32) * np.float32(scale)
    else:
        scale = (1.0 / s) if s else n_in / n_out
        src = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * np.float32(scale) - np.float32(0.5)
        src = np.maximum(src, np.float32(0))
    lo = np.minimum(np.floor(src).astype(_I64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = (src - lo).astype(np.float32)
    return lo, hi, frac


@_kernel("upsample_bilinear2d.vec")
def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):
    (oh, ow), scales = _out_sizes(input, output_size, scale_factors)
    x = _f32(input)
    h0, h1, fh = _linear_weights(x.shape[2], oh, align_corners, scales[0])
    w0, w1, fw = _linear_weights(x.shape[3], ow, align_corners, scales[1])
    t = x.dtype.type
    top = x[:, :, h0][:, :, :, w0] * (t(1) - fw) + x[:, :, h0][:, :, :, w1] * fw
    bot = x[:, :, h1][:, :, :, w0] * (t(1) - fw) + x[:, :, h1][:, :, :, w1] * fw
    out = top * (t(1) - fh)[:, None] + bot * fh[:, None]
    return _ret(out, input.dtype)


# ---------------------------------------------------------------------------
# grid sampling
# ---------------------------------------------------------------------------


def _reflect(x, twice_low, twice_high):
    """ATen's reflect_coordinates, and d(result)/dx (+1 or -1)."""
    if twice_low == twice_high:
        return np.zeros_like(x), np.zeros_like(x)
    lo = twice_low / 2
    span = (twice_high - twice_low) / 2
    sign = np.where(x - lo < 0, -1.0, 1.0)
    x = np.abs(x - lo)
    extra = np.fmod(x, span)
    flips = np.floor(x / span)
    even = flips % 2 == 0
    return np.where(even, extra + lo, span - extra + lo), np.where(even, sign, -sign)


def _source_coords(coord, size, padding_mode, align_corners):
    """Pixel coordinates of normalised grid values, and their derivative."""
    if align_corners:
        c, dc = (coord + 1) / 2 * (size - 1), np.full(coord.shape, (size - 1) / 2)
    else:
        c, dc = ((coord + 1) * size - 1) / 2, np.full(coord.shape, size / 2)
    if padding_mode == 1:  # border
        inside = (c > 0) & (c < size - 1)
        c, dc = np.clip(c, 0, size - 1), np.where(inside, dc, 0)
    elif padding_mode == 2:  # reflection
        c, flip = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        dc = dc * flip
        inside = (c > 0) & (c < size - 1)
        c, dc = np.clip(c, 0, size - 1), np.where(inside, dc, 0)
    return c, dc


def _grid_taps(input, grid, interpolation_mode, padding_mode, align_corners):
    """The taps of each output point, for 2-d (H, W) and 3-d (D, H, W) inputs:
    [(positions per spatial axis, weight, d(weight)/d(coordinate) per axis)],
    and d(coordinate)/d(grid) per axis. The grid's last dimension holds x, y
    (, z): component j drives spatial axis nd - 1 - j. Bilinear (trilinear)
    weights are the product of each axis's linear ones."""
    if interpolation_mode == 2:
        return _bicubic_taps(input, grid, padding_mode, align_corners)
    if interpolation_mode not in (0, 1):
        raise NotImplementedError(f"grid_sampler: interpolation mode {interpolation_mode}")
    sizes = input.shape[2:]
    nd = len(sizes)
    g = grid.astype(np.float64)
    coords, dcoords = [], []
    for axis, size in enumerate(sizes):
        c, dc = _source_coords(g[..., nd - 1 - axis], size, padding_mode, align_corners)
        coords.append(c)
        dcoords.append(dc)
    if interpolation_mode == 1:
        one = np.ones_like(coords[0])
        return [([np.rint(c).astype(_I64) for c in coords], one, [0 * one] * nd)], dcoords
    lo = [np.floor(c).astype(_I64) for c in coords]
    frac = [c - low for c, low in zip(coords, lo)]
    taps = []
    for corner in itertools.product((0, 1), repeat=nd):
        factors = [f if up else 1 - f for f, up in zip(frac, corner)]
        dweights = [math.prod(factors[:a] + factors[a + 1:]) * (1 if corner[a] else -1) for a in range(nd)]
        taps.append(([low + up for low, up in zip(lo, corner)], math.prod(factors), dweights))
    return taps, dcoords


# ATen's bicubic grid sampling: Keys' cubic convolution with A = -0.75 over the
# 4 x 4 neighbours of the unnormalised point; padding applies to each tap
_CUBIC_A = -0.75


def _cubic_weights(t):
    """The four taps' weights at offsets -1, 0, 1, 2 from floor(x), t = x - floor(x),
    and their derivatives in t."""
    A = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((A + 2) * x - (A + 3)) * x * x + 1, (3 * (A + 2) * x - 2 * (A + 3)) * x

    def far(x):  # 1 < |x| < 2
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A, (3 * A * x - 10 * A) * x + 8 * A

    (w0, d0), (w1, d1), (w2, d2), (w3, d3) = far(t + 1), near(t), near(1 - t), far(2 - t)
    return [w0, w1, w2, w3], [d0, d1, -d2, -d3]


def _padded_tap(p, size, padding_mode, align_corners):
    """A tap's integer coordinate (given as a float: a grid far outside
    [-1, 1] may not fit an int64) under the padding mode (ATen's
    compute_coordinates): clipped (border), reflected then clipped
    (reflection), or kept just outside the input (zeros: _inside drops it)."""
    if padding_mode == 1:
        p = np.clip(p, 0, size - 1)
    elif padding_mode == 2:
        r, _ = _reflect(p, 0, 2 * (size - 1)) if align_corners else _reflect(p, -1, 2 * size - 1)
        p = np.clip(r, 0, size - 1)
    else:
        p = np.clip(np.nan_to_num(p, nan=-1.0), -1, size)
    return p.astype(_I64)


def _bicubic_taps(input, grid, padding_mode, align_corners):
    """`_grid_taps` for bicubic 2-d sampling: 16 taps, each weighted by the
    product of its x and y cubic weights; the coordinates are unnormalised
    without padding, and the grid's gradient treats each tap's value as
    constant (as ATen's backward does)."""
    sizes = input.shape[2:]
    if len(sizes) != 2:
        raise NotImplementedError("grid_sampler: bicubic interpolation is for 2-d inputs")
    g = grid.astype(np.float64)
    coords, dcoords, lows, weights = [], [], [], []
    for axis, size in enumerate(sizes):
        x = g[..., 1 - axis]
        if align_corners:
            c, dc = (x + 1) / 2 * (size - 1), np.full(x.shape, (size - 1) / 2)
        else:
            c, dc = ((x + 1) * size - 1) / 2, np.full(x.shape, size / 2)
        low = np.floor(c)
        coords.append(c)
        dcoords.append(dc)
        lows.append(low)
        weights.append(_cubic_weights(c - low))
    taps = []
    (wy, dy), (wx, dx) = weights
    for j in range(4):
        py = _padded_tap(lows[0] - 1 + j, sizes[0], padding_mode, align_corners)
        for i in range(4):
            px = _padded_tap(lows[1] - 1 + i, sizes[1], padding_mode, align_corners)
            taps.append(([py, px], wy[j] * wx[i], [dy[j] * wx[i], wy[j] * dx[i]]))
    return taps, dcoords


def _inside(pos, sizes):
    """Whether each tap lies in the input, and its positions clipped into it."""
    inside = np.ones(pos[0].shape, bool)
    for p, size in zip(pos, sizes):
        inside &= (p >= 0) & (p < size)
    return inside, [np.clip(p, 0, size - 1) for p, size in zip(pos, sizes)]


def _grid_sample(input, grid, interpolation_mode, padding_mode, align_corners):
    """interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection."""
    x = _f32(input)
    n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
    taps, _ = _grid_taps(x, grid, interpolation_mode, padding_mode, align_corners)
    batch = np.arange(n).reshape((n,) + (1,) * len(sizes))
    out = np.zeros(grid.shape[:-1] + (c,), np.float64)
    for pos, w, _ in taps:
        inside, clipped = _inside(pos, sizes)
        out += x[(batch, slice(None), *clipped)] * (w * inside)[..., None]  # n, *out, c
    return _ret(np.ascontiguousarray(np.moveaxis(out, -1, 1)), input.dtype)


def _grid_sample_backward(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                          output_mask):
    x = _f32(input).astype(np.float64)
    n, c, sizes = x.shape[0], x.shape[1], x.shape[2:]
    nd = len(sizes)
    go = np.moveaxis(grad_output.astype(np.float64), 1, -1)  # n, *out, c
    taps, dcoords = _grid_taps(x, grid, interpolation_mode, padding_mode, align_corners)
    batch = np.broadcast_to(np.arange(n).reshape((n,) + (1,) * nd), grid.shape[:-1])
    channels_last = np.moveaxis(x, 1, -1)
    gin = np.zeros((n, *sizes, c))
    ggrid = np.zeros(grid.shape)
    for pos, w, dweights in taps:
        inside, clipped = _inside(pos, sizes)
        if output_mask[0]:
            np.add.at(gin, (batch[inside], *[p[inside] for p in clipped]), go[inside] * w[inside][:, None])
        # ATen computes the grid's gradient whatever output_mask says
        dot = (channels_last[(batch, *clipped)] * inside[..., None] * go).sum(-1)
        for axis in range(nd):
            ggrid[..., nd - 1 - axis] += dot * dweights[axis] * dcoords[axis]
    gi = _ret(np.ascontiguousarray(np.moveaxis(gin, -1, 1)), input.dtype) if output_mask[0] else None
    return gi, _ret(ggrid, grid.dtype)


for _nd in (2, 3):
    KERNELS[f"grid_sampler_{_nd}d.default"] = _grid_sample
    KERNELS[f"grid_sampler_{_nd}d_backward.default"] = _grid_sample_backward


# ---------------------------------------------------------------------------
# adaptive average pooling
# ---------------------------------------------------------------------------


def _bins(n_in, n_out):
    return [(i * n_in // n_out, -(-(i + 1) * n_in // n_out)) for i in range(n_out)]


def _adaptive_avg(x, output_size):
    nd = len(output_size)
    spatial = x.shape[-nd:]
    xf = _f32(x)
    out = np.empty(x.shape[:-nd] + tuple(output_size), xf.dtype)
    for pos in np.ndindex(*output_size):
        sl = tuple(slice(*_bins(n, o)[p]) for n, o, p in zip(spatial, output_size, pos))
        out[(Ellipsis, *pos)] = xf[(Ellipsis, *sl)].mean(axis=tuple(range(-nd, 0)))
    return _ret(out, x.dtype)


@_kernel("_adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(self, output_size):
    return _adaptive_avg(self, output_size)


@_kernel("_adaptive_avg_pool3d.default")
def _adaptive_avg_pool3d(self, output_size):
    return _adaptive_avg(self, output_size)


def _adaptive_backward(grad_output, self, nd):
    out_size = grad_output.shape[-nd:]
    spatial = self.shape[-nd:]
    g = _f32(grad_output)
    dx = np.zeros(self.shape, g.dtype)
    for pos in np.ndindex(*out_size):
        sl = tuple(slice(*_bins(n, o)[p]) for n, o, p in zip(spatial, out_size, pos))
        count = np.prod([s.stop - s.start for s in sl])
        share = g[(Ellipsis, *pos)] / g.dtype.type(count)
        dx[(Ellipsis, *sl)] += share.reshape(share.shape + (1,) * nd)
    return _ret(dx, self.dtype)


@_kernel("_adaptive_avg_pool2d_backward.default")
def _adaptive_avg_pool2d_backward(grad_output, self):
    return _adaptive_backward(grad_output, self, 2)


@_kernel("_adaptive_avg_pool3d_backward.default")
def _adaptive_avg_pool3d_backward(grad_output, self):
    return _adaptive_backward(grad_output, self, 3)


def _adaptive_max(self, output_size):
    """Max over torch's adaptive bins of the last len(output_size) dimensions,
    with the flat index of each maximum in its plane or volume (h * W + w,
    d * H * W + h * W + w; the first one on ties, as torch; NaN wins)."""
    nd = len(output_size)
    spatial, lead = self.shape[-nd:], self.shape[:-nd]
    out = np.empty(lead + tuple(output_size), self.dtype)
    idx = np.empty(lead + tuple(output_size), _I64)
    bins = [_bins(n, o) for n, o in zip(spatial, output_size)]
    for pos in np.ndindex(*output_size):
        window = [bins[d][p] for d, p in enumerate(pos)]
        win = self[(Ellipsis, *(slice(a, b) for a, b in window))].reshape(lead + (-1,))
        k = np.argmax(win, axis=-1)
        nan = np.isnan(win)
        if nan.any():
            k = np.where(nan.any(axis=-1), np.argmax(nan, axis=-1), k)
        out[(Ellipsis, *pos)] = np.take_along_axis(win, k[..., None], -1)[..., 0]
        flat = np.zeros_like(k)
        for d, c in enumerate(np.unravel_index(k, [b - a for a, b in window])):
            flat = flat * spatial[d] + window[d][0] + c
        idx[(Ellipsis, *pos)] = flat
    return out, idx


def _adaptive_max_backward(grad_output, self, indices, nd):
    """Each output's gradient added at the input position its index names."""
    lead = int(np.prod(self.shape[:-nd], dtype=np.int64))
    plane = int(np.prod(self.shape[-nd:], dtype=np.int64))
    g = _f32(grad_output).reshape(lead, -1)
    flat = indices.reshape(lead, -1) + np.arange(lead, dtype=_I64)[:, None] * plane
    dx = np.zeros(lead * plane, g.dtype)
    np.add.at(dx, flat.reshape(-1), g.reshape(-1))
    return _ret(dx.reshape(self.shape), self.dtype)


@_kernel("adaptive_max_pool2d.default")
def adaptive_max_pool2d(self, output_size):
    return _adaptive_max(self, output_size)


@_kernel("adaptive_max_pool3d.default")
def adaptive_max_pool3d(self, output_size):
    return _adaptive_max(self, output_size)


@_kernel("adaptive_max_pool2d_backward.default")
def adaptive_max_pool2d_backward(grad_output, self, indices):
    return _adaptive_max_backward(grad_output, self, indices, 2)


@_kernel("adaptive_max_pool3d_backward.default")
def adaptive_max_pool3d_backward(grad_output, self, indices):
    return _adaptive_max_backward(grad_output, self, indices, 3)


# ---------------------------------------------------------------------------
# 3-d pooling (N-d window loops)
# ---------------------------------------------------------------------------


def _triple(v, default=None):
    if v is None or (not isinstance(v, (int, np.integer)) and len(v) == 0):
        return default
    if isinstance(v, (int, np.integer)):
        return (int(v),) * 3
    return tuple(int(e) for e in v) * (3 if len(v) == 1 else 1)


def _pool_out(n, k, s, p, d, ceil_mode):
    eff = d * (k - 1) + 1
    num = n + 2 * p - eff
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    k = _triple(kernel_size)
    s = _triple(stride, k)
    p = _triple(padding, (0, 0, 0))
    d = _triple(dilation, (1, 1, 1))
    spatial = x.shape[-3:]
    out = tuple(_pool_out(n, kk, ss, pp, dd, ceil_mode) for n, kk, ss, pp, dd in zip(spatial, k, s, p, d))
    return k, s, p, d, spatial, out


def _windows(k, s, p, d, spatial, out):
    """Per kernel offset: the flat input position of each output's tap and
    whether the tap is inside the input."""
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    for offs in np.ndindex(*k):
        pos = [g * ss - pp + o * dd for g, ss, pp, o, dd in zip(grids, s, p, offs, d)]
        inside = np.ones(out, bool)
        for q, n in zip(pos, spatial):
            inside &= (q >= 0) & (q < n)
        lin = (np.clip(pos[0], 0, spatial[0] - 1) * spatial[1] + np.clip(pos[1], 0, spatial[1] - 1)) \
            * spatial[2] + np.clip(pos[2], 0, spatial[2] - 1)
        yield lin, inside


@_kernel("max_pool3d_with_indices.default")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k, s, p, d, spatial, out = _pool_geometry(self, kernel_size, stride, padding, dilation, ceil_mode)
    lead = self.shape[:-3]
    flat = self.reshape(lead + (-1,))
    floating = self.dtype.kind == "f"
    best = np.full(lead + out, -np.inf if floating else np.iinfo(self.dtype).min, dtype=self.dtype)
    best_idx = np.full(lead + out, -1, _I64)
    for lin, inside in _windows(k, s, p, d, spatial, out):
        v = flat[..., lin]
        better = inside & ((v > best) | (np.isnan(v) & ~np.isnan(best)) if floating else inside & (v > best))
        better |= inside & (best_idx < 0)
        best = np.where(better, v, best)
        best_idx = np.where(better, lin, best_idx)
    return _ret(best, self.dtype), best_idx


@_kernel("max_pool3d_with_indices_backward.default")
def max_pool3d_with_indices_backward(grad_output, self, indices, kernel_size, stride, padding, dilation,
                                     ceil_mode):
    g = _f32(grad_output)
    lead = self.shape[:-3]
    n_lead = int(np.prod(lead)) if lead else 1
    dx = np.zeros((n_lead, int(np.prod(self.shape[-3:]))), g.dtype)
    rows = np.repeat(np.arange(n_lead), int(np.prod(g.shape[-3:])))
    np.add.at(dx, (rows, indices.reshape(-1)), g.reshape(-1))
    return _ret(dx.reshape(self.shape), self.dtype)


def _avg3d_divisor(k, s, p, spatial, out, count_include_pad, divisor_override):
    if divisor_override:
        return np.full(out, divisor_override)
    grids = np.meshgrid(*[np.arange(o) for o in out], indexing="ij")
    pool = np.ones(out, np.int64)
    count = np.ones(out, np.int64)
    for g, ss, pp, kk, n in zip(grids, s, p, k, spatial):
        st = g * ss - pp
        en = np.minimum(st + kk, n + pp)
        pool *= en - st
        count *= np.minimum(en, n) - np.maximum(st, 0)
    return pool if count_include_pad else count


@_kernel("avg_pool3d.default")
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k, s, p, d, spatial, out = _pool_geometry(self, kernel_size, stride, padding, 1, ceil_mode)
    x = _f32(self)
    lead = x.shape[:-3]
    total = np.zeros(lead + out, x.dtype)
    flat = x.reshape(lead + (-1,))
    for lin, inside in _windows(k, s, p, d, spatial, out):
        total += np.where(inside, flat[..., lin], 0)
    div = _avg3d_divisor(k, s, p, spatial, out, count_include_pad, divisor_override)
    return _ret(total / div.astype(x.dtype), self.dtype)


@_kernel("avg_pool3d_backward.default")
def avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override):
    k, s, p, d, spatial, out = _pool_geometry(self, kernel_size, stride, padding, 1, ceil_mode)
    g = _f32(grad_output)
    div = _avg3d_divisor(k, s, p, spatial, out, count_include_pad, divisor_override)
    share = g / div.astype(g.dtype)
    lead = self.shape[:-3]
    n_lead = int(np.prod(lead)) if lead else 1
    share = share.reshape(n_lead, -1)
    dx = np.zeros((n_lead, int(np.prod(spatial))), g.dtype)
    rows = np.arange(n_lead)[:, None]
    for lin, inside in _windows(k, s, p, d, spatial, out):
        np.add.at(dx, (rows, lin.reshape(1, -1)), share * inside.reshape(1, -1))
    return _ret(dx.reshape(self.shape), self.dtype)


@_kernel("adaptive_avg_pool1d.default")
def adaptive_avg_pool1d(self, output_size):
    return _adaptive_avg(self, list(output_size))


@_kernel("avg_pool1d.default")
def avg_pool1d(self, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True):
    """The 3-d kernel on a (..., 1, 1, L) view."""
    one = lambda v, d: [d, d, int(v[0]) if len(v) else None]  # noqa: E731
    k = one(kernel_size, 1)
    st = one(stride, 1) if len(stride) else k
    out = avg_pool3d(self[..., None, None, :], k, st, one(padding, 0), ceil_mode, count_include_pad)
    return out[..., 0, 0, :]
