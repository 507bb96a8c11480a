"""ONNX uint64, uint32 and uint16 tensors for the ONNX module (from_onnx.OnnxModule).

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
error rather than a signed result. uint32 and uint16 values (a model's
`x.to(torch.uint32)`) are int64 tensors holding their values, every result
wrapped back into the type's range (Add/Sub/Mul/Neg/BitwiseNot/left shifts/
sums modulo 2^32 or 2^16), so their division, remainders, comparisons and
reductions are int64's. Unsigned graph outputs and uint64 graph inputs are
an error (a session's anchors would be int64 arrays, a uint64 feed may not
fit); uint16 and uint32 graph inputs are taken as their int64 values
(PopART's CTC loss takes its targets and lengths as UINT32), so arithmetic
on them is int64's, not wrapped.
"""

from __future__ import annotations

import numpy as np
import onnx
import torch

from tilefx.errors import Error
from tilefx.lowering.onnx_values import _t

UINT64 = onnx.TensorProto.UINT64
# the unsigned types carried as int64, by their width in bits (uint8 is torch's own)
WIDTHS = {UINT64: 64, onnx.TensorProto.UINT32: 32, onnx.TensorProto.UINT16: 16}
_NP_WIDTHS = {np.dtype(np.uint64): 64, np.dtype(np.uint32): 32, np.dtype(np.uint16): 16}
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
    """An unsigned compile-time array as its int64 form (uint64: the bit pattern;
    narrower: the values); other values as they are."""
    if isinstance(x, np.ndarray) and x.dtype in _NP_WIDTHS:
        return x.view(np.int64) if x.dtype == np.uint64 else x.astype(np.int64)
    return x


def width(x, marked: dict) -> int | None:
    """The width of an unsigned value: a compile-time array of an unsigned type, or a
    tensor `marked` holds (id -> (the tensor, kept alive so that its id is not
    reused, and its width)); None for any other value."""
    if isinstance(x, np.ndarray):
        return _NP_WIDTHS.get(x.dtype)
    if isinstance(x, torch.Tensor) and id(x) in marked:
        return marked[id(x)][1]
    return None


def is_unsigned(x, marked: dict) -> bool:
    return width(x, marked) is not None


def mark(values, marked: dict, bits_wide: int) -> None:
    for v in values:
        if isinstance(v, torch.Tensor):
            marked[id(v)] = (v, bits_wide)


def _wrap(x: torch.Tensor, bits_wide: int) -> torch.Tensor:
    """An int64 result back in the range of a `bits_wide`-bit unsigned type (modulo)."""
    return x & ((1 << bits_wide) - 1)


def run(node: onnx.NodeProto, ins: list, at: dict, call, marked: dict) -> tuple[tuple, int | None]:
    """Run `node`, some of whose operands are unsigned (as int64): its results and
    their unsigned width (None: not unsigned). `call(ins)` runs the node's usual
    conversion on operands."""
    op = node.op_type
    raw, ins = ins, [bits(x) for x in ins]
    # the result has the type of the data operand (Where's values; not a Gather's indices)
    data = width(raw[1] if op == "Where" else raw[0], marked)
    if op in ("Cast", "CastLike"):
        to = int(at["to"]) if op == "Cast" else None
        target = WIDTHS.get(to) if op == "Cast" else width(raw[1], marked)
        x = _t(ins[0])
        if target is not None:
            return (cast_to_unsigned(x, target, data),), target
        dtype = _torch_dtype(to) if op == "Cast" else _t(ins[1]).dtype
        return (_cast_from_unsigned(x, dtype, data),), None
    if data is not None and data < 64:
        return _run_narrow(node, op, ins, at, call, data)
    if op == "BitShift":
        if at.get("direction") == "RIGHT":
            return (_logical_right_shift(_t(ins[0]), _t(ins[1])),), 64
        return _as_tuple(call(ins)), 64
    if op in _COMPARE:
        a, b = (_t(x) ^ _SIGN for x in ins[:2])  # unsigned order = signed order of the flipped bits
        return (_COMPARE[op](a, b),), None
    if op in ("Max", "Min"):
        pick = torch.maximum if op == "Max" else torch.minimum
        out = _t(ins[0]) ^ _SIGN
        for x in ins[1:]:
            out = pick(out, _t(x) ^ _SIGN)
        return (out ^ _SIGN,), 64
    if op in SAME_BITS or op in SAME_BITS_OTHER_RESULT:
        return _as_tuple(call(ins)), data if op in SAME_BITS else None
    raise Error(f"ONNX node {node.name or op!r} ({op}) on a uint64 tensor is not supported: tilefx "
                "carries uint64 values as int64 bit patterns, which moves, casts, Add/Sub/Mul, bitwise "
                "operators, shifts, comparisons and Max/Min handle", type="frontend")


# uint32 / uint16 (int64 values in range): results to wrap back into the range, results
# that stay in it, and results of another type
_NARROW_WRAP = {"Add", "Sub", "Mul", "Neg", "BitwiseNot", "Sum", "ReduceSum", "ReduceProd", "CumSum"}
_NARROW_KEEP = (SAME_BITS - _NARROW_WRAP) | {"Div", "Mod", "Max", "Min", "ReduceMax", "ReduceMin"}
_NARROW_OTHER = set(_COMPARE) | SAME_BITS_OTHER_RESULT | {"ArgMax", "ArgMin"}


def _run_narrow(node, op, ins, at, call, bits_wide: int) -> tuple[tuple, int | None]:
    if op == "BitShift":
        x, n = _t(ins[0]), _t(ins[1]).to(torch.int64).clamp(0, 63)
        if at.get("direction") == "RIGHT":  # the value is not negative: the shift is logical
            return (torch.bitwise_right_shift(x, n),), bits_wide
        return (_wrap(torch.bitwise_left_shift(x, n), bits_wide),), bits_wide
    if op in _NARROW_WRAP:
        return tuple(_wrap(o, bits_wide) for o in _as_tuple(call(ins))), bits_wide
    if op in _NARROW_KEEP:
        return _as_tuple(call(ins)), bits_wide
    if op in _NARROW_OTHER:
        return _as_tuple(call(ins)), None
    raise Error(f"ONNX node {node.name or op!r} ({op}) on a uint{bits_wide} tensor is not supported",
                type="frontend")


def cast_to_unsigned(x: torch.Tensor, bits_wide: int, source: int | None = None) -> torch.Tensor:
    """A cast to an unsigned type of `bits_wide` bits from `x`, a tensor of another
    type (or unsigned of `source` bits): uint64 the bit pattern (integers keep their
    bits, modulo 2^64; floats from 2^63 up wrap to negative), narrower types the
    value modulo 2^bits (floats truncated first). Always a new tensor: the result is
    marked by identity, the operand is not."""
    if x.is_floating_point():
        if bits_wide == 64:
            big = x >= 2.0 ** 63
            return torch.where(big, (x.double() - 2.0 ** 64), x.double()).to(torch.int64)
        return _wrap(x.to(torch.int64), bits_wide)
    if bits_wide == 64 or (source is not None and source <= bits_wide):
        return _fresh(x.to(torch.int64), x)  # the same bits, or a narrower unsigned value
    return _wrap(x.to(torch.int64), bits_wide)


def _torch_dtype(onnx_type: int) -> torch.dtype:
    from onnx.helper import tensor_dtype_to_np_dtype

    if onnx_type == UINT64:
        return torch.int64
    return torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(onnx_type))).dtype


def _cast_from_unsigned(x: torch.Tensor, dtype: torch.dtype, bits_wide: int | None) -> torch.Tensor:
    """A cast of unsigned values (uint64 bit patterns, narrower types' values) or of a
    signed tensor to the signed or float `dtype` (int64: the same bits, as a new,
    unmarked tensor)."""
    if dtype.is_floating_point:
        if bits_wide != 64:
            return x.to(dtype)
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
    """Unsigned graph outputs (but uint8) and uint64 graph inputs are not
    supported (the module docstring). uint16 and uint32 inputs are: their
    values fit int64, the form they take inside the graph (PopART's CTC loss
    takes its targets and lengths as UINT32)."""
    inits = {t.name for t in model.graph.initializer}
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for vi in values:
            bits_wide = WIDTHS.get(vi.type.tensor_type.elem_type)
            if kind == "input" and bits_wide in (16, 32):
                continue
            if vi.name not in inits and bits_wide is not None:
                raise Error(f"graph {kind} {vi.name!r} is uint{bits_wide}, which tilefx carries only inside the "
                            "graph (as int64): give or take it as int64", type="frontend")
