"""Fused elementwise groups (analysis/fusion.py) as executor steps.

A group's members run as in-place numpy ufuncs into chunk-sized temporaries
and the group's output buffer, chunk by chunk over the kernel threads: the
same float32 operations, in the same order, as each op's own kernel in
backend/kernels/elementwise.py, so the result is bit for bit the op-by-op
one. backend/emitter.py builds the steps (`StepEmitter._fused_step`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tilefx.backend.kernels._common import parallel_ranges
from tilefx.backend.kernels.elementwise import _erf_chunk
from tilefx.dialects.aten import op_props
from tilefx.dialects.irutil import numel as _numel


def chunk_index(shape: tuple[int, ...], ndim: int, outer: tuple[int, ...], axis: int,
                 lo: int, hi: int) -> tuple:
    """The part of a value of `shape` (broadcast against a result of `ndim`
    dimensions) that one chunk reads: index `outer` on the leading axes,
    rows lo:hi of `axis`, everything after; whole along broadcast (size-1)
    axes. Slices only, so every part keeps its dimensions."""
    lead = ndim - len(shape)
    idx = []
    for j in range(lead, ndim):
        if shape[j - lead] == 1:
            idx.append(slice(None))
        elif j < axis:
            idx.append(slice(outer[j], outer[j] + 1))
        elif j == axis:
            idx.append(slice(lo, hi))
        else:
            idx.append(slice(None))
    return tuple(idx)


def chunked_group(prog, externals: dict[int, tuple[int, ...]], reg_shapes, root: int,
                   root_shape: tuple[int, ...], bufs: list, result: int, inputs, chunk: int):
    """A fusion group's step chunk by chunk: the result is cut into chunks of
    about `chunk` elements (whole trailing axes, a run of rows of one axis, one
    index of the axes before it), each member is evaluated on the matching
    parts of its operands into a chunk-sized temporary (the root into its
    part of the output buffer), and the chunks are spread over the kernel
    threads. Elementwise ops compute every element the same way in any
    order, so the result is bit for bit the whole-array evaluation's."""
    nd = len(root_shape)
    axis = next(a for a in range(nd) if _numel(root_shape[a + 1:]) <= chunk)
    rows = max(1, chunk // max(1, _numel(root_shape[axis + 1:])))
    chunks = [(outer, lo, min(lo + rows, root_shape[axis]))
              for outer in np.ndindex(*root_shape[:axis])
              for lo in range(0, root_shape[axis], rows)]
    # per chunk: the index of each external operand, of the root, and each register's part shape
    plans = []
    for outer, lo, hi in chunks:
        ext = {s: chunk_index(shape, nd, outer, axis, lo, hi) for s, shape in externals.items()}
        part_shapes = {}
        for _, _, out, _ in prog:
            shape = reg_shapes[out]
            part_shapes[out] = tuple(
                1 if d == 1 else (1 if j < axis else hi - lo if j == axis else d)
                for j, d in zip(range(nd - len(shape), nd), shape))
        plans.append((ext, chunk_index(root_shape, nd, outer, axis, lo, hi), part_shapes))
    f32 = np.float32

    def step(env):
        if bufs[root] is None or sys.getrefcount(bufs[root]) > 2:  # held elsewhere: a new one
            bufs[root] = np.empty(root_shape, f32)
        vals, whole = inputs(env), bufs[root]
        scalar = {s for s, v in vals.items() if np.ndim(v) == 0}

        def run(lo, hi):
            for ext, root_idx, part_shapes in plans[lo:hi]:
                parts = {s: v if s in scalar else v[ext[s]] for s, v in vals.items()}
                regs: dict[int, np.ndarray] = {}
                for fn, ins, out, props in prog:
                    args = [regs[r] if internal else parts[r] for internal, r in ins]
                    if out == root:
                        dest = whole[root_idx]
                    elif out in regs:  # an internal operand's buffer, overwritten by its one reader
                        dest = regs[out]
                    else:
                        dest = np.empty(part_shapes[out], f32)
                    fn(*args, out=dest, **props)
                    regs[out] = dest

        parallel_ranges(run, len(plans), 1, work=_numel(root_shape))
        env[result] = whole

    return step


# --- fused elementwise groups: each op as ufuncs into `out` ----------------
# The same float32 operations, in the same order, as the op's kernel in
# backend/kernels/elementwise.py (members are f32 only, so no promotion).

_F32 = np.float32


def fused_props(op: Operation) -> dict[str, Any]:
    props = op_props(op)  # type: ignore[arg-type]
    return {k: _F32(v) for k, v in props.items() if k in ("other", "alpha") and v is not None}


def _add_like(ufunc):
    def run(x, y=None, *, out, other=None, alpha=_F32(1)):
        if y is None:  # .Scalar: `other` is a property
            y = other
        if alpha != 1:
            y = y * alpha
        return ufunc(x, y, out=out)

    return run


def _binary_ufunc(ufunc):
    def run(x, y=None, *, out, other=None):
        return ufunc(x, other if y is None else y, out=out)

    return run


def _rsqrt(x, *, out):
    np.sqrt(x, out=out)
    return np.reciprocal(out, out=out)


def _relu(x, *, out):
    return np.maximum(x, _F32(0), out=out)


def _sigmoid(x, *, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(out, _F32(1), out=out)
    return np.reciprocal(out, out=out)


def _erf_into(x, *, out):
    """erf of float32 as the kernel computes it (kernels.elementwise._erf_chunk)."""
    _erf_chunk(x, out, *(np.empty(out.shape, _F32) for _ in range(3)))
    return out


def _unary(ufunc):
    def run(x, *, out):
        return ufunc(x, out=out)

    return run


FUSED_EVAL = {
    "aten.add.Tensor": _add_like(np.add), "aten.add.Scalar": _add_like(np.add),
    "aten.sub.Tensor": _add_like(np.subtract), "aten.sub.Scalar": _add_like(np.subtract),
    "aten.mul.Tensor": _binary_ufunc(np.multiply), "aten.mul.Scalar": _binary_ufunc(np.multiply),
    "aten.div.Tensor": _binary_ufunc(np.true_divide),
    "aten.div.Scalar": _binary_ufunc(np.true_divide),
    "aten.neg": _unary(np.negative), "aten.exp": _unary(np.exp), "aten.tanh": _unary(np.tanh),
    "aten.sqrt": _unary(np.sqrt), "aten.rsqrt": _rsqrt, "aten.reciprocal": _unary(np.reciprocal),
    "aten.relu": _relu, "aten.sigmoid": _sigmoid, "aten.erf": _erf_into,
}
