"""CTC loss and its gradient (the `ipu.ctc_loss` / `ipu.ctc_loss_grad` ops).

The forward-backward recursions over the extended label sequence (a blank
between and around the labels) in log space, vectorised over the batch and
the extended positions, one time step at a time, as torch's CPU kernel does.
The gradient is torch's: for each time step within the input length,
exp(log_probs) - exp(log(sum alpha * beta over positions of class c) + nll -
log_probs), which is the gradient through the log-softmax that produces the
log-probabilities (its own backward then leaves it unchanged).
"""

from __future__ import annotations

import numpy as np

NEG_INF = -np.inf


def _extended(targets: np.ndarray, target_lengths: np.ndarray, blank: int):
    """Targets as [N, S] (padded or concatenated 1-D) -> extended labels [N, 2S+1]
    and whether position s may skip from s-2 (a label unlike the one before)."""
    N = target_lengths.shape[0]
    if targets.ndim == 1:  # concatenated: split by the lengths
        S = int(target_lengths.max(initial=0))
        padded = np.full((N, max(S, 1)), blank, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(target_lengths)])
        for n in range(N):
            padded[n, :target_lengths[n]] = targets[offsets[n]:offsets[n + 1]]
        targets = padded
    S = targets.shape[1]
    ext = np.full((N, 2 * S + 1), blank, dtype=np.int64)
    ext[:, 1::2] = targets
    skip = np.zeros_like(ext, dtype=bool)
    skip[:, 3::2] = targets[:, 1:] != targets[:, :-1]
    ext_len = 2 * target_lengths.astype(np.int64) + 1
    valid = np.arange(2 * S + 1)[None, :] < ext_len[:, None]
    return ext, skip, valid, ext_len


def _alphas(lp, ext, skip, valid, input_lengths):
    T, N, _ = lp.shape
    L = ext.shape[1]
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (T, N, L)), axis=2)  # [T, N, L]
    alpha = np.full((T, N, L), NEG_INF, dtype=np.float64)
    alpha[0, :, 0] = emit[0, :, 0]
    if L > 1:
        alpha[0, :, 1] = np.where(valid[:, 1], emit[0, :, 1], NEG_INF)
    for t in range(1, T):
        prev = alpha[t - 1]
        a = prev.copy()
        a[:, 1:] = np.logaddexp(a[:, 1:], prev[:, :-1])
        a[:, 2:] = np.where(skip[:, 2:], np.logaddexp(a[:, 2:], prev[:, :-2]), a[:, 2:])
        alpha[t] = np.where(valid & (t < input_lengths)[:, None], a + emit[t], NEG_INF)
    return alpha, emit


def _nll(alpha, ext_len, input_lengths):
    N = alpha.shape[1]
    last = alpha[np.maximum(input_lengths - 1, 0), np.arange(N)]  # [N, L]
    end = np.take_along_axis(last, (ext_len - 1)[:, None], axis=1)[:, 0]
    before = np.where(ext_len > 1, np.take_along_axis(last, np.maximum(ext_len - 2, 0)[:, None], axis=1)[:, 0],
                      NEG_INF)
    return -np.logaddexp(end, before)


def _check(log_probs, input_lengths, target_lengths):
    from tilefx.errors import Error

    T = log_probs.shape[0]
    if np.any(input_lengths > T) or np.any(input_lengths < 1):
        raise Error(f"ctc_loss: input lengths {input_lengths.tolist()} must be in [1, {T}]")
    if np.any(target_lengths < 0):
        raise Error(f"ctc_loss: target lengths {target_lengths.tolist()} must not be negative")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, *, blank=0, zero_infinity=False):
    """Per batch item, -log p(target | log_probs) [N] (inf where impossible,
    0 with `zero_infinity`)."""
    il, tl = np.asarray(input_lengths).astype(np.int64), np.asarray(target_lengths).astype(np.int64)
    _check(log_probs, il, tl)
    lp = log_probs.astype(np.float64)
    ext, skip, valid, ext_len = _extended(np.asarray(targets).astype(np.int64), tl, blank)
    alpha, _ = _alphas(lp, ext, skip, valid, il)
    nll = _nll(alpha, ext_len, il)
    if zero_infinity:
        nll = np.where(np.isinf(nll), 0.0, nll)
    return nll.astype(log_probs.dtype)


def ctc_loss_grad(grad, log_probs, targets, input_lengths, target_lengths, *, blank=0,
                  zero_infinity=False):
    """The gradient of sum(grad * ctc_loss) with respect to log_probs, as torch's."""
    il, tl = np.asarray(input_lengths).astype(np.int64), np.asarray(target_lengths).astype(np.int64)
    lp = log_probs.astype(np.float64)
    T, N, C = lp.shape
    ext, skip, valid, ext_len = _extended(np.asarray(targets).astype(np.int64), tl, blank)
    alpha, emit = _alphas(lp, ext, skip, valid, il)
    nll = _nll(alpha, ext_len, il)
    L = ext.shape[1]
    beta = np.full((T, N, L), NEG_INF, dtype=np.float64)
    rows = np.arange(N)
    t_end = np.maximum(il - 1, 0)
    beta[t_end, rows, ext_len - 1] = emit[t_end, rows, ext_len - 1]
    has2 = ext_len > 1
    beta[t_end[has2], rows[has2], ext_len[has2] - 2] = emit[t_end[has2], rows[has2], ext_len[has2] - 2]
    skip_next = np.zeros_like(skip)
    skip_next[:, :-2] = skip[:, 2:]  # from s to s+2 when s+2 may skip back to s
    for t in range(T - 2, -1, -1):
        nxt = beta[t + 1]
        b = nxt.copy()
        b[:, :-1] = np.logaddexp(b[:, :-1], nxt[:, 1:])
        b[:, :-2] = np.where(skip_next[:, :-2], np.logaddexp(b[:, :-2], nxt[:, 2:]), b[:, :-2])
        inside = valid & (t < t_end)[:, None]
        beta[t] = np.where(inside, b + emit[t], beta[t])
    ab = alpha + beta  # [T, N, L]; emit counted twice: lcab - lp below removes one
    lcab = np.full((T, N, C), NEG_INF, dtype=np.float64)
    for s in range(L):
        idx = ext[:, s]
        cur = lcab[:, rows, idx]
        lcab[:, rows, idx] = np.logaddexp(cur, np.where(valid[:, s][None, :], ab[:, :, s], NEG_INF))
    with np.errstate(invalid="ignore", over="ignore"):
        res = np.exp(lp) - np.exp(lcab + nll[None, :, None] - lp)
    res *= np.asarray(grad, dtype=np.float64)[None, :, None]
    res[np.arange(T)[:, None] >= il[None, :]] = 0.0
    if zero_infinity:
        res[:, np.isinf(nll)] = 0.0
    return res.astype(log_probs.dtype)
