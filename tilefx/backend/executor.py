"""Compile a `func.func` once into a flat list of numpy closures; run it many times.

Like torch.fx's Interpreter, each step reads like the op it runs: fetch the
operand slots, call the kernel from the one table, store the results. The
executor knows nothing of torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import f16
from xdsl.ir import Operation, SSAValue

from tilefx.backend.kernels import IPU_KERNELS, KERNELS
from tilefx.backend.kernels.tuning import configure_process
from tilefx.dialects.aten import ATEN_OPS, from_attr, op_props
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.names import ROLE_PREFIX

KERNEL_TABLE: dict[str, Callable[..., Any]] = {
    **{cls.name: KERNELS[schema_name] for schema_name, cls in ATEN_OPS.items()},
    **IPU_KERNELS,
}
RANDOM_OPS = {"aten.native_dropout"}
MOVE_OPS = {"ipu.copy", "tile.exchange", "tile.ipu_copy", "tile.host_in", "tile.host_out",
            "tile.remote_load", "tile.remote_store"}


class ExecutionError(RuntimeError):
    pass


def _props(op: Operation) -> dict[str, Any]:
    if op.name.startswith("aten."):
        return op_props(op)  # type: ignore[arg-type]
    return {k: from_attr(v) if not hasattr(v, "data") or not isinstance(v.data, int) else v.data
            for k, v in op.properties.items() if k != "operandSegmentSizes"}


def _operand_layout(op: Operation, slot) -> list:
    """Per operand group: a slot, None (absent optional) or a list of slots."""
    defs = type(op).get_irdl_definition().operands if hasattr(type(op), "get_irdl_definition") else None
    if defs is None:
        return [slot(v) for v in op.operands]
    from xdsl.irdl import OptOperandDef, VarOperandDef

    layout = []
    for (name, d) in defs:
        vals = getattr(op, name)
        if isinstance(d, OptOperandDef):
            layout.append(None if vals is None else slot(vals))
        elif isinstance(d, VarOperandDef):
            layout.append([slot(v) for v in vals])
        else:
            layout.append(slot(vals))
    return layout


class CompiledFunction:
    """A func.func as a list of steps over integer slots."""

    def __init__(self, fn: func.FuncOp, rng: np.random.Generator | None = None,
                 stochastic_rounding: bool = False, half_partials: bool = False,
                 check_types: bool = False):
        configure_process()
        self.name = fn.sym_name.data
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.stochastic_rounding = stochastic_rounding
        self.half_partials = half_partials
        self.check_types = check_types  # hand-written IR (tilefx-run): results must match their types
        slots: dict[SSAValue, int] = {}

        def slot(v: SSAValue) -> int:
            if v not in slots:
                slots[v] = len(slots)
            return slots[v]

        self.arg_slots = [slot(a) for a in fn.body.block.args]
        self.steps: list[Callable[[list], None]] = []
        self.result_slots: list[int] = []

        def alias(new: SSAValue, old: SSAValue) -> None:
            slots[new] = slot(old)

        def compile_ops(ops) -> None:
            for op in ops:
                if isinstance(op, func.ReturnOp):
                    self.result_slots = [slot(v) for v in op.operands]
                elif op.name == "ipu.stage":  # an outlined stage: its body inline
                    compile_ops(op.regions[0].block.ops)
                elif op.name == "ipu.yield":  # stage results are the yielded values
                    for r, v in zip(op.parent_op().results, op.operands):
                        alias(r, v)
                elif op.name in MOVE_OPS:  # copies, exchanges, streams: same numbers
                    alias(op.results[0], op.operands[0])
                elif op.name == "tile.sync":
                    continue
                else:
                    kernel = KERNEL_TABLE.get(op.name)
                    if kernel is None:
                        raise ExecutionError(f"no kernel for {op.name}")
                    self.steps.append(self._step(op, kernel, _operand_layout(op, slot),
                                                 [slot(r) for r in op.results]))

        compile_ops(fn.body.block.ops)
        self.num_slots = len(slots)

    def _step(self, op: Operation, kernel, layout: list, outs: list[int]):
        props = _props(op)
        if op.name in RANDOM_OPS:
            props["rng"] = self.rng
        simple = all(type(x) is int for x in layout)
        name, place = op.name, op.attributes.get(PLACE_KEY)
        schema = getattr(op, "schema", None)
        if schema is not None:
            # aten kernels take the schema's arguments by name (tensors and
            # properties interleave in ATen signatures)
            names = [a.name for a in schema.operands]
            base_kernel = kernel

            def kernel(*vals, **kw):
                return base_kernel(**dict(zip(names, vals)), **kw)

            if self.half_partials and op.name in HALF_PARTIAL_OPS and \
                    getattr(op.results[0].type, "element_type", None) == f16:
                kernel = HALF_PARTIAL_OPS[op.name](base_kernel)
            if self.stochastic_rounding and any(
                    getattr(r.type, "element_type", None) == f16 for r in op.results):
                kernel = _stochastically_rounded(kernel, self.rng)

        def fetch(env):
            if simple:
                return [env[i] for i in layout]
            return [env[x] if type(x) is int else None if x is None else [env[j] for j in x]
                    for x in layout]

        variadic = schema is not None and schema.num_results == -1  # a list, even of one
        if len(outs) == 1 and not variadic:
            out = outs[0]

            def step(env):
                env[out] = kernel(*fetch(env), **props)
        else:
            def step(env):
                res = kernel(*fetch(env), **props)
                for o, r in zip(outs, res):
                    env[o] = r

        step.__qualname__ = f"{name} {place or ''}"
        if self.check_types:
            return _checked(step, op, outs)
        return step

    def __call__(self, *args: np.ndarray) -> list[np.ndarray]:
        if len(args) != len(self.arg_slots):
            raise ExecutionError(f"@{self.name} takes {len(self.arg_slots)} arguments, got {len(args)}")
        env: list = [None] * self.num_slots
        for s, a in zip(self.arg_slots, args):
            env[s] = a
        # overflow to inf/nan is data here (loss scaling looks for it), not an error
        with np.errstate(all="ignore"):
            for step in self.steps:
                step(env)
        return [env[s] for s in self.result_slots]


def _checked(step, op: Operation, outs: list[int]):
    """Run `step`, then check each result against its IR type (shape and dtype)."""
    from tilefx.dialects.aten import np_dtype

    want = []
    for r in op.results:
        t = r.type
        want.append((tuple(t.get_shape()), np_dtype(t.element_type)) if hasattr(t, "get_shape") else None)

    def run(env):
        try:
            step(env)
        except (ValueError, TypeError, IndexError, ArithmeticError, NotImplementedError) as e:
            raise ExecutionError(f"{op.name} failed on its operands "
                                 f"({', '.join(str(v.type) for v in op.operands)}): {e}") from None
        for o, w, r in zip(outs, want, op.results):
            v = env[o]
            if w is None or v is None or np.shape(v) == (0,):
                continue
            if tuple(np.shape(v)) != w[0] or np.asarray(v).dtype != w[1]:
                raise ExecutionError(
                    f"{op.name} computed {np.asarray(v).dtype}{list(np.shape(v))} but the IR says "
                    f"{r.type}: the op's types are wrong")

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


def _stochastically_rounded(kernel, rng):
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


def compile_function(fn: func.FuncOp, rng: np.random.Generator | None = None) -> CompiledFunction:
    return CompiledFunction(fn, rng)


def arg_roles(fn: func.FuncOp) -> list[dict[str, Any]]:
    """The `tilefx.*` attributes of each argument as Python values."""
    return _roles(fn.arg_attrs, len(fn.body.block.args))


def result_roles(fn: func.FuncOp) -> list[dict[str, Any]]:
    return _roles(fn.res_attrs, len(fn.function_type.outputs))


def _roles(attrs, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        d = attrs.data[i].data if attrs is not None else {}
        row = {}
        for k, v in d.items():
            if not k.startswith(ROLE_PREFIX):
                continue
            key = k.removeprefix(ROLE_PREFIX)
            row[key] = True if v.__class__.__name__ == "UnitAttr" else from_attr(v)
        out.append(row)
    return out


__all__ = ["CompiledFunction", "compile_function", "arg_roles", "result_roles", "KERNEL_TABLE",
           "Sequence"]
