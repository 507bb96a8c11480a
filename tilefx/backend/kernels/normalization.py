"""Layer and batch normalization."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import CHUNK, by_rows, registrar
from tilefx.backend.kernels._common import (
    _F16,
    _F32,
    _f32,
    _ret,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# normalization and dropout
# ---------------------------------------------------------------------------


def _layer_norm_rows(x, out, mean, rstd, w, b, eps):
    """Rows of a 2-d x (one normalized row each) into out, their mean and 1/std."""
    axes = (1,)
    np.mean(x, axis=axes, keepdims=True, dtype=x.dtype, out=mean)
    d = np.subtract(x, mean, out=out)
    np.mean(np.square(d), axis=axes, keepdims=True, dtype=x.dtype, out=rstd)
    rstd += x.dtype.type(eps)
    np.sqrt(rstd, out=rstd)
    np.divide(1, rstd, out=rstd)
    np.multiply(d, rstd, out=d)  # normalized in place
    if w is not None:
        d *= w
    if b is not None:
        d += b


@_kernel("native_layer_norm.default")
def native_layer_norm(input, weight, bias, normalized_shape, eps):
    k = len(normalized_shape)
    x = _f32(input)
    w = _f32(weight) if weight is not None else None
    b = _f32(bias) if bias is not None else None
    stat_shape = x.shape[:x.ndim - k] + (1,) * k
    mean, rstd = np.empty(stat_shape, x.dtype), np.empty(stat_shape, x.dtype)
    out = np.empty(x.shape, x.dtype)
    n = x.shape[-1] if k == 1 and x.ndim else 0
    if k == 1 and x.size >= CHUNK and n > 0:  # by runs of rows, in cache, over the kernel threads
        x2, o2 = x.reshape(-1, n), out.reshape(-1, n)
        m2, r2 = mean.reshape(-1, 1), rstd.reshape(-1, 1)
        by_rows(lambda lo, hi: _layer_norm_rows(x2[lo:hi], o2[lo:hi], m2[lo:hi], r2[lo:hi], w, b,
                                                eps), x2.shape[0], n)
    else:
        axes = tuple(range(x.ndim - k, x.ndim))
        np.mean(x, axis=axes, keepdims=True, dtype=x.dtype, out=mean)
        d = np.subtract(x, mean, out=out)
        np.mean(np.square(d), axis=axes, keepdims=True, dtype=x.dtype, out=rstd)
        rstd[...] = 1 / np.sqrt(rstd + x.dtype.type(eps))
        np.multiply(d, rstd, out=d)  # normalized in place
        if w is not None:
            d *= w
        if b is not None:
            d += b
    return _ret(out, input.dtype), _ret(mean, input.dtype), _ret(rstd, input.dtype)


@_kernel("native_layer_norm_backward.default")
def native_layer_norm_backward(
    grad_out, input, mean, rstd, weight, bias, normalized_shape, output_mask
):
    k = len(normalized_shape)
    x, g = _f32(input), _f32(grad_out)
    mu, rs = _f32(mean), _f32(rstd)
    axes = tuple(range(x.ndim - k, x.ndim))
    batch_axes = tuple(range(x.ndim - k))
    xhat = np.subtract(x, mu)
    xhat *= rs
    gi = gw = gb = None
    if output_mask[0]:
        gg = g * _f32(weight) if weight is not None else g
        m1 = np.mean(gg, axis=axes, keepdims=True)
        t = np.multiply(gg, xhat)
        m2 = np.mean(t, axis=axes, keepdims=True)
        np.multiply(xhat, m2, out=t)  # rs (gg - m1 - xhat m2), in temporaries of our own
        r = np.subtract(gg, m1, out=gg) if gg is not g else gg - m1
        r -= t
        r *= rs
        gi = _ret(r, input.dtype)
    if output_mask[1] and weight is not None:
        gw = _ret(np.sum(np.multiply(g, xhat, out=xhat), axis=batch_axes), weight.dtype)
    if output_mask[2] and bias is not None:
        gb = _ret(np.sum(g, axis=batch_axes), bias.dtype)
    return gi, gw, gb


def _bn_shape(x, v):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


@_kernel("_native_batch_norm_legit_functional.default")
def _native_batch_norm_legit_functional(
    input, weight, bias, running_mean, running_var, training, momentum, eps
):
    x = _f32(input)
    t = x.dtype.type
    stat_dt = running_mean.dtype if input.dtype == _F16 else input.dtype
    if not training:
        out, _, _ = _native_batch_norm_legit_no_training(
            input, weight, bias, running_mean, running_var, momentum, eps
        )
        empty = np.empty((0,), dtype=stat_dt)
        return out, empty, empty.copy(), running_mean.copy(), running_var.copy()
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    mean = np.mean(x, axis=axes, dtype=x.dtype)
    d = x - _bn_shape(x, mean)
    var = np.mean(d * d, axis=axes, dtype=x.dtype)
    invstd = 1 / np.sqrt(var + t(eps))
    scale = invstd if weight is None else invstd * _f32(weight)
    d *= _bn_shape(x, scale)
    if bias is not None:
        d += _bn_shape(x, _f32(bias))
    rm, rv = _f32(running_mean), _f32(running_var)
    m = rm.dtype.type(momentum)
    unbiased = var * t(n / max(n - 1, 1))
    new_rm = (1 - m) * rm + m * mean
    new_rv = (1 - m) * rv + m * unbiased
    return (
        _ret(d, input.dtype),
        _ret(mean, stat_dt),
        _ret(invstd, stat_dt),
        _ret(new_rm, running_mean.dtype),
        _ret(new_rv, running_var.dtype),
    )


@_kernel("_native_batch_norm_legit_no_training.default")
def _native_batch_norm_legit_no_training(
    input, weight, bias, running_mean, running_var, momentum, eps
):
    x = _f32(input)
    t = x.dtype.type
    invstd = 1 / np.sqrt(_f32(running_var).astype(x.dtype) + t(eps))
    alpha = invstd if weight is None else invstd * _f32(weight)
    beta = -_f32(running_mean).astype(x.dtype) * alpha
    if bias is not None:
        beta = beta + _f32(bias)
    out = x * _bn_shape(x, alpha) + _bn_shape(x, beta)
    stat_dt = running_mean.dtype if input.dtype == _F16 else input.dtype
    empty = np.empty((0,), dtype=stat_dt)
    return _ret(out, input.dtype), empty, empty.copy()




@_kernel("_native_batch_norm_legit.default")
def _native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """ATen updates running_mean/var in place; traced graphs use the
    functional form, so the kernel returns the three outputs only."""
    return _native_batch_norm_legit_functional(
        input, weight, bias, running_mean, running_var, training, momentum, eps)[:3]


@_kernel("_native_batch_norm_legit.no_stats")
def _native_batch_norm_legit_no_stats(input, weight, bias, training, momentum, eps):
    c = input.shape[1]
    stats = np.zeros(c, dtype=_F32 if input.dtype == _F16 else input.dtype)
    return _native_batch_norm_legit_functional(
        input, weight, bias, stats, stats + 1, True, momentum, eps)[:3]


# ---------------------------------------------------------------------------
# group norm
# ---------------------------------------------------------------------------


@_kernel("native_group_norm.default")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    x = _f32(input).reshape(N, group, -1)
    t = x.dtype.type
    mean = x.mean(axis=2, dtype=x.dtype)
    d = x - mean[..., None]
    var = (d * d).mean(axis=2, dtype=x.dtype)
    rstd = 1 / np.sqrt(var + t(eps))
    y = (d * rstd[..., None]).reshape(N, C, -1)
    if weight is not None:
        y = y * _f32(weight).reshape(1, C, 1)
    if bias is not None:
        y = y + _f32(bias).reshape(1, C, 1)
    stat_dt = input.dtype
    return _ret(y.reshape(input.shape), input.dtype), _ret(mean, stat_dt), _ret(rstd, stat_dt)


@_kernel("native_group_norm_backward.default")
def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    dy = _f32(grad_out).reshape(N, C, -1)
    x = _f32(input).reshape(N, C, -1)
    t = x.dtype.type
    cg = C // group
    mu = _f32(mean).reshape(N, group, 1, 1)
    rs = _f32(rstd).reshape(N, group, 1, 1)
    xg = x.reshape(N, group, cg, -1)
    xhat = (xg - mu) * rs
    gi = gw = gb = None
    if output_mask[0]:
        g = dy if weight is None else dy * _f32(weight).reshape(1, C, 1)
        g = g.reshape(N, group, cg, -1)
        m = t(cg * x.shape[2])
        mean_g = g.sum(axis=(2, 3), keepdims=True) / m
        mean_gx = (g * xhat).sum(axis=(2, 3), keepdims=True) / m
        gi = _ret((rs * (g - mean_g - xhat * mean_gx)).reshape(input.shape), input.dtype)
    if output_mask[1]:
        gw = _ret((dy * xhat.reshape(N, C, -1)).sum(axis=(0, 2)), input.dtype)
    if output_mask[2]:
        gb = _ret(dy.sum(axis=(0, 2)), input.dtype)
    return gi, gw, gb


@_kernel("_weight_norm_interface_backward.default")
def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    """Gradients of w = g * v / |v| (the norm over every axis but `dim`):
    grad_g = sum(grad_w * v) / |v|; grad_v = g / |v| * (grad_w - v * grad_g / |v|)."""
    ct = np.float32 if grad_w.dtype == np.float16 else grad_w.dtype
    gw, v = grad_w.astype(ct), saved_v.astype(ct)
    g, norm = saved_g.astype(ct), saved_norms.astype(ct)
    axes = tuple(a for a in range(v.ndim) if a != dim % max(v.ndim, 1))
    dot = np.sum(gw * v, axis=axes, keepdims=True, dtype=ct)
    grad_g = dot / norm
    grad_v = (g / norm) * (gw - v * (grad_g / norm))
    return grad_v.astype(saved_v.dtype), grad_g.reshape(saved_g.shape).astype(saved_g.dtype)
