"""`ipu-serialize-matmul`: lower `ipu.serialized_matmul` to `factor` aten pieces.

`poptorch.serializedMatMul(lhs[..., m, k], rhs[k, n], mode, factor)` trades
time for memory: the device computes the product in `factor` serial steps,
each needing 1/factor of the temporaries. This pass makes those steps
explicit in the graph (PopTorch user guide, 4.6.8 "poptorch.serializedMatMul"), so the later passes, the
schedule and the memory model see the pieces instead of one opaque op:

- `input_channels`: split m, one matmul per row block, `aten.cat` on m;
- `output_channels`: split n (rhs columns), one matmul per block, `aten.cat` on n;
- `reducing_dim`: split k (lhs columns and rhs rows), one matmul per block,
  partial products summed with `aten.add.Tensor`.

The pieces are `aten.slice.Tensor` + `aten.mm` (2-D lhs, or a batched lhs
flattened to [B*m, k] with `aten.view`). A batched lhs in `input_channels`
mode is viewed as [B, m, k], sliced on m and multiplied with `aten.bmm`
against rhs expanded to [B, k, n]. Factor 1 is one plain matmul. Every new
op keeps the serialized op's attributes (its `ipu.place`; an
`ipu.available_memory` only on the matmuls). `keep_precision` needs nothing
here: the numpy kernels already compute with fp32 partials.

The backward of a serialized matmul is traced as plain aten matmuls by the
frontend's custom op (numerically what the device computes).

A factor that does not divide the split dimension is an error naming both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tilefx.errors import Error
from tilefx.dialects import ipu
from tilefx.dialects.aten import create_aten_op
from tilefx.dialects.names import AVAILABLE_MEMORY_KEY

_SPLIT_DIM = {"input_channels": "m", "reducing_dim": "k", "output_channels": "n"}


class SerializationError(Error, DiagnosticException):
    """A serialized matmul that cannot be split (a tilefx.Error and an IR diagnostic)."""

    def __init__(self, message: str):
        Error.__init__(self, message, type="ipu-serialize-matmul")


class _Emitter:
    """Builds aten ops right before `anchor`, with the anchor's attributes."""

    def __init__(self, anchor: ipu.SerializedMatmulOp):
        self.anchor = anchor
        self.elt = anchor.result.type.element_type
        self.attrs = dict(anchor.attributes)
        self.plain_attrs = {k: v for k, v in self.attrs.items() if k != AVAILABLE_MEMORY_KEY}

    def __call__(self, name: str, operands: dict, props: dict, shape: list[int]) -> SSAValue:
        is_matmul = name in ("mm.default", "bmm.default")
        op = create_aten_op(name, operands, props, [TensorType(self.elt, shape)],
                            dict(self.attrs if is_matmul else self.plain_attrs))
        self.anchor.parent_block().insert_op_before(op, self.anchor)
        return op.results[0]

    def view(self, x: SSAValue, shape: list[int]) -> SSAValue:
        if list(x.type.get_shape()) == shape:
            return x
        return self("view.default", {"self": x}, {"size": shape}, shape)

    def slice(self, x: SSAValue, dim: int, start: int, end: int) -> SSAValue:
        shape = list(x.type.get_shape())
        shape[dim] = end - start
        return self("slice.Tensor", {"self": x}, {"dim": dim, "start": start, "end": end}, shape)


def _lower(op: ipu.SerializedMatmulOp) -> SSAValue:
    lhs, rhs = op.lhs, op.rhs
    mode, factor = op.mode.data, op.factor.value.data
    try:
        batch, m, k, n = op.dims()
    except VerifyException as e:  # IR built without verifying it
        raise SerializationError(str(e)) from None
    dim = {"m": m, "k": k, "n": n}[_SPLIT_DIM[mode]]
    emit, c, B = _Emitter(op), dim // factor, math.prod(batch)
    out_shape = [*batch, m, n]
    bounds = [(i * c, (i + 1) * c) for i in range(factor)]

    if mode == "input_channels" and batch and factor > 1:
        a = emit.view(lhs, [B, m, k])
        r = emit("expand.default", {"self": rhs}, {"size": [B, k, n]}, [B, k, n])
        parts = [emit("bmm.default", {"self": emit.slice(a, 1, s, e), "mat2": r}, {}, [B, c, n])
                 for s, e in bounds]
        return emit.view(emit("cat.default", {"tensors": parts}, {"dim": 1}, [B, m, n]), out_shape)

    a = emit.view(lhs, [B * m, k])  # rows of every batch: [B*m, k] (no-op for a 2-D lhs)
    if factor == 1:
        return emit.view(emit("mm.default", {"self": a, "mat2": rhs}, {}, [B * m, n]), out_shape)
    if mode == "input_channels":  # 2-D lhs: row blocks
        parts = [emit("mm.default", {"self": emit.slice(a, 0, s, e), "mat2": rhs}, {}, [c, n])
                 for s, e in bounds]
        out = emit("cat.default", {"tensors": parts}, {"dim": 0}, [m, n])
    elif mode == "output_channels":
        parts = [emit("mm.default", {"self": a, "mat2": emit.slice(rhs, 1, s, e)}, {}, [B * m, c])
                 for s, e in bounds]
        out = emit("cat.default", {"tensors": parts}, {"dim": 1}, [B * m, n])
    else:  # reducing_dim
        out = None
        for s, e in bounds:
            p = emit("mm.default", {"self": emit.slice(a, 1, s, e), "mat2": emit.slice(rhs, 0, s, e)},
                     {}, [B * m, n])
            out = p if out is None else emit("add.Tensor", {"self": out, "other": p}, {}, [B * m, n])
    return emit.view(out, out_shape)


@dataclass(frozen=True)
class SerializeMatmulPass(ModulePass):
    """Replace every `ipu.serialized_matmul` by its `factor` aten pieces."""

    name = "ipu-serialize-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        todo: list[Operation] = [o for o in op.walk() if o.name == "ipu.serialized_matmul"]
        for smm in todo:
            smm.result.replace_all_uses_with(_lower(smm))
            smm.parent_block().erase_op(smm)
