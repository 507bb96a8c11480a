"""ONNX Attention (opsets 23-24), which torch's dynamo exporter writes for every
`F.scaled_dot_product_attention` (nn.MultiheadAttention, transformer layers) from
opset 23 on, as torch functions with onnx_ops.py's calling convention.

What the operator specifies (onnx/defs/nn, its reference implementation):
Q, K, V of rank 4 (batch, heads, sequence, head size) or 3 (batch, sequence,
hidden) with `q_num_heads` / `kv_num_heads`; grouped-query attention when K and V
have fewer heads (each repeated in place, h0 h0 h1 h1 ...); `scale` (default
1/sqrt(head size)) applied as its square root to Q and to K; an optional
`softcap` (c tanh(s / c)) before the mask; `attn_mask` boolean (True attends) or
additive, padded with masked columns up to the keys' length; `is_causal`
aligned at the bottom right of the cache (query i attends key j <= i + the past
length); `past_key` / `past_value` concatenated before K / V and returned as
`present_key` / `present_value`; opset 24's `nonpad_kv_seqlen` masking each
batch's keys from that length on; `qk_matmul_output` as mode 0 (scores), 1
(soft-capped), 2 (with the mask) or 3 (probabilities). A query row whose keys
are all masked gives zeros (and its gradient is zero, not NaN).
"""

from __future__ import annotations

import math

import torch

from tilefx.errors import Error
from tilefx.lowering.onnx_values import _t, _torch_dtype


def _heads(x: torch.Tensor, heads, what: str) -> torch.Tensor:
    """A rank-3 (batch, sequence, heads x size) input as (batch, heads, sequence, size)."""
    if heads is None:
        raise Error(f"Attention: a rank-3 {what} needs the q_num_heads and kv_num_heads attributes",
                    type="frontend")
    b, s, hidden = x.shape
    if hidden % int(heads):
        raise Error(f"Attention: {what}'s hidden size {hidden} is not a multiple of its {heads} heads",
                    type="frontend")
    return x.reshape(b, s, int(heads), hidden // int(heads)).transpose(1, 2)


def attention(ins, at, v):
    ins = list(ins) + [None] * (7 - len(ins))
    q, k, val = (_t(x) for x in ins[:3])
    mask = None if ins[3] is None else _t(ins[3])
    past_k, past_v = (None if x is None else _t(x) for x in ins[4:6])
    nonpad = None if ins[6] is None else _t(ins[6])
    for key in ("left_window_size", "right_window_size"):
        if at.get(key, -1) != -1:
            raise Error(f"Attention: {key} (a sliding window) is not supported", type="frontend")
    if (past_k is None) != (past_v is None):
        raise Error("Attention: past_key and past_value come together", type="frontend")
    if not q.dim() == k.dim() == val.dim() or q.dim() not in (3, 4):
        raise Error(f"Attention: Q, K and V must all have rank 3 or all rank 4, they have {q.dim()}, "
                    f"{k.dim()} and {val.dim()}", type="frontend")
    rank3 = q.dim() == 3
    if rank3:
        q = _heads(q, at.get("q_num_heads"), "Q")
        k = _heads(k, at.get("kv_num_heads"), "K")
        val = _heads(val, at.get("kv_num_heads"), "V")
    scale = at.get("scale")
    root = math.sqrt(1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale))
    if past_k is not None:
        k, val = torch.cat([past_k, k], 2), torch.cat([past_v, val], 2)
    present_k, present_v = k, val
    q_len, kv_len = q.shape[2], k.shape[2]
    neg_inf = torch.tensor(float("-inf"), dtype=q.dtype)
    zero = torch.tensor(0.0, dtype=q.dtype)
    bias = torch.zeros(q_len, kv_len, dtype=q.dtype)
    if mask is not None:
        if mask.shape[-1] < kv_len:  # a mask of the new keys only: the rest masked
            fill = False if mask.dtype == torch.bool else float("-inf")
            mask = torch.nn.functional.pad(mask, (0, kv_len - mask.shape[-1]), value=fill)
        bias = bias + (torch.where(mask, zero, neg_inf) if mask.dtype == torch.bool else mask.to(q.dtype))
    if nonpad is not None and past_k is not None:
        raise Error("Attention: nonpad_kv_seqlen cannot come with past_key / past_value", type="frontend")
    if at.get("is_causal", 0):
        rows = torch.arange(q_len).reshape(q_len, 1)
        cols = torch.arange(kv_len).reshape(1, kv_len)
        if nonpad is not None:  # each batch's frontier: its keys' length less the queries'
            offset = (nonpad.to(torch.int64) - q_len).reshape(-1, 1, 1, 1)
            allowed = cols <= rows + offset
        else:
            allowed = cols <= rows + (0 if past_k is None else past_k.shape[2])
        bias = bias + torch.where(allowed, zero, neg_inf)
    if nonpad is not None:
        keep = torch.arange(kv_len).reshape(1, kv_len) < nonpad.to(torch.int64).reshape(-1, 1)
        bias = bias + torch.where(keep, zero, neg_inf).reshape(-1, 1, 1, kv_len)
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads != kv_heads:
        if heads % kv_heads:
            raise Error(f"Attention: {heads} query heads are not a multiple of {kv_heads} key/value heads",
                        type="frontend")
        k = k.repeat_interleave(heads // kv_heads, 1)
        val = val.repeat_interleave(heads // kv_heads, 1)
    scores = torch.matmul(q * root, (k * root).transpose(-1, -2))
    raw = scores
    softcap = float(at.get("softcap", 0.0) or 0.0)
    if softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap
    capped = scores
    scores = scores + bias
    # a row with every key masked: zeros, through a softmax of a finite row (no NaN forward or back)
    empty = torch.isneginf(bias.amax(-1, keepdim=True))
    if "softmax_precision" in at:
        probs = torch.softmax(torch.where(empty, zero, scores).to(_torch_dtype(int(at["softmax_precision"]))), -1)
    else:
        probs = torch.softmax(torch.where(empty, zero, scores), -1)
    probs = torch.where(empty, zero, probs).to(q.dtype)
    y = torch.matmul(probs, val)
    if rank3:
        y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
    mode = int(at.get("qk_matmul_output_mode", 0))
    qk = {0: raw, 1: capped if softcap > 0 else raw, 2: scores, 3: probs}.get(mode)
    if qk is None:
        raise Error(f"Attention: qk_matmul_output_mode {mode} is not 0 to 3", type="frontend")
    return y, present_k, present_v, qk
