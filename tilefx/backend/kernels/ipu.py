"""Numpy kernels of the `ipu` ops, same calling convention as kernels.py:
operands positionally (None for an absent optional one), properties by name."""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels import ctc
from tilefx.backend.kernels._common import in_chunks


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


def print_tensor(x, title=None, format=None):
    print(f"{title or 'tensor'}: {format_tensor(x, format)}", flush=True)
    return x


def format_tensor(x, fmt: dict | None = None) -> str:
    """`x` as `ipu_print_tensor` prints it: summarised past the threshold to
    the edge items, lines within the width, floats with the digits in the
    float format, the separator and brackets given (PRINT_FORMAT_DEFAULTS
    for what `fmt` leaves out)."""
    from tilefx.dialects.ipu import PRINT_FORMAT_DEFAULTS

    f = {**PRINT_FORMAT_DEFAULTS, **(fmt or {})}
    digits, kind = int(f["digits"]), f["float_format"]
    options = {"threshold": int(f["summarise_threshold"]), "edgeitems": int(f["edge_items"]),
               "max_line_width": int(f["max_line_width"]), "separator": f["separator"]}
    if kind == "fixed":
        options.update(precision=digits, floatmode="fixed", suppress_small=True)
    elif kind == "scientific":
        options["formatter"] = {"float_kind": lambda v: f"{v:.{digits}e}"}
    elif kind == "auto":
        options.update(precision=digits, floatmode="maxprec")
    text = np.array2string(np.asarray(_f32(x)), **options)
    return text.translate({ord("["): f["open_bracket"], ord("]"): f["close_bracket"]})


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


def _is_negative_zero(v) -> bool:
    return v.dtype.kind == "f" and v == 0 and bool(np.signbit(v))


def accumulate(acc, grad, inplace=False):
    """acc + grad in the accumulator's type (the gradient is cast to it first).
    `inplace`: the executor owns `acc` (see IN_PLACE_OPERANDS) and the sum goes
    into it when the types allow. An accumulator that is one -0.0 broadcast
    (the executor's before the first micro-batch of an update) adds exactly
    nothing, to any value: the sum is `grad` itself."""
    if acc.dtype == grad.dtype and acc.shape == grad.shape and not any(acc.strides) \
            and acc.size and _is_negative_zero(acc[(0,) * acc.ndim]):
        return grad
    if inplace and acc.dtype == grad.dtype and acc.shape == grad.shape:
        return np.add(acc, grad, out=acc)
    return (acc + grad).astype(grad.dtype, copy=False)


# -- optimizers ---------------------------------------------------------------
# Each update computes in float32 (float64 for float64 weights) and stores the
# new weight in the weight's type and every state tensor in its own type (the
# accumulation types: fp16 state is computed in fp32 and rounded). A
# hyper-parameter arrives as an operand (`<name>_var`, variable) or as a
# property (constant): the operand wins.

def _ct(weight):
    return np.float64 if weight.dtype == np.float64 else np.float32


def _hp(var, const):
    return const if var is None else float(var)


def _grad(grad, grad_scale, ct):
    g = grad.astype(ct, copy=False)
    return g * ct(grad_scale) if grad_scale != 1.0 else g


def _store(value, like):
    """`value` stored in the state tensor's type, and read back as computed with."""
    stored = value.astype(like.dtype, copy=False)
    return stored, stored.astype(value.dtype, copy=False)


def sgd(weight, grad, lr, velocity, step, momentum_var, dampening_var, weight_decay_var,
        nesterov_var, velocity_scaling_var, *, momentum=None, dampening=None, weight_decay=None,
        nesterov=None, grad_scale=1.0, velocity_scaling=None, combined=False, popart_state=None,
        inplace=False):
    """torch.optim.SGD's update on the accumulated gradient times grad_scale.

    Separate variant: `velocity` is torch's momentum buffer. Combined variant:
    `velocity` holds velocity x velocity_scaling (PopTorch's combined tensor).
    `popart_state`: PopART's equations and state (`_popart_sgd`).
    `inplace`: the executor owns `weight` and `velocity` (IN_PLACE_OPERANDS);
    the separate variant then updates them in place, same operations."""
    ct = _ct(weight)
    momentum = _hp(momentum_var, momentum)
    dampening = _hp(dampening_var, dampening)
    weight_decay = _hp(weight_decay_var, weight_decay)
    nesterov = bool(_hp(nesterov_var, nesterov))
    w = weight.astype(ct, copy=False)
    g = _grad(grad, grad_scale, ct)
    lr = ct(lr)
    if popart_state is not None and velocity is not None:
        vs = ct(_hp(velocity_scaling_var, velocity_scaling) or 1.0)
        return _popart_sgd(weight, w, g, lr, velocity, int(step) <= 1, ct(momentum), ct(1.0 - dampening),
                           ct(weight_decay), vs, nesterov, popart_state == "combined")
    if weight_decay:
        g = g + ct(weight_decay) * w
    if inplace and not combined and _all_of_type(ct, weight, velocity):
        return _sgd_in_place(weight, g, lr, velocity, step, ct(momentum),
                             ct(1.0 - dampening), nesterov)
    if velocity is None or momentum == 0.0:
        new_w = (w - lr * g).astype(weight.dtype, copy=False)
        return new_w if velocity is None else (new_w, velocity)
    first = int(step) <= 1
    if combined:
        vs = ct(_hp(velocity_scaling_var, velocity_scaling) or 1.0)
        scaled = vs * g if first else \
            ct(momentum) * velocity.astype(ct, copy=False) + ct(1.0 - dampening) * (vs * g)
        new_velocity, scaled = _store(scaled, velocity)
        v = scaled / vs
    else:
        v = g.copy() if first else \
            ct(momentum) * velocity.astype(ct, copy=False) + ct(1.0 - dampening) * g
        new_velocity, v = _store(v, velocity)
    d = g + ct(momentum) * v if nesterov else v
    step_ = lr * d  # a fresh array: the new weight goes into it
    return np.subtract(w, step_, out=step_).astype(weight.dtype, copy=False), new_velocity


def _popart_sgd(weight, w, g, lr, velocity, first, mm, keep, wd, vs, nesterov, folded):
    """PopART's SGD with momentum (its optimizer.hpp / sgd.hpp equations, the
    compound scalars swd1 = (1 - dm) wd vs, dpsf = (1 - dm) vs, slr = lr / vs):

    Separate (SGD2, state Accl1___ = v):  v = (mm v + swd1 w) + dpsf g
    Combined (SGD1, state Accl___ = a):   v = a + dpsf g, and after the weight
        update a = mm v + swd1 w_new (the next step's momentum and weight decay
        folded in); a starts at swd1 w (`first`: no update made yet)
    then w -= slr v, or with Nesterov w -= slr (vs (g + wd w) + mm v).
    From v = 0 this is v = mm v + (1 - dm)(g + wd w): torch.optim.SGD but for
    its first step, which takes g + wd w undamped."""
    swd1, dpsf = keep * wd * vs, keep * vs
    state = velocity.astype(w.dtype, copy=False)
    if folded:
        v = (swd1 * w if first else state) + dpsf * g
    else:
        v = (mm * state + swd1 * w) + dpsf * g
    d = vs * (g + wd * w) + mm * v if nesterov else v
    new_w = w - (lr / vs) * d
    new_state = mm * v + swd1 * new_w if folded else v
    # (np.asarray: arithmetic on 0-d arrays gives numpy scalars)
    return (np.asarray(new_w.astype(weight.dtype, copy=False)),
            np.asarray(new_state.astype(velocity.dtype, copy=False)))


def _decayed_first_moment(weight, g, exp_avg, ct, lr, beta1, weight_decay, decoupled):
    """What Adam and AdaMax share, in the compute type: the weight decayed
    (decoupled: w (1 - lr wd)) or the decay added to the gradient (L2), and
    the first moment m = m + (1 - b1)(g - m). Returns the weight, the
    gradient, the stored moment and its compute-type value."""
    w = weight.astype(ct, copy=False)
    if weight_decay:
        if decoupled:
            w = w * ct(1.0 - lr * weight_decay)
        else:
            g = g + ct(weight_decay) * w
    m0 = exp_avg.astype(ct, copy=False)
    m = np.subtract(g, m0)
    m *= ct(1.0 - beta1)
    m += m0
    new_m, m = _store(m, exp_avg)
    return w, g, new_m, m


def _adamax(weight, g, exp_avg, exp_avg_sq, ct, lr, beta1, beta2, eps, weight_decay, decoupled, bc1):
    """PopART's AdaMax (AdamMode.AdaMax): Adam with the infinity norm in place
    of the second moment, without its bias correction, eps outside the max:

        m = b1 m + (1 - b1) g;   u = max(b2 u, |g|)
        w -= lr (m / (1 - b1^t)) / (u + eps)

    weight decay decoupled (w *= 1 - lr wd first, PopART's Decay) or added to
    the gradient (L2Regularization)."""
    w, g, new_m, m = _decayed_first_moment(weight, g, exp_avg, ct, lr, beta1, weight_decay, decoupled)
    u = np.maximum(exp_avg_sq.astype(ct, copy=False) * ct(beta2), np.abs(g))
    new_u, u = _store(u, exp_avg_sq)
    upd = u + ct(eps)
    np.divide(m, upd, out=upd)
    upd *= ct(lr / bc1)
    np.subtract(w, upd, out=upd)
    return upd.astype(weight.dtype, copy=False), new_m, new_u


def _all_of_type(ct, *arrays) -> bool:
    """Every array given (None: absent) is of the compute type: in-place
    updates need no conversion."""
    return all(a is None or a.dtype == ct for a in arrays)


def _sgd_in_place(weight, g, lr, velocity, step, momentum, one_minus_dampening, nesterov):
    """The separate-variant SGD update of `sgd`, writing into weight and
    velocity chunk by chunk (kernels._common.in_chunks), same operations."""
    if velocity is None or momentum == 0.0:
        def plain(w, g, t):
            np.multiply(g, lr, out=t)
            np.subtract(w, t, out=w)

        in_chunks(plain, [weight, g], 1, weight.dtype)
        return weight if velocity is None else (weight, velocity)
    first = int(step) <= 1

    def body(w, g, v, t):
        if first:
            np.copyto(v, g)
        else:
            v *= momentum
            if one_minus_dampening == 1.0:  # 1 * g is g exactly
                v += g
            else:
                np.multiply(g, one_minus_dampening, out=t)
                v += t
        if nesterov:  # lr (g + momentum v)
            np.multiply(v, momentum, out=t)
            np.add(g, t, out=t)
            t *= lr
        else:
            np.multiply(v, lr, out=t)
        np.subtract(w, t, out=w)

    in_chunks(body, [weight, g, velocity], 1, weight.dtype)
    return weight, velocity

def adam(weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var, eps_var,
         weight_decay_var, *, beta1=None, beta2=None, eps=None, weight_decay=None,
         decoupled, bias_correction, grad_scale, infinity_norm=False, inplace=False):
    """torch.optim.Adam / AdamW, in the same operation order. `inplace`: the
    executor owns `weight`, `exp_avg` and `exp_avg_sq` (IN_PLACE_OPERANDS):
    they are updated in place, same operations, one temporary.
    `infinity_norm`: PopART's AdaMax (`_adamax`)."""
    ct = _ct(weight)
    beta1, beta2 = _hp(beta1_var, beta1), _hp(beta2_var, beta2)
    eps, weight_decay = _hp(eps_var, eps), _hp(weight_decay_var, weight_decay)
    g = _grad(grad, grad_scale, ct)
    lr_f = float(lr)
    t = float(step)
    if infinity_norm:
        bc1 = 1.0 - beta1 ** t if bias_correction else 1.0
        return _adamax(weight, g, exp_avg, exp_avg_sq, ct, lr_f, beta1, beta2, eps, weight_decay,
                       decoupled, bc1)
    if bias_correction:
        bc1 = 1.0 - beta1 ** t
        bc2_sqrt = (1.0 - beta2 ** t) ** 0.5
    else:
        bc1 = bc2_sqrt = 1.0
    if inplace and _all_of_type(ct, weight, exp_avg, exp_avg_sq):
        if weight_decay and not decoupled:
            g = g + ct(weight_decay) * weight

        def body(w, g, m, v, tmp):
            if weight_decay and decoupled:
                w *= ct(1.0 - lr_f * weight_decay)
            np.subtract(g, m, out=tmp)  # m = (g - m) (1 - beta1) + m
            tmp *= ct(1.0 - beta1)
            np.add(tmp, m, out=m)
            np.multiply(g, ct(1.0 - beta2), out=tmp)  # v = g (1 - beta2) g + v beta2
            tmp *= g
            v *= ct(beta2)
            np.add(tmp, v, out=v)
            np.sqrt(v, out=tmp)  # w -= m / (sqrt(v) / bc2_sqrt + eps) * lr / bc1
            tmp /= ct(bc2_sqrt)
            tmp += ct(eps)
            np.divide(m, tmp, out=tmp)
            tmp *= ct(lr_f / bc1)
            np.subtract(w, tmp, out=w)

        in_chunks(body, [weight, g, exp_avg, exp_avg_sq], 1, ct)
        w, m, v = weight, exp_avg, exp_avg_sq
        return w, m, v
    # the same operations as torch's, on fresh temporaries in place (fewer passes)
    w, g, new_m, m = _decayed_first_moment(weight, g, exp_avg, ct, lr_f, beta1, weight_decay, decoupled)
    v = g * ct(1.0 - beta2)
    v *= g
    v += exp_avg_sq.astype(ct, copy=False) * ct(beta2)
    new_v, v = _store(v, exp_avg_sq)
    step_size = lr_f / bc1
    upd = np.sqrt(v)  # denom = sqrt(v) / bc2_sqrt + eps
    upd /= ct(bc2_sqrt)
    upd += ct(eps)
    np.divide(m, upd, out=upd)
    upd *= ct(step_size)
    np.subtract(w, upd, out=upd)
    return upd.astype(weight.dtype, copy=False), new_m, new_v


def rmsprop(weight, grad, square_avg, grad_avg, momentum_buffer, lr, alpha_var, eps_var,
            weight_decay_var, momentum_var, centered_var, *, alpha=None, eps=None,
            weight_decay=None, momentum=None, centered=None, tf_variant=False, grad_scale=1.0,
            resultSegmentSizes=None):
    """torch.optim.RMSprop, or TensorFlow's RMSprop (PopART's `rmsprop_tf_variant`):
    eps inside the square root and lr accumulated in the momentum buffer
    (its square_avg starts at ones: the state's initial value)."""
    ct = _ct(weight)
    alpha, eps = _hp(alpha_var, alpha), _hp(eps_var, eps)
    weight_decay, momentum = _hp(weight_decay_var, weight_decay), _hp(momentum_var, momentum)
    centered = bool(_hp(centered_var, centered))
    w = weight.astype(ct, copy=False)
    g = _grad(grad, grad_scale, ct)
    lr = ct(lr)
    if weight_decay:
        g = g + ct(weight_decay) * w
    sq0 = square_avg.astype(ct, copy=False)
    new_sq, sq = _store(sq0 * ct(alpha) + ct(1.0 - alpha) * g * g, square_avg)
    new_ga = grad_avg
    if centered and grad_avg is not None:
        ga0 = grad_avg.astype(ct, copy=False)
        new_ga, ga = _store(ga0 + (g - ga0) * ct(1.0 - alpha), grad_avg)
        avg = sq + ct(-1.0) * ga * ga
    else:
        avg = sq
    denom = np.sqrt(avg + ct(eps)) if tf_variant else np.sqrt(avg) + ct(eps)
    new_buf = momentum_buffer
    if momentum > 0 and momentum_buffer is not None:
        buf0 = momentum_buffer.astype(ct, copy=False)
        if tf_variant:
            new_buf, buf = _store(ct(momentum) * buf0 + lr * (g / denom), momentum_buffer)
            w = w - buf
        else:
            new_buf, buf = _store(buf0 * ct(momentum) + g / denom, momentum_buffer)
            w = w + (-lr) * buf
    else:
        w = w + (-lr) * (g / denom)
    outs = [w.astype(weight.dtype), new_sq]
    if grad_avg is not None:
        outs.append(new_ga)
    if momentum_buffer is not None:
        outs.append(new_buf)
    return tuple(outs)


def lamb(weight, grad, exp_avg, exp_avg_sq, step, lr, beta1_var, beta2_var, eps_var,
         weight_decay_var, max_weight_norm_var, *, beta1=None, beta2=None, eps=None,
         weight_decay=None, max_weight_norm=None, bias_correction=True, grad_scale=1.0):
    """LAMB as PopTorch defines it (see tilefx.optim.LAMB): Adam's direction
    plus weight decay, times the trust ratio min(|w|, max_weight_norm) / |u|."""
    ct = _ct(weight)
    beta1, beta2 = _hp(beta1_var, beta1), _hp(beta2_var, beta2)
    eps, weight_decay = _hp(eps_var, eps), _hp(weight_decay_var, weight_decay)
    max_weight_norm = _hp(max_weight_norm_var, max_weight_norm)
    w = weight.astype(ct, copy=False)
    g = _grad(grad, grad_scale, ct)
    t = float(step)
    m0, v0 = exp_avg.astype(ct, copy=False), exp_avg_sq.astype(ct, copy=False)
    new_m, m = _store(m0 * ct(beta1) + ct(1.0 - beta1) * g, exp_avg)
    new_v, v = _store(v0 * ct(beta2) + ct(1.0 - beta2) * g * g, exp_avg_sq)
    bc1, bc2 = (1.0 - beta1 ** t, 1.0 - beta2 ** t) if bias_correction else (1.0, 1.0)
    denom = np.sqrt(v) / ct(bc2 ** 0.5) + ct(eps)
    u = (m / ct(bc1)) / denom
    if weight_decay:
        u = u + ct(weight_decay) * w
    w_norm = float(np.sqrt(np.sum(w * w, dtype=ct)))
    r2 = float(np.sqrt(np.sum(u * u, dtype=ct)))
    # a zero weight or update keeps the plain step; the clip phi(|w|) =
    # min(|w|, max_weight_norm) comes after that test, so max_weight_norm=0
    # scales the step to nothing (PopTorch: "lr is multiplied by 0.0")
    trust = 1.0 if w_norm == 0.0 or r2 == 0.0 else min(w_norm, max_weight_norm) / r2
    w = w - ct(float(lr) * trust) * u
    return w.astype(weight.dtype), new_m, new_v


def clip_grad_norm(weights, grads, max_norm_var, *, max_norm=None, grad_scale=1.0):
    """torch.nn.utils.clip_grad_norm_ over all the gradients (accumulated sums
    times grad_scale): norm of the per-tensor L2 norms, coefficient
    min(1, max_norm / (norm + 1e-6)) applied to every gradient."""
    max_norm = _hp(max_norm_var, max_norm)
    norms = []
    for g in grads:
        x = _grad(g, grad_scale, np.float32).ravel()
        norms.append(np.sqrt(np.dot(x, x)))
    norms = np.asarray(norms, dtype=np.float32)
    total = np.float32(np.sqrt(np.dot(norms, norms)))
    coef = min(np.float32(max_norm) / (total + np.float32(1e-6)), np.float32(1.0))
    out = [(g.astype(np.float32, copy=False) * np.float32(coef)).astype(g.dtype, copy=False)
           for g in grads]
    return out[0] if len(out) == 1 else out


# The operands (by position) a kernel may overwrite when the executor calls it
# with `inplace=True`: the executor does so only for function arguments whose
# owner gave them up for the call and that no other op reads (analysis/in_place.py).
IN_PLACE_OPERANDS = {
    "ipu.accumulate": (0,),
    "ipu.sgd": (0, 3),
    "ipu.adam": (0, 2, 3),
}

IPU_KERNELS = {
    "ipu.identity_loss": identity_loss,
    "ipu.nop": nop,
    "ipu.print_tensor": print_tensor,
    "ipu.set_available_memory": set_available_memory,
    "ipu.serialized_matmul": serialized_matmul,
    "ipu.accumulate": accumulate,
    "ipu.sgd": sgd,
    "ipu.adam": adam,
    "ipu.rmsprop": rmsprop,
    "ipu.lamb": lamb,
    "ipu.clip_grad_norm": clip_grad_norm,
}


# -- helper ops: dynamic slices, CTC decoding, custom ops -----------------------

def _start_index(op: str, start, dim_size: int, span: int) -> int:
    """The runtime start index; out of range is an error naming the op (the
    slice must lie inside the dimension)."""
    from tilefx.errors import Error

    s = int(np.asarray(start).reshape(-1)[0])
    if s < 0 or s + span > dim_size:
        raise Error(f"{op}: start index {s} is out of range: {span} element(s) from it do not fit "
                    f"in a dimension of size {dim_size}", type="runtime")
    return s


def dynamic_slice(input, start, *, dim, size, step):
    """input[start:start + size:step] along dim."""
    s = _start_index("dynamic_slice", start, input.shape[dim], size)
    index = [slice(None)] * input.ndim
    index[dim] = slice(s, s + size, step)
    return input[tuple(index)]


def dynamic_update(input, src, start, *, dim, size):
    s = _start_index("dynamic_update", start, input.shape[dim], size)
    out = input.copy()
    index = [slice(None)] * input.ndim
    index[dim] = slice(s, s + size)
    out[tuple(index)] = src.astype(input.dtype, copy=False)
    return out


def recomputation_checkpoint(x):
    return x


def ctc_beam_search_decoder(log_probs, lengths, *, blank, beam_width, top_paths):
    """CTC prefix beam search (blank dropped, repeats merged unless a blank
    separates them) over log probabilities [T, B, C], in float64 log space."""
    T, B, C = log_probs.shape
    lp = log_probs.astype(np.float64)
    probs = np.full((B, top_paths), -np.inf, dtype=log_probs.dtype)
    lens = np.zeros((B, top_paths), dtype=np.int32)
    paths = np.zeros((B, top_paths, T), dtype=np.int32)
    for b in range(B):
        n = int(lengths[b])
        if not 0 <= n <= T:
            from tilefx.errors import Error

            raise Error(f"ctc_beam_search_decoder: length {n} of batch item {b} is not in [0, {T}]",
                        type="runtime")
        beams = {(): (0.0, -np.inf)}  # prefix -> (log p ending in blank, log p ending in a label)
        for t in range(n):
            nxt: dict[tuple, list[float]] = {}

            def add(prefix, which, value):
                cur = nxt.setdefault(prefix, [-np.inf, -np.inf])
                cur[which] = np.logaddexp(cur[which], value)

            for prefix, (pb, pnb) in beams.items():
                total = np.logaddexp(pb, pnb)
                for c in range(C):
                    p = lp[t, b, c]
                    if c == blank:
                        add(prefix, 0, total + p)
                    elif prefix and prefix[-1] == c:
                        add(prefix + (c,), 1, pb + p)  # a repeat needs a blank between
                        add(prefix, 1, pnb + p)  # merged into the last label
                    else:
                        add(prefix + (c,), 1, total + p)
            ranked = sorted(nxt.items(), key=lambda kv: (-np.logaddexp(*kv[1]), kv[0]))
            beams = {k: (v[0], v[1]) for k, v in ranked[:beam_width]}
        ranked = sorted(beams.items(), key=lambda kv: (-np.logaddexp(*kv[1]), kv[0]))
        for k, (prefix, (pb, pnb)) in enumerate(ranked[:top_paths]):
            probs[b, k] = np.logaddexp(pb, pnb)
            lens[b, k] = len(prefix)
            paths[b, k, :len(prefix)] = prefix
    return probs, lens, paths


def custom_op(inputs, *, op_name, domain, domain_version, op_attributes=None):
    from tilefx.backend.kernels.custom import run

    outs = run(inputs, op_name, domain, domain_version, op_attributes)
    return outs[0] if len(outs) == 1 else outs


IPU_KERNELS.update({
    "ipu.dynamic_slice": dynamic_slice,
    "ipu.dynamic_update": dynamic_update,
    "ipu.recomputation_checkpoint": recomputation_checkpoint,
    "ipu.ctc_beam_search_decoder": ctc_beam_search_decoder,
    "ipu.ctc_loss": ctc.ctc_loss,
    "ipu.ctc_loss_grad": ctc.ctc_loss_grad,
    "ipu.custom_op": custom_op,
})
