"""The optimizer updates of `ipu.sgd` and `ipu.adam` as torch.optim computes
them, on the executor's float32 arrays (zero-copy tensor views).

torch.optim's SGD and Adam/AdamW on CPU tensors run their single-tensor
algorithms: `add_` with `alpha` (a fused multiply-add in ATen's vectorised
kernel), `lerp_`, `addcmul_`, `addcdiv_`, on torch's intra-op threads. The
numpy kernels (backend/kernels/ipu.py) follow the same operation order with
numpy ufuncs, which round the multiply-adds twice and run on one core. These
versions make a training step's weights PyTorch's bit for bit and let the
update run on the thread pool the rest of the program (lowering/aten_kernels.py)
uses. They take the numpy kernels' signature and fall back to them for what
they do not cover: float16/float64 weights or state, PopTorch's combined SGD
variant (velocity scaling) and loss-scaled gradients.
"""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels.ipu import _hp
from tilefx.backend.kernels.ipu import adam as numpy_adam
from tilefx.backend.kernels.ipu import sgd as numpy_sgd
from tilefx.lowering.aten_kernels import _as_tensor

_F32 = np.dtype(np.float32)


def _f32(*arrays) -> bool:
    return all(a is None or (type(a) is np.ndarray and a.dtype == _F32) for a in arrays)


def _owned(a: np.ndarray, inplace: bool) -> np.ndarray:
    """`a` itself when the executor gave it up for the update, else a copy."""
    return a if inplace and a.flags.writeable else np.array(a)


def make(torch):
    """The two kernels, bound to the torch module."""
    T = torch.from_numpy

    def sgd(weight, grad, lr, velocity, step, momentum_var, dampening_var, weight_decay_var,
            nesterov_var, velocity_scaling_var, *, momentum=None, dampening=None,
            weight_decay=None, nesterov=None, grad_scale=1.0, velocity_scaling=None,
            combined=False, inplace=False):
        if combined or grad_scale != 1.0 or not _f32(weight, grad, velocity):
            return numpy_sgd(weight, grad, lr, velocity, step, momentum_var, dampening_var,
                             weight_decay_var, nesterov_var, velocity_scaling_var,
                             momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                             nesterov=nesterov, grad_scale=grad_scale,
                             velocity_scaling=velocity_scaling, combined=combined, inplace=inplace)
        momentum = _hp(momentum_var, momentum)
        dampening = _hp(dampening_var, dampening)
        weight_decay = _hp(weight_decay_var, weight_decay)
        nesterov = bool(_hp(nesterov_var, nesterov))
        w_arr = _owned(weight, inplace)
        w, d_p = T(w_arr), _as_tensor(grad)
        if weight_decay:
            d_p = d_p.add(w, alpha=weight_decay)
        if velocity is None or momentum == 0.0:
            w.add_(d_p, alpha=-float(lr))
            return w_arr if velocity is None else (w_arr, velocity)
        v_arr = _owned(velocity, inplace)
        buf = T(v_arr)
        if int(step) <= 1:
            buf.copy_(d_p)
        else:
            buf.mul_(momentum).add_(d_p, alpha=1.0 - dampening)
        d_p = d_p.add(buf, alpha=momentum) if nesterov else buf
        w.add_(d_p, alpha=-float(lr))
        return w_arr, v_arr

    def adam(weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var, eps_var,
             weight_decay_var, *, beta1=None, beta2=None, eps=None, weight_decay=None,
             decoupled, bias_correction, grad_scale, inplace=False):
        if grad_scale != 1.0 or not _f32(weight, grad, exp_avg, exp_avg_sq):
            return numpy_adam(weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var,
                              eps_var, weight_decay_var, beta1=beta1, beta2=beta2, eps=eps,
                              weight_decay=weight_decay, decoupled=decoupled,
                              bias_correction=bias_correction, grad_scale=grad_scale,
                              inplace=inplace)
        beta1, beta2 = _hp(beta1_var, beta1), _hp(beta2_var, beta2)
        eps, weight_decay = _hp(eps_var, eps), _hp(weight_decay_var, weight_decay)
        lr, t = float(lr), float(step)
        w_arr, m_arr, v_arr = (_owned(a, inplace) for a in (weight, exp_avg, exp_avg_sq))
        w, m, v = T(w_arr), T(m_arr), T(v_arr)
        g = _as_tensor(grad)
        if weight_decay:
            if decoupled:
                w.mul_(1.0 - lr * weight_decay)
            else:
                g = g.add(w, alpha=weight_decay)
        m.lerp_(g, 1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        if bias_correction:
            step_size = lr / (1.0 - beta1 ** t)
            bc2_sqrt = (1.0 - beta2 ** t) ** 0.5
        else:
            step_size, bc2_sqrt = lr, 1.0
        denom = (v.sqrt() / bc2_sqrt).add_(eps)
        w.addcdiv_(m, denom, value=-step_size)
        return w_arr, m_arr, v_arr

    return {"ipu.sgd": sgd, "ipu.adam": adam}
