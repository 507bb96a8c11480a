"""The `ipu` dialect: PopTorch concepts on top of the aten graph.

- `#ipu.place<...>`: where an op runs (forward/backward, block, stage, IPU,
  phase). Every op of a traced graph carries one under the `ipu.place` key.
- helper ops from `poptorch.*` (identity_loss, serialized_matmul, nop,
  print_tensor, set_available_memory);
- the training step: gradient accumulation and optimizer updates, whose
  constant hyper-parameters are properties and whose variable ones (`lr`)
  are operands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, FloatAttr, IntAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    VarConstraint,
    base,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
    region_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

PLACE_KEY = "ipu.place"
START_BLOCK = "__start__"  # the implicit block of the ops before the first annotated one (IPU 0)
_PLACE_INTS = ("ipu", "stage", "phase")


@irdl_attr_definition
class PlacementAttr(ParametrizedAttribute):
    """`#ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>`.

    Fields left unset (block "" or -1) are omitted from the text; stage and
    phase are filled in by the stage-assignment pass.
    """

    name = "ipu.place"

    direction: StringAttr
    block: StringAttr
    ipu: IntAttr
    stage: IntAttr
    phase: IntAttr

    def __init__(self, direction: str = "fwd", block: str = "", ipu: int = -1,
                 stage: int = -1, phase: int = -1):
        super().__init__(StringAttr(direction), StringAttr(block), IntAttr(ipu),
                         IntAttr(stage), IntAttr(phase))

    @property
    def is_backward(self) -> bool:
        return self.direction.data == "bwd"

    def with_(self, **kw) -> PlacementAttr:
        cur = dict(direction=self.direction.data, block=self.block.data, ipu=self.ipu.data,
                   stage=self.stage.data, phase=self.phase.data)
        cur.update(kw)
        return PlacementAttr(**cur)

    def verify(self) -> None:
        if self.direction.data not in ("fwd", "bwd"):
            raise VerifyException(f"placement direction must be fwd or bwd, got {self.direction.data!r}")
        for key in _PLACE_INTS:
            if getattr(self, key).data < -1:
                raise VerifyException(f"placement {key} must be >= 0 (or -1: unset), "
                                      f"got {getattr(self, key).data}")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.direction.data)
            if self.block.data:
                printer.print_string(", block = ")
                printer.print_string_literal(self.block.data)
            for key in _PLACE_INTS:
                v = getattr(self, key).data
                if v >= 0:
                    printer.print_string(f", {key} = {v}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        pos = parser.pos
        direction = parser.parse_identifier(" (fwd or bwd)")
        if direction not in ("fwd", "bwd"):
            parser.raise_error(f"expected fwd or bwd, got {direction!r}", pos, parser.pos)
        fields = {"block": "", "ipu": -1, "stage": -1, "phase": -1}
        seen: set[str] = set()
        while parser.parse_optional_punctuation(",") is not None:
            pos = parser.pos
            key = parser.parse_identifier(" (block, ipu, stage or phase)")
            if key not in fields:
                parser.raise_error(f"unknown placement field {key!r}", pos, parser.pos)
            if key in seen:
                parser.raise_error(f"placement field {key!r} given twice", pos, parser.pos)
            seen.add(key)
            parser.parse_punctuation("=")
            fields[key] = parser.parse_str_literal() if key == "block" else parser.parse_integer()
        parser.parse_punctuation(">")
        return (StringAttr(direction), StringAttr(fields["block"]), IntAttr(fields["ipu"]),
                IntAttr(fields["stage"]), IntAttr(fields["phase"]))


_REDUCTIONS = ("sum", "mean", "none")
_SERIAL_MODES = ("input_channels", "reducing_dim", "output_channels")


class _UnaryTensorOp(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


@irdl_op_definition
class IdentityLossOp(_UnaryTensorOp):
    """`poptorch.identity_loss(x, reduction)`: the loss of a custom loss
    function; backward sends ones (scaled by the reduction) through it."""

    name = "ipu.identity_loss"
    reduction = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        if self.reduction.data not in _REDUCTIONS:
            raise VerifyException(f"reduction must be one of {_REDUCTIONS}, got {self.reduction.data!r}")


@irdl_op_definition
class NopOp(_UnaryTensorOp):
    """`poptorch.nop(x)`: an identity the optimiser keeps (for debugging)."""

    name = "ipu.nop"


@irdl_op_definition
class PrintTensorOp(_UnaryTensorOp):
    """`poptorch.ipu_print_tensor(x, title)`: prints when it runs."""

    name = "ipu.print_tensor"
    title = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)


@irdl_op_definition
class SetAvailableMemoryOp(_UnaryTensorOp):
    """`poptorch.set_available_memory(x, p)`: the proportion of tile memory
    the op producing `x` may use for temporaries (0 < p <= 1)."""

    name = "ipu.set_available_memory"
    proportion = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        p = self.proportion.value.data
        if not 0.0 < p <= 1.0:
            raise VerifyException(f"available memory proportion must be in (0, 1], got {p}")


@irdl_op_definition
class SerializedMatmulOp(IRDLOperation):
    """`poptorch.serializedMatMul(lhs, rhs, mode, factor, keep_precision)`."""

    name = "ipu.serialized_matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    mode = prop_def(StringAttr)
    factor = prop_def(IntegerAttr)
    keep_precision = opt_prop_def(BoolAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def verify_(self) -> None:
        if self.mode.data not in _SERIAL_MODES:
            raise VerifyException(f"mode must be one of {_SERIAL_MODES}, got {self.mode.data!r}")
        if self.factor.value.data < 1:
            raise VerifyException(f"factor must be >= 1, got {self.factor.value.data}")


@irdl_op_definition
class AccumulateOp(IRDLOperation):
    """Gradient accumulation: `acc + grad`, one per micro-batch and replica."""

    name = "ipu.accumulate"
    T: ClassVar = VarConstraint("T", base(TensorType))
    accumulator = operand_def(T)
    grad = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$accumulator `,` $grad attr-dict `:` type($result)"


@irdl_op_definition
class SGDOp(IRDLOperation):
    """One SGD update of `weight` from its accumulated gradient, as torch.optim.SGD.

    `grad_scale` turns the accumulated sum into the gradient the update uses
    (1/(G*R) for Mean reduction, divided by the loss scaling)."""

    name = "ipu.sgd"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    lr = operand_def(TensorType)
    velocity = opt_operand_def(TensorType)
    step = opt_operand_def(TensorType)
    new_weight = result_def(TensorType)
    new_velocity = opt_result_def(TensorType)
    momentum = prop_def(FloatAttr)
    dampening = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr)
    nesterov = prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "$weight `,` $grad `lr` $lr (`velocity` $velocity^)? (`step` $step^)? attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($lr) (`velocity` type($velocity)^)? "
        "(`step` type($step)^)? `->` type(results)"
    )

    def verify_(self) -> None:
        has_v = self.velocity is not None
        if has_v != (self.new_velocity is not None):
            raise VerifyException("sgd: velocity operand and result must come together")
        if self.momentum.value.data != 0.0 and not has_v:
            raise VerifyException("sgd: momentum != 0 needs a velocity operand")
        if has_v and self.step is None:
            raise VerifyException("sgd: velocity needs the step count operand")


@irdl_op_definition
class AdamOp(IRDLOperation):
    """One Adam / AdamW update (`decoupled` selects AdamW's weight decay)."""

    name = "ipu.adam"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    exp_avg = operand_def(TensorType)
    exp_avg_sq = operand_def(TensorType)
    step = operand_def(TensorType)
    lr = operand_def(TensorType)
    new_weight = result_def(TensorType)
    new_exp_avg = result_def(TensorType)
    new_exp_avg_sq = result_def(TensorType)
    beta1 = prop_def(FloatAttr)
    beta2 = prop_def(FloatAttr)
    eps = prop_def(FloatAttr)
    weight_decay = prop_def(FloatAttr)
    decoupled = prop_def(BoolAttr)
    bias_correction = prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$weight `,` $grad `,` $exp_avg `,` $exp_avg_sq `step` $step `lr` $lr attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `,` "
        "type($step) `,` type($lr) `->` type(results)"
    )


@irdl_op_definition
class CopyOp(IRDLOperation):
    """An IPU-to-IPU copy of a tensor at a stage boundary."""

    name = "ipu.copy"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    src = prop_def(IntegerAttr)
    dst = prop_def(IntegerAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($result)"


@irdl_op_definition
class StageOp(IRDLOperation):
    """One pipeline stage (or phase part) on one IPU, outlined by
    `ipu-outline-stages`: its region runs the stage's ops, its results are
    the values later stages use."""

    name = "ipu.stage"
    stage = prop_def(IntegerAttr)
    ipu = prop_def(IntegerAttr)
    phase = prop_def(IntegerAttr)
    direction = prop_def(StringAttr)
    outs = var_result_def(TensorType)
    body = region_def("single_block")
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict (`->` type($outs)^)? $body"


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The values a stage hands on to later stages."""

    name = "ipu.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(StageOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"


IPU_OPS = [IdentityLossOp, NopOp, PrintTensorOp, SetAvailableMemoryOp, SerializedMatmulOp,
           AccumulateOp, SGDOp, AdamOp, CopyOp, YieldOp, StageOp]
IPU = Dialect("ipu", IPU_OPS, [PlacementAttr])
