"""The optimizer updates of `ipu.sgd` and `ipu.adam` on the executor's
float32 arrays (zero-copy tensor views), with torch's fused CPU kernels.

torch.optim's SGD and Adam/AdamW on CPU tensors run, by default, their
single-tensor algorithms: one pass over memory per operation (`mul_`,
`add_`, `lerp_`, `addcmul_`, `sqrt`, `addcdiv_`). torch also has fused CPU
kernels for both (`torch._fused_sgd_`, `torch._fused_adam_`,
`torch._fused_adamw_`: what `fused=True` selects), which read each weight
and its state once. The IPU applies its optimizer as one fused update per
weight too, so these are the kernels used here:

- SGD: the fused kernel is bit for bit the single-tensor algorithm (tested
  over momentum, dampening, Nesterov and weight decay), 0.81 against 1.34 ms
  for three 1024x1024 weights (benchmarks/RESULTS.md, 2026-11-24);
- Adam/AdamW: the fused kernel is torch's `fused=True` bit for bit and
  differs from the default single-tensor algorithm by at most a few units
  in the last place (a different rounding of the same formula), 1.3
  against 5.4 ms for the same weights.

The numpy kernels (backend/kernels/ipu.py) follow the single-tensor
operation order with numpy ufuncs, on one core. These kernels take their
signature and fall back to them for what they do not cover: float16/float64
weights or state, PopTorch's combined SGD variant (velocity scaling), PopART's
SGD state forms,
loss-scaled gradients, Adam without bias correction and PopART's AdaMax.
"""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels.ipu import _hp
from tilefx.backend.kernels.ipu import adam as numpy_adam
from tilefx.backend.kernels.ipu import sgd as numpy_sgd

_F32 = np.dtype(np.float32)


def _f32(*arrays) -> bool:
    return all(a is None or (type(a) is np.ndarray and a.dtype == _F32) for a in arrays)


def _owned(a: np.ndarray, inplace: bool) -> np.ndarray:
    """`a` itself when the executor gave it up for the update, else a
    row-major copy (the fused kernels walk every operand's memory in one
    order: they take dense row-major tensors)."""
    return a if inplace and a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C")


def make(torch, as_tensor):
    """The two kernels, bound to the torch module; `as_tensor(array)` makes
    the tensor sharing an array's memory (aten_kernels.py's)."""
    T = torch.from_numpy

    def _dense(a: np.ndarray):
        """A gradient as the fused kernels read it: row-major (a transposed or
        broadcast one is copied)."""
        return as_tensor(a if a.flags.c_contiguous else np.ascontiguousarray(a))

    def sgd(weight, grad, lr, velocity, step, momentum_var, dampening_var, weight_decay_var,
            nesterov_var, velocity_scaling_var, *, inplace=False, **props):
        """One weight's update: a batch of one."""
        (r,) = sgd_batched([((weight, grad, lr, velocity, step, momentum_var, dampening_var,
                              weight_decay_var, nesterov_var, velocity_scaling_var), props, inplace)])
        return r[0] if velocity is None else r

    def adam(weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var, eps_var,
             weight_decay_var, *, inplace=False, **props):
        """One weight's update: a batch of one."""
        (r,) = adam_batched([((weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var,
                               eps_var, weight_decay_var), props, inplace)])
        return r

    def sgd_batched(members):
        """`sgd` for several weights: [(operands, properties, inplace)] ->
        [(weight,) or (weight, velocity)]. The weights whose update has the
        same hyper-parameters go to one `_fused_sgd_` call (it updates each
        tensor of its lists as a call for that tensor alone would)."""
        out: list = [None] * len(members)
        buckets: dict[tuple, list[int]] = {}
        arrays: list = [None] * len(members)
        for k, (vals, props, inplace) in enumerate(members):
            weight, grad, lr, velocity, step = vals[:5]
            m_var, d_var, wd_var, n_var = vals[5:9]
            if props.get("combined") or props.get("popart_state") or props.get("grad_scale", 1.0) != 1.0 or \
                    not _f32(weight, grad, velocity):
                r = numpy_sgd(*vals, **props, inplace=inplace)
                out[k] = r if isinstance(r, tuple) else (r,)
                continue
            momentum = float(_hp(m_var, props.get("momentum")))
            with_velocity = velocity is not None and momentum != 0.0
            key = (float(lr), momentum, float(_hp(d_var, props.get("dampening"))),
                   float(_hp(wd_var, props.get("weight_decay"))),
                   bool(_hp(n_var, props.get("nesterov"))), with_velocity,
                   with_velocity and int(step) <= 1)
            w_arr = _owned(weight, inplace)
            v_arr = _owned(velocity, inplace) if with_velocity else None
            arrays[k] = (w_arr, _dense(grad), v_arr, velocity)
            buckets.setdefault(key, []).append(k)
        for (lr, momentum, dampening, wd, nesterov, with_velocity, first), ks in buckets.items():
            torch._fused_sgd_([T(arrays[k][0]) for k in ks], [arrays[k][1] for k in ks],
                              [T(arrays[k][2]) for k in ks] if with_velocity else [],
                              weight_decay=wd, momentum=momentum, lr=lr, dampening=dampening,
                              nesterov=nesterov, maximize=False, is_first_step=first)
            for k in ks:
                w_arr, _, v_arr, velocity = arrays[k]
                out[k] = (w_arr,) if velocity is None else (w_arr, v_arr if with_velocity else velocity)
        return out

    def adam_batched(members):
        """`adam` for several weights: [(operands, properties, inplace)] ->
        [(weight, exp_avg, exp_avg_sq)], one fused call per set of equal
        hyper-parameters and step."""
        # (this loop runs once a weight per step, on caches the step's kernels
        # left cold: ~30 us a weight before its tests were written out)
        out: list = [None] * len(members)
        buckets: dict[tuple, list[int]] = {}
        arrays: list = [None] * len(members)
        for k, (vals, props, inplace) in enumerate(members):
            weight, grad, exp_avg, exp_avg_sq, step, lr, b1_var, b2_var, eps_var, wd_var = vals
            if props.get("grad_scale", 1.0) != 1.0 or not props.get("bias_correction") or \
                    props.get("infinity_norm") or \
                    not _f32(weight, grad, exp_avg, exp_avg_sq):
                out[k] = numpy_adam(*vals, **props, inplace=inplace)
                continue
            key = (bool(props["decoupled"]), float(lr),
                   float(props.get("beta1") if b1_var is None else b1_var),
                   float(props.get("beta2") if b2_var is None else b2_var),
                   float(props.get("eps") if eps_var is None else eps_var),
                   float(props.get("weight_decay") if wd_var is None else wd_var), float(step))
            if inplace and weight.flags.writeable and weight.flags.c_contiguous and \
                    exp_avg.flags.writeable and exp_avg.flags.c_contiguous and \
                    exp_avg_sq.flags.writeable and exp_avg_sq.flags.c_contiguous:
                owned = (weight, exp_avg, exp_avg_sq)
            else:
                owned = (_owned(weight, inplace), _owned(exp_avg, inplace), _owned(exp_avg_sq, inplace))
            arrays[k] = (owned, _dense(grad))
            bucket = buckets.get(key)
            if bucket is None:
                buckets[key] = [k]
            else:
                bucket.append(k)
        for (decoupled, lr, beta1, beta2, eps, wd, step), ks in buckets.items():
            fused = torch._fused_adamw_ if decoupled else torch._fused_adam_
            ws, grads, avgs, sqs = [], [], [], []
            for k in ks:
                (w, a, q), g = arrays[k]
                ws.append(T(w))
                avgs.append(T(a))
                sqs.append(T(q))
                grads.append(g)
                out[k] = (w, a, q)
            # the kernel only reads the steps: one tensor for all
            fused(ws, grads, avgs, sqs, [], [torch.tensor(step)] * len(ks), lr=lr, beta1=beta1,
                  beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False, maximize=False)
        return out

    sgd.batched = sgd_batched
    adam.batched = adam_batched
    return {"ipu.sgd": sgd, "ipu.adam": adam}
