"""Numpy kernels of the `ipu` ops, same calling convention as kernels.py:
operands positionally (None for an absent optional one), properties by name."""

from __future__ import annotations

import numpy as np


def _f32(x):
    return x.astype(np.float32) if x.dtype == np.float16 else x


def identity_loss(x, reduction="none"):
    if reduction == "sum":
        return np.asarray(_f32(x).sum(dtype=np.float32)).astype(x.dtype)
    if reduction == "mean":
        return np.asarray(_f32(x).mean(dtype=np.float32)).astype(x.dtype)
    return x


def nop(x):
    return x


def print_tensor(x, title=None):
    print(f"{title or 'tensor'}: {np.array2string(x, precision=6)}", flush=True)
    return x


def set_available_memory(x, proportion):
    return x


def serialized_matmul(lhs, rhs, mode, factor, keep_precision=False):
    """Numerically a plain matmul, computed in `factor` pieces like the device."""
    a, b = _f32(lhs), _f32(rhs)
    if mode == "input_channels":
        out = np.concatenate([np.matmul(p, b) for p in np.split(a, factor, axis=-2)], axis=-2)
    elif mode == "output_channels":
        out = np.concatenate([np.matmul(a, p) for p in np.split(b, factor, axis=-1)], axis=-1)
    else:
        parts = zip(np.split(a, factor, axis=-1), np.split(b, factor, axis=-2))
        out = sum(np.matmul(pa, pb) for pa, pb in parts)
    return out.astype(lhs.dtype, copy=False)


def accumulate(acc, grad):
    return acc + grad


def sgd(weight, grad, lr, velocity, step, *, momentum, dampening, weight_decay, nesterov, grad_scale):
    """torch.optim.SGD's update on the accumulated gradient times grad_scale."""
    g = grad * np.float32(grad_scale) if grad_scale != 1.0 else grad
    lr = np.float32(lr)
    if weight_decay:
        g = g + np.float32(weight_decay) * weight
    if velocity is not None:
        if int(step) <= 1:
            v = g.copy()
        else:
            v = np.float32(momentum) * velocity + np.float32(1.0 - dampening) * g
        d = g + np.float32(momentum) * v if nesterov else v
        return (weight - lr * d).astype(weight.dtype), v
    return (weight - lr * g).astype(weight.dtype)


def adam(weight, grad, exp_avg, exp_avg_sq, step, lr, *, beta1, beta2, eps, weight_decay,
         decoupled, bias_correction, grad_scale):
    """torch.optim.Adam / AdamW, in the same operation order (float32)."""
    g = grad * np.float32(grad_scale) if grad_scale != 1.0 else grad
    lr_f = float(lr)
    t = float(step)
    w = weight
    if weight_decay:
        if decoupled:
            w = w * np.float32(1.0 - lr_f * weight_decay)
        else:
            g = g + np.float32(weight_decay) * w
    m = exp_avg + (g - exp_avg) * np.float32(1.0 - beta1)
    v = exp_avg_sq * np.float32(beta2) + np.float32(1.0 - beta2) * g * g
    if bias_correction:
        bc1 = 1.0 - beta1 ** t
        bc2_sqrt = (1.0 - beta2 ** t) ** 0.5
    else:
        bc1 = bc2_sqrt = 1.0
    step_size = lr_f / bc1
    denom = np.sqrt(v) / np.float32(bc2_sqrt) + np.float32(eps)
    w = w - np.float32(step_size) * (m / denom)
    return w.astype(weight.dtype), m, v


IPU_KERNELS = {
    "ipu.identity_loss": identity_loss,
    "ipu.nop": nop,
    "ipu.print_tensor": print_tensor,
    "ipu.set_available_memory": set_available_memory,
    "ipu.serialized_matmul": serialized_matmul,
    "ipu.accumulate": accumulate,
    "ipu.sgd": sgd,
    "ipu.adam": adam,
}
