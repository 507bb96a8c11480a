"""The steps a `CompiledFunction` (backend/executor.py) runs, as closures
over its slot list: an argument's view (a weight's tensor view made once),
a clone that is its operand when row-major, the operand fetch of a step, a
BLAS op on its threads, an `ipu.for` loop, and a step checked against its
IR types (the tools' `check_types`); `ExecutionError`, what a program that
fails on its inputs raises."""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tilefx.backend.kernels.tuning import set_blas_threads
from tilefx.dialects.aten import op_props
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.irutil import to_py
from tilefx.errors import Error


class ExecutionError(Error):
    """A program failed on its inputs (an index out of range, a bad shape in
    hand-written IR): a tilefx.Error naming the op, not numpy's traceback."""

    def __init__(self, message: str, op: Operation | None = None, **kw):
        super().__init__(message, type=kw.pop("type", "execution"), **kw)
        self.op = op  # the failing op, when known: tools point at its line in the IR text


def step_props(op: Operation) -> dict[str, Any]:
    if op.name.startswith("aten."):
        return op_props(op)  # type: ignore[arg-type]
    return {k: to_py(v) if not hasattr(v, "data") or not isinstance(v.data, int) else v.data
            for k, v in op.properties.items() if k != "operandSegmentSizes"}


def viewed_chain(a) -> list:
    """`a` and the arrays it views, innermost last."""
    out = [a]
    while isinstance(getattr(a, "base", None), np.ndarray):
        a = a.base
        out.append(a)
    return out


def argument_view_step(op: Operation, view, src: int, out: int):
    """`view` (a numpy view step of an argument's slot), for a tensor
    argument (analysis/kept.py: an inference program's
    weights) the tensor's own view, made once and given again while the
    argument is the same object: the caller passes a weight as the same
    tensor call after call, and a view shares its memory, so a write into
    the weight shows through it. The last tensor is held, so no other object
    can take its identity. The steps reading the view take it as it is: the
    MLP's three weight transposes cost ~2% of an inference call as a numpy
    view and a `from_numpy` each, on cold caches. An array argument is
    viewed each call, as before."""
    shape = tuple(op.results[0].type.get_shape())
    if op.name == "aten.permute":
        dims = tuple(int(d) for d in step_props(op)["dims"])

        def tensor_view(t):
            return t.permute(dims)
    elif op.name == "aten.expand":
        def tensor_view(t):
            return t.expand(shape)
    else:  # view, unsqueeze, squeeze: the elements in the result's shape
        def tensor_view(t):
            return t.reshape(shape)
    held: list = [None, None]  # the argument tensor, its view

    def step(env):
        a = env[src]
        if a is held[0]:
            env[out] = held[1]
        elif type(a) is np.ndarray or not hasattr(a, "permute"):
            # an array: viewed each call, never held (a training step updates a
            # weight's array in place only while nothing else refers to it)
            view(env)
        else:  # a provider's tensor (an inference program's weight)
            env[out] = held[1] = tensor_view(a)
            held[0] = a

    step.__qualname__ = view.__qualname__
    return step


def clone_step(op: Operation, copy, src: int, out: int):
    """`aten.clone`: the operand itself when it is row-major already, else a
    row-major copy. A copy of a value is the value here: the executor never
    writes an array once made (an in-place form only takes a donated argument
    that no other step reads, and the clone reads it too). The traced graphs
    clone for dropout in eval or with p=0, a copy torch eager does not make,
    and before a view that needs a row-major operand (a transposed or
    broadcast one), which the copy makes."""
    def step(env):
        a = env[src]
        if type(a) is np.ndarray:
            env[out] = a if a.flags.c_contiguous else copy(a)
        elif hasattr(a, "is_contiguous"):  # a provider's tensor (analysis/kept.py)
            env[out] = a if a.is_contiguous() else a.contiguous()
        else:
            env[out] = copy(a)

    step.__qualname__ = step_name(op)
    return step


def fetcher(layout: list):
    """env -> the operand groups of a step: a value, None (an absent optional
    operand) or a list of values."""
    if all(type(x) is int for x in layout):
        return lambda env: [env[i] for i in layout]
    return lambda env: [env[x] if type(x) is int else None if x is None else [env[j] for j in x]
                        for x in layout]


@lru_cache(maxsize=None)
def operands_lead(kernel, names: tuple[str, ...]) -> bool:
    """Whether `kernel`'s first parameters are the operands `names`, in
    order, each positional: then calling it with the operands positionally
    is the same as by name (~1 us less per op than building a dict)."""
    try:
        params = list(inspect.signature(kernel).parameters.values())[:len(names)]
    except (TypeError, ValueError):
        return False
    return len(params) == len(names) and all(
        p.name == n and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        for p, n in zip(params, names))


def with_blas_threads(step, threads: int):
    """Run a BLAS op's step with numpy's BLAS on `threads` threads."""

    def run(env):
        set_blas_threads(threads)
        step(env)

    run.__qualname__ = step.__qualname__
    return run


def loop_step(count: int, arg_slots: list[int], in_slots: list[int], yield_slots: list[int],
               out_slots: list[int], body: list):
    """`ipu.for`: bind the carried and invariant values to the body's
    arguments, run the body `count` times feeding its yields back, and
    hand the last carried values out as the results."""
    carried = arg_slots[:len(yield_slots)]

    def step(env):
        for a, v in zip(arg_slots, in_slots):
            env[a] = env[v]
        for _ in range(count):
            for s in body:
                s(env)
            nxt = [env[y] for y in yield_slots]
            for a, v in zip(carried, nxt):
                env[a] = v
        for o, a in zip(out_slots, carried):
            env[o] = env[a]

    step.__qualname__ = f"ipu.for x{count}"
    return step


def named_step(step, name: str):
    step.__qualname__ = name
    return step


@lru_cache(maxsize=4096)
def _place_text(place) -> str:
    return str(place)


def step_name(op: Operation, kind: str | None = None) -> str:
    """A step's name as errors and profiles show it: the op's name (or
    `kind`) and its placement. Printing a placement attribute takes ~0.3 ms
    (xDSL's printer) and a model's ops share a few placements: each is
    printed once."""
    place = op.attributes.get(PLACE_KEY)
    if not place:
        return f"{kind or op.name} "
    try:
        text = _place_text(place)
    except TypeError:  # an attribute that does not hash
        text = str(place)
    return f"{kind or op.name} {text}"


def checked_step(step, op: Operation, outs: list[int]):
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
                                 f"({', '.join(str(v.type) for v in op.operands)}): {e}", op=op) from None
        for o, w, r in zip(outs, want, op.results):
            v = env[o]
            if w is None or v is None or np.shape(v) == (0,):
                continue
            if tuple(np.shape(v)) != w[0] or np.asarray(v).dtype != w[1]:
                raise ExecutionError(
                    f"{op.name} computed {np.asarray(v).dtype}{list(np.shape(v))} but the IR says "
                    f"{r.type}: the op's types are wrong", op=op)

    return run
