"""ONNX's recurrent operators (LSTM, GRU, RNN) as torch functions.

`torch.onnx.export` (the TorchScript exporter) writes `nn.LSTM` / `nn.GRU` /
`nn.RNN` as these operators, with ONNX's own weight layouts and gate orders
(LSTM: i, o, f, c; GRU: z, r, h) which differ from torch's. Each time step is
written out as torch ops, so the tracer unrolls the sequence (its length is
known at compile time) into matmuls and elementwise ops the executor and the
machine model already know, and training differentiates through them.

The equations follow the ONNX operator specification: gates are
`f(X_t W^T + H_{t-1} R^T + Wb + Rb)` per direction, with optional peepholes
(LSTM), `clip` applied to the pre-activations, `linear_before_reset` (GRU),
`input_forget` (LSTM) and the `layout` attribute for batch-first tensors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tilefx.errors import Error

# activation name -> (function of (x, alpha, beta), number of alpha/beta values it takes)
_ACTIVATIONS = {
    "Sigmoid": (lambda x, a, b: torch.sigmoid(x), 0),
    "Tanh": (lambda x, a, b: torch.tanh(x), 0),
    "Relu": (lambda x, a, b: torch.relu(x), 0),
    "Softsign": (lambda x, a, b: x / (1 + x.abs()), 0),
    "Softplus": (lambda x, a, b: F.softplus(x), 0),
    "LeakyRelu": (lambda x, a, b: F.leaky_relu(x, a), 1),
    "ThresholdedRelu": (lambda x, a, b: torch.where(x > a, x, torch.zeros_like(x)), 1),
    "Elu": (lambda x, a, b: F.elu(x, a), 1),
    "HardSigmoid": (lambda x, a, b: torch.clamp(x * a + b, 0, 1), 2),
    "Affine": (lambda x, a, b: x * a + b, 2),
    "ScaledTanh": (lambda x, a, b: a * torch.tanh(x * b), 2),
}
_DEFAULT_ALPHA = {"LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "Elu": 1.0, "HardSigmoid": 0.2}
_DEFAULT_BETA = {"HardSigmoid": 0.5}


def _activations(at: dict, defaults: list[str], num_dirs: int) -> list[list]:
    """Per direction, the gate activations as callables of one tensor."""
    names = at.get("activations") or defaults * num_dirs
    if len(names) != len(defaults) * num_dirs:
        raise Error(f"activations must list {len(defaults)} functions per direction, got {names}",
                    type="frontend")
    alphas, betas = list(at.get("activation_alpha", [])), list(at.get("activation_beta", []))
    funcs = []
    for name in names:
        if name not in _ACTIVATIONS:
            raise Error(f"activation {name!r} is not supported (supported: {sorted(_ACTIVATIONS)})",
                        type="frontend")
        fn, nparams = _ACTIVATIONS[name]
        a = alphas.pop(0) if nparams >= 1 and alphas else _DEFAULT_ALPHA.get(name, 1.0)
        b = betas.pop(0) if nparams >= 2 and betas else _DEFAULT_BETA.get(name, 0.0)
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    k = len(defaults)
    return [funcs[d * k:(d + 1) * k] for d in range(num_dirs)]


def _prologue(ins: list, at: dict, gates: int, op: str):
    """The operands in ONNX's default layout [seq, batch, ...] and the settings."""
    x, w, r = ins[0], ins[1], ins[2]
    layout = at.get("layout", 0)
    if layout:
        x = x.transpose(0, 1)
    direction = at.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise Error(f"{op} direction must be forward, reverse or bidirectional, got {direction!r}",
                    type="frontend")
    num_dirs = 2 if direction == "bidirectional" else 1
    hidden = at.get("hidden_size", r.shape[-1])
    if w.shape[0] != num_dirs or w.shape[1] != gates * hidden:
        raise Error(f"{op} W has shape {tuple(w.shape)}, expected ({num_dirs}, {gates * hidden}, input_size)",
                    type="frontend")
    seq_lens = ins[4] if len(ins) > 4 else None
    if seq_lens is not None:
        if isinstance(seq_lens, torch.Tensor):
            raise Error(f"{op} sequence_lens must be known at compile time", type="frontend")
        if any(int(n) != x.shape[0] for n in seq_lens.reshape(-1)):
            raise Error(f"{op} with sequences shorter than the input ({list(seq_lens.reshape(-1))} < "
                        f"{x.shape[0]}) is not supported: pad the batch to one length", type="frontend")
    bias = ins[3] if len(ins) > 3 and ins[3] is not None else None
    batch = x.shape[1]

    def initial(k):
        v = ins[k] if len(ins) > k and ins[k] is not None else None
        if v is None:
            return torch.zeros(num_dirs, batch, hidden, dtype=x.dtype)
        return v.transpose(0, 1) if layout else v

    clip = at.get("clip")
    return x, w, r, bias, initial, num_dirs, direction, hidden, layout, clip


def _steps(seq: int, reverse: bool):
    return range(seq - 1, -1, -1) if reverse else range(seq)


def _epilogue(ys: list, finals: list[list], layout: int):
    """Y [seq, dirs, batch, H] and the final states [dirs, batch, H] (layout 1: batch first)."""
    y = torch.stack([torch.stack(y_d) for y_d in ys], dim=1)
    states = [torch.stack(s) for s in finals]
    if layout:
        return (y.permute(2, 0, 1, 3),) + tuple(s.transpose(0, 1) for s in states)
    return (y,) + tuple(states)


def _clipped(x: torch.Tensor, clip):
    return x if clip is None else torch.clamp(x, -clip, clip)


def lstm(ins, at, v):
    x, w, r, bias, initial, num_dirs, direction, hidden, layout, clip = _prologue(ins, at, 4, "LSTM")
    acts = _activations(at, ["Sigmoid", "Tanh", "Tanh"], num_dirs)
    h0, c0 = initial(5), initial(6)
    peep = ins[7] if len(ins) > 7 and ins[7] is not None else None
    coupled = bool(at.get("input_forget", 0))
    ys, hs, cs = [], [], []
    for d in range(num_dirs):
        f, g, hact = acts[d]
        wd, rd = w[d], r[d]
        b = bias[d][:4 * hidden] + bias[d][4 * hidden:] if bias is not None else None
        h, c = h0[d], c0[d]
        reverse = direction == "reverse" or d == 1
        xw = x @ wd.t()  # every time step's input projection at once
        if b is not None:
            xw = xw + b
        y = [None] * x.shape[0]
        for t in _steps(x.shape[0], reverse):
            gates = xw[t] + h @ rd.t()
            gi, go, gf, gc = gates.split(hidden, dim=-1)
            if peep is not None:
                pi, po, pf = peep[d].split(hidden)
                gi, gf = gi + pi * c, gf + pf * c
            i = f(_clipped(gi, clip))
            ft = 1 - i if coupled else f(_clipped(gf, clip))
            c = ft * c + i * g(_clipped(gc, clip))
            if peep is not None:
                go = go + po * c
            o = f(_clipped(go, clip))
            h = o * hact(c)
            y[t] = h
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return _epilogue(ys, [hs, cs], layout)


def gru(ins, at, v):
    x, w, r, bias, initial, num_dirs, direction, hidden, layout, clip = _prologue(ins, at, 3, "GRU")
    acts = _activations(at, ["Sigmoid", "Tanh"], num_dirs)
    h0 = initial(5)
    before_reset = bool(at.get("linear_before_reset", 0))
    ys, hs = [], []
    for d in range(num_dirs):
        f, g = acts[d]
        wd, rd = w[d], r[d]
        wb, rb = (bias[d][:3 * hidden], bias[d][3 * hidden:]) if bias is not None else (None, None)
        rz, rr, rh = rd.split(hidden)
        h = h0[d]
        reverse = direction == "reverse" or d == 1
        xw = x @ wd.t()
        if wb is not None:
            xw = xw + wb
        rbz, rbr, rbh = rb.split(hidden) if rb is not None else (0, 0, 0)
        y = [None] * x.shape[0]
        for t in _steps(x.shape[0], reverse):
            xz, xr, xh = xw[t].split(hidden, dim=-1)
            z = f(_clipped(xz + h @ rz.t() + rbz, clip))
            rt = f(_clipped(xr + h @ rr.t() + rbr, clip))
            if before_reset:
                cand = xh + rt * (h @ rh.t() + rbh)
            else:
                cand = xh + (rt * h) @ rh.t() + rbh
            h = (1 - z) * g(_clipped(cand, clip)) + z * h
            y[t] = h
        ys.append(y)
        hs.append(h)
    return _epilogue(ys, [hs], layout)


def rnn(ins, at, v):
    x, w, r, bias, initial, num_dirs, direction, hidden, layout, clip = _prologue(ins, at, 1, "RNN")
    acts = _activations(at, ["Tanh"], num_dirs)
    h0 = initial(5)
    ys, hs = [], []
    for d in range(num_dirs):
        (f,) = acts[d]
        h = h0[d]
        xw = x @ w[d].t()
        if bias is not None:
            xw = xw + bias[d][:hidden] + bias[d][hidden:]
        y = [None] * x.shape[0]
        for t in _steps(x.shape[0], direction == "reverse" or d == 1):
            h = f(_clipped(xw[t] + h @ r[d].t(), clip))
            y[t] = h
        ys.append(y)
        hs.append(h)
    return _epilogue(ys, [hs], layout)


OPS = {"LSTM": lstm, "GRU": gru, "RNN": rnn}
