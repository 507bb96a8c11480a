"""IR helpers that passes, lowerings, the backend and the tools share.

Finding a function, reading attributes as Python values, rewriting a
function's results, a value's shape and element count, an op's placement,
the roles of a function's arguments and results: small operations on the
graph IR with one home, below every layer that uses them.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (ArrayAttr, BoolAttr, DictionaryAttr, FloatAttr, IntegerAttr, ModuleOp,
                                   StringAttr, f64, i64)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import DiagnosticException

from tilefx.dialects.aten import from_attr
from tilefx.dialects.ipu import PlacementAttr
from tilefx.dialects.names import CONST_VALUE_KEY, PLACE_KEY, ROLE_PREFIX


def to_py(attr: Attribute):
    """The Python value of an attribute (dicts and arrays recursively)."""
    if isinstance(attr, DictionaryAttr):
        return {k: to_py(v) for k, v in attr.data.items()}
    if isinstance(attr, ArrayAttr):
        return [to_py(v) for v in attr.data]
    return from_attr(attr)


def from_py(value) -> Attribute:
    """The attribute of a Python value (the inverse of `to_py` for bools,
    ints, floats, strings, lists and string-keyed dicts)."""
    if isinstance(value, bool):
        return BoolAttr.from_bool(value)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, dict):
        return DictionaryAttr({str(k): from_py(x) for k, x in value.items()})
    if isinstance(value, (list, tuple)):
        return ArrayAttr([from_py(x) for x in value])
    raise TypeError(f"cannot store {value!r} in the IR")


def find_func(module: ModuleOp, name: str) -> func.FuncOp:
    """The function @name of `module` (a diagnostic if there is none, or if
    it is a declaration or has several blocks: tilefx's functions are one block)."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            if len(op.body.blocks) != 1:
                what = "no body (a declaration)" if not op.body.blocks else f"{len(op.body.blocks)} blocks"
                raise DiagnosticException(f"function @{name} has {what}: tilefx runs and transforms "
                                          "functions of one block")
            return op
    raise DiagnosticException(f"no function @{name} in the module")


def module_config(module: ModuleOp, key: str) -> dict | None:
    """The module attribute `key` (ipu.strategy, ipu.optimizer, ...) as a
    Python dict, None when absent; a diagnostic when it is not a dictionary."""
    attr = module.attributes.get(key)
    if attr is None:
        return None
    if not isinstance(attr, DictionaryAttr):
        raise DiagnosticException(f"module attribute {key} must be a dictionary, got {attr}")
    return to_py(attr)


def set_results(fn: func.FuncOp, results: list, arg_attrs: list[dict], res_attrs: list[dict]) -> None:
    """Make `fn` return `results`, and update its type and argument/result attributes
    (after a pass added arguments or results)."""
    block = fn.body.block
    ret = block.last_op
    block.insert_op_before(func.ReturnOp(*results), ret)
    block.erase_op(ret)
    fn.function_type = func.FunctionType.from_lists([a.type for a in block.args],
                                                   [r.type for r in results])
    fn.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in arg_attrs])
    fn.res_attrs = ArrayAttr([DictionaryAttr(a) for a in res_attrs])


def attrs_of(fn: func.FuncOp, which: str) -> list[dict[str, Attribute]]:
    """The argument ("arg") or result ("res") attributes of `fn`, one dict each."""
    arr = fn.arg_attrs if which == "arg" else fn.res_attrs
    n = len(fn.body.block.args) if which == "arg" else len(fn.function_type.outputs)
    return [dict(arr.data[i].data) if arr is not None else {} for i in range(n)]


def stage_ops(fn: func.FuncOp) -> list:
    """The outlined `ipu.stage` ops of `fn`, in program order (empty before
    ipu-outline-stages has run)."""
    from tilefx.dialects.ipu import StageOp

    return [op for op in fn.body.block.ops if isinstance(op, StageOp)]


def blocks_of(op):
    """Every block of `op` and of the ops nested in it (stage bodies, loop
    bodies), `op`'s own first."""
    for o in op.walk():
        for region in o.regions:
            yield from region.blocks


def mark_groups(module: ModuleOp, groups, key: str, root_key: str) -> None:
    """Write `groups(fn)` (each with `ops` and a `root`) of every function of
    `module` on the IR, for tilefx-opt: `key = <group id>` on each member,
    `root_key` on the root."""
    from xdsl.dialects.builtin import UnitAttr

    n = 0
    for fn in module.walk():
        if isinstance(fn, func.FuncOp):
            for g in groups(fn):
                for m in g.ops:
                    m.attributes[key] = IntegerAttr(n, i64)
                g.root.attributes[root_key] = UnitAttr()
                n += 1


def flat_ops(block):
    """The ops of `block` with every `ipu.stage` replaced by its body's ops:
    the program order the executor runs."""
    from tilefx.dialects.ipu import StageOp

    for op in block.ops:
        if isinstance(op, StageOp):
            yield from flat_ops(op.body.block)
        else:
            yield op


def numel(shape) -> int:
    """The element count of a shape (1 for a 0-d shape)."""
    return math.prod(shape)


def shape_of(v, default=()) -> tuple[int, ...]:
    """The static shape of an SSA value (or of a type); `default` for a value
    without one (a scalar, a token)."""
    t = getattr(v, "type", v)
    return tuple(t.get_shape()) if hasattr(t, "get_shape") else default


def value_numel(v) -> int:
    """The element count of an SSA value (or of a type)."""
    return numel(shape_of(v))


def place(op, default: PlacementAttr | None = None) -> PlacementAttr | None:
    """The `ipu.place` placement of `op`, `default` when it has none."""
    p = op.attributes.get(PLACE_KEY)
    return p if isinstance(p, PlacementAttr) else default


def arg_roles(fn: func.FuncOp) -> list[dict[str, Any]]:
    """The `tilefx.*` attributes of each argument of `fn` as Python values
    (a unit attribute as True; the lifted constant's value is not a role)."""
    return _roles(fn.arg_attrs, len(fn.body.block.args))


def result_roles(fn: func.FuncOp) -> list[dict[str, Any]]:
    """The `tilefx.*` attributes of each result of `fn` as Python values."""
    return _roles(fn.res_attrs, len(fn.function_type.outputs))


def _roles(attrs, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        d = attrs.data[i].data if attrs is not None else {}
        row = {}
        for k, v in d.items():
            if not k.startswith(ROLE_PREFIX) or k == CONST_VALUE_KEY:  # a value, not a role
                continue
            key = k.removeprefix(ROLE_PREFIX)
            row[key] = True if v.__class__.__name__ == "UnitAttr" else from_attr(v)
        out.append(row)
    return out
