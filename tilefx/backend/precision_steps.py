"""Precision wrappers around executor steps: bfloat16 rounding, fp16 partial
sums (`Precision.setPartialsType(torch.half)`) and stochastic rounding
(`Precision.enableStochasticRounding`). Each takes a kernel or a step and
returns one that computes the same op at the device's precision; the
executor's emitter (backend/emitter.py) picks them per op at compile time."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import bf16
from xdsl.ir import Operation


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as
    float32: the 8 exponent bits of float32 and the top 7 of its mantissa."""
    x = np.asarray(x, dtype=np.float32, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
               & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(x), x, rounded)


def bf16_rounded(step, op: Operation, outs: list[int]):
    """Round the float results whose IR type is bf16 (computed in float32)."""
    which = [o for o, r in zip(outs, op.results) if getattr(r.type, "element_type", None) == bf16]

    def run(env):
        step(env)
        for o in which:
            v = env[o]
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                env[o] = round_to_bf16(v)

    return run


# --- Precision.setPartialsType(torch.half): fp16 partial sums -------------

PARTIAL_CHUNK = 16  # the AMP unit's k-vector: one fp16 partial sum per 16 products


def _chunked_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b accumulated in fp16: each 16-long piece of the reduction is a
    fp32 dot product rounded to fp16, and the pieces are added in fp16."""
    k = a.shape[-1]
    acc = None
    for s in range(0, k, PARTIAL_CHUNK):
        part = np.matmul(a[..., s:s + PARTIAL_CHUNK].astype(np.float32),
                         b[..., s:s + PARTIAL_CHUNK, :].astype(np.float32)).astype(np.float16)
        acc = part if acc is None else (acc + part).astype(np.float16)
    return acc


def _half_mm(kernel):
    def run(self, mat2):
        return _chunked_matmul(self, mat2)

    return run


def _half_addmm(kernel):
    def run(self, mat1, mat2, beta=1, alpha=1):
        prod = _chunked_matmul(mat1, mat2).astype(np.float32)
        return (np.float32(beta) * self.astype(np.float32) + np.float32(alpha) * prod).astype(np.float16)

    return run


def _half_convolution(kernel):
    """Input channels in chunks of 16, each chunk's convolution rounded to fp16
    and accumulated in fp16 (groups == 1; grouped convolutions keep fp32 partials)."""

    def run(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        if groups != 1 or transposed:
            return kernel(input=input, weight=weight, bias=bias, stride=stride, padding=padding,
                          dilation=dilation, transposed=transposed, output_padding=output_padding,
                          groups=groups)
        acc = None
        for s in range(0, input.shape[1], PARTIAL_CHUNK):
            part = kernel(input=input[:, s:s + PARTIAL_CHUNK].astype(np.float32),
                          weight=weight[:, s:s + PARTIAL_CHUNK].astype(np.float32), bias=None,
                          stride=stride, padding=padding, dilation=dilation, transposed=False,
                          output_padding=output_padding, groups=1).astype(np.float16)
            acc = part if acc is None else (acc + part).astype(np.float16)
        if bias is not None:
            shape = (1, -1) + (1,) * (acc.ndim - 2)
            acc = (acc + bias.astype(np.float16).reshape(shape)).astype(np.float16)
        return acc

    return run


HALF_PARTIAL_OPS = {"aten.mm": _half_mm, "aten.bmm": _half_mm, "aten.addmm": _half_addmm,
                    "aten.convolution": _half_convolution}


def stochastic_round(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """float32 -> float16 rounding up or down at random, with the probability
    of each neighbour proportional to the distance to the other (unbiased)."""
    x = np.asarray(x, dtype=np.float32)
    near = x.astype(np.float16)
    near32 = near.astype(np.float32)
    other = np.where(near32 > x, np.nextafter(near, np.float16(-np.inf)),
                     np.nextafter(near, np.float16(np.inf)))
    other32 = other.astype(np.float32)
    gap = np.abs(other32 - near32)
    with np.errstate(all="ignore"):
        p_other = np.where(gap > 0, np.abs(x - near32) / gap, 0.0)
    pick = rng.random(x.shape) < p_other
    out = np.where(pick & np.isfinite(other32) & np.isfinite(x), other, near)
    return out.astype(np.float16)


def stochastically_rounded(kernel, rng):
    """Run an fp16 op on fp32 copies of its fp16 operands and round its
    results stochastically (Options.Precision.enableStochasticRounding)."""

    def up(v):
        if isinstance(v, np.ndarray) and v.dtype == np.float16:
            return v.astype(np.float32)
        if isinstance(v, list):
            return [up(x) for x in v]
        return v

    def down(r):
        if isinstance(r, np.ndarray) and r.dtype == np.float32:
            return stochastic_round(r, rng)
        return r

    def run(*vals, **kw):
        if "dtype" in kw and kw["dtype"] == np.float16:  # a cast to fp16: round it here
            kw = {**kw, "dtype": np.dtype(np.float32)}
        res = kernel(*[up(v) for v in vals], **kw)
        if isinstance(res, tuple):
            return tuple(down(r) for r in res)
        if isinstance(res, list):
            return [down(r) for r in res]
        return down(res)

    return run
