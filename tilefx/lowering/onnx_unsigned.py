"""ONNX uint64 tensors for the ONNX module (from_onnx.OnnxModule).

Why: the dynamo exporter writes an arithmetic right shift `x >> n` of an
int64 tensor as Cast(x, uint64) -> BitShift(RIGHT) -> BitwiseOr with the
sign bits -> Cast(int64) (and a left shift through uint64 too), and neither
the IR nor torch's CPU kernels have uint64 arithmetic. A uint64 value is
therefore carried as the int64 tensor of the same 64 bits (two's complement,
the bits numpy's `.view(np.int64)` gives), and the module remembers which
tensors are such bit patterns (by identity, so a value keeps its type through
a Loop body's or If branch's names). Operators for which unsigned and signed
integers give the same bits (moves, casts to and from int64, Add/Sub/Mul
modulo 2^64, the bitwise operators, a left shift, Equal) run as they are;
a right shift is made logical, comparisons and Max/Min compare with the sign
bit flipped, and a cast to a float type adds 2^64 to what reads negative.
Any other operator on a uint64 value (Div, Mod, reductions, ...) is a clear
error rather than a signed result. uint64 graph inputs and outputs are an
error too (a session's anchors and feeds would be int64 arrays).
"""

from __future__ import annotations

import numpy as np
import onnx
import torch

from tilefx.errors import Error
from tilefx.lowering.onnx_values import _t

UINT64 = onnx.TensorProto.UINT64
_SIGN = -(2 ** 63)  # the sign bit, as an int64

# operators whose result has the same 64 bits for uint64 operands as for their int64 bit patterns
SAME_BITS = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Concat",
             "Slice", "Gather", "GatherElements", "GatherND", "Split", "Tile", "Where", "Pad",
             "ScatterElements", "ScatterND", "Add", "Sub", "Mul", "Neg", "BitwiseAnd", "BitwiseOr",
             "BitwiseXor", "BitwiseNot"}
# same bits, and a result that is not a uint64 value
SAME_BITS_OTHER_RESULT = {"Equal", "Shape", "Size"}
_COMPARE = {"Less": torch.lt, "Greater": torch.gt, "LessOrEqual": torch.le, "GreaterOrEqual": torch.ge}


def bits(x):
    """A uint64 compile-time array as its int64 bit pattern (other values as they are)."""
    if isinstance(x, np.ndarray) and x.dtype == np.uint64:
        return x.view(np.int64)
    return x


def is_uint64(x, marked: dict[int, torch.Tensor]) -> bool:
    """A compile-time uint64 array, or a tensor `marked` holds (id -> the tensor,
    kept alive so that its id is not reused)."""
    return (isinstance(x, np.ndarray) and x.dtype == np.uint64) or (isinstance(x, torch.Tensor)
                                                                    and id(x) in marked)


def mark(values, marked: dict[int, torch.Tensor]) -> None:
    for v in values:
        if isinstance(v, torch.Tensor):
            marked[id(v)] = v


def run(node: onnx.NodeProto, ins: list, at: dict, call, marked: dict[int, torch.Tensor]) -> tuple[tuple, bool]:
    """Run `node`, some of whose operands are uint64 (as bit patterns): its results
    and whether they are uint64 bit patterns. `call(ins)` runs the node's usual
    conversion on operands."""
    op = node.op_type
    raw, ins = ins, [bits(x) for x in ins]
    if op == "BitShift":
        if at.get("direction") == "RIGHT":
            return (_logical_right_shift(_t(ins[0]), _t(ins[1])),), True
        return _as_tuple(call(ins)), True
    if op == "Cast":
        return (_cast_from_uint64(_t(ins[0]), _torch_dtype(int(at["to"]))),), int(at["to"]) == UINT64
    if op == "CastLike":
        if is_uint64(raw[1], marked):
            return (cast_to_uint64(_t(ins[0])),), True
        return (_cast_from_uint64(_t(ins[0]), _t(ins[1]).dtype),), False
    if op in _COMPARE:
        a, b = (_t(x) ^ _SIGN for x in ins[:2])  # unsigned order = signed order of the flipped bits
        return (_COMPARE[op](a, b),), False
    if op in ("Max", "Min"):
        pick = torch.maximum if op == "Max" else torch.minimum
        out = _t(ins[0]) ^ _SIGN
        for x in ins[1:]:
            out = pick(out, _t(x) ^ _SIGN)
        return (out ^ _SIGN,), True
    if op in SAME_BITS or op in SAME_BITS_OTHER_RESULT:
        # the result has the type of the data operand (Where's values; not a Gather's indices)
        data = raw[1] if op == "Where" else raw[0]
        return _as_tuple(call(ins)), op in SAME_BITS and is_uint64(data, marked)
    raise Error(f"ONNX node {node.name or op!r} ({op}) on a uint64 tensor is not supported: tilefx "
                "carries uint64 values as int64 bit patterns, which moves, casts, Add/Sub/Mul, bitwise "
                "operators, shifts, comparisons and Max/Min handle", type="frontend")


def cast_to_uint64(x: torch.Tensor) -> torch.Tensor:
    """Cast(to=UINT64) of a tensor of another type: the uint64 value's bit pattern
    (integers keep their bits, modulo 2^64; floats from 2^63 up wrap to negative).
    Always a new tensor: the result is marked by identity, the operand is not."""
    if x.dtype == torch.bool or not x.is_floating_point():
        return _fresh(x.to(torch.int64), x)
    big = x >= 2.0 ** 63
    return torch.where(big, (x.double() - 2.0 ** 64), x.double()).to(torch.int64)


def _torch_dtype(onnx_type: int) -> torch.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype

    if onnx_type == UINT64:
        return torch.int64
    return torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(onnx_type))).dtype


def _cast_from_uint64(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A cast of uint64 bit patterns to `dtype` (int64: the same bits, as a new,
    unmarked tensor)."""
    if dtype.is_floating_point:
        wide = x.double()
        return torch.where(x < 0, wide + 2.0 ** 64, wide).to(dtype)
    if dtype == torch.bool:
        return x != 0
    return _fresh(x.to(dtype), x)  # the low bits, as a cast of the uint64 value keeps them


def _fresh(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """`y`, or an alias of it where it is `x` itself (a cast to its own type)."""
    return torch.ops.aten.alias.default(y) if y is x else y


def _logical_right_shift(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """ONNX's right shift of uint64 bit patterns: zeros come in from the left (torch's
    int64 shift is arithmetic), and a shift by 64 or more gives 0."""
    n = n.to(torch.int64)
    arithmetic = torch.bitwise_right_shift(x, n.clamp(0, 63))
    # the bits the arithmetic shift copied from the sign: clear the top n
    keep = torch.bitwise_left_shift(torch.ones_like(n), (64 - n).clamp(0, 63)) - 1
    logical = torch.where(n > 0, arithmetic & keep, arithmetic)
    return torch.where(n >= 64, torch.zeros_like(logical), logical)


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def check_boundary(model: onnx.ModelProto) -> None:
    """uint64 graph inputs and outputs are not supported (the module docstring)."""
    inits = {t.name for t in model.graph.initializer}
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for vi in values:
            if vi.name not in inits and vi.type.tensor_type.elem_type == UINT64:
                raise Error(f"graph {kind} {vi.name!r} is uint64, which tilefx carries only inside the graph "
                            "(as int64 bit patterns): give or take it as int64", type="frontend")
