"""The `ipu` dialect: PopTorch concepts on top of the aten graph.

- `#ipu.place<...>`: where an op runs (forward/backward, block, stage, IPU,
  phase). Every op of a traced graph carries one under the `ipu.place` key.
- helper ops from `poptorch.*` (identity_loss, serialized_matmul, nop,
  print_tensor, set_available_memory);
- `ipu.dynamic_slice` / `ipu.dynamic_update` (a runtime start index),
  `ipu.for` (PopTorch's `for_loop`: a region run `count` times),
  `ipu.recomputation_checkpoint`, `ipu.ctc_beam_search_decoder` and
  `ipu.custom_op` (a Python-registered custom op);
- the training step: gradient accumulation and optimizer updates, whose
  constant hyper-parameters are properties and whose variable ones (`lr`)
  are operands.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BoolAttr, DictionaryAttr, FloatAttr, IntAttr, IntegerAttr, StringAttr, TensorType, f32
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    EqAttrConstraint,
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
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tilefx.dialects.names import PLACE_KEY  # noqa: F401  (re-exported: the placement attribute's key)
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
        return _placement(cur["direction"], cur["block"], cur["ipu"], cur["stage"], cur["phase"])

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


@functools.lru_cache(maxsize=1 << 14)
def _placement(direction: str, block: str, ipu: int, stage: int, phase: int) -> PlacementAttr:
    """One attribute per placement (attributes are immutable values): the
    graph passes re-place every op of a model in each compile, most with a
    placement another op already has."""
    return PlacementAttr(direction, block, ipu, stage, phase)


class _UnaryTensorOp(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"


class _IdentityOp(_UnaryTensorOp):
    """A unary op whose result is its input (the executor passes it on): the
    types must agree, or a program would carry a tensor its type misstates."""

    def verify_(self) -> None:
        if self.result.type != self.input.type:
            raise VerifyException(f"{self.name}: the result type {self.result.type} must be the "
                                  f"input type {self.input.type}")


class IdentityLossOp(_UnaryTensorOp):
    """`poptorch.identity_loss(x, reduction)`: the loss of a custom loss
    function; backward sends ones (scaled by the reduction) through it."""

    name = "ipu.identity_loss"
    reduction = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        if self.reduction.data not in _REDUCTIONS:
            raise VerifyException(f"reduction must be one of {_REDUCTIONS}, got {self.reduction.data!r}")
        x = self.input.type
        want = x if self.reduction.data == "none" else TensorType(x.element_type, [])
        if self.result.type != want:
            raise VerifyException(f"ipu.identity_loss: reduction {self.reduction.data!r} of {x} gives "
                                  f"{want}, not {self.result.type}")


class NopOp(_IdentityOp):
    """`poptorch.nop(x)`: an identity the optimiser keeps (for debugging)."""

    name = "ipu.nop"


# `poptorch.ipu_print_tensor`'s formatting arguments after the title, in
# PopTorch's order with its defaults (poplar's PrintTensor format)
PRINT_FORMAT_DEFAULTS = {"summarise_threshold": 1000, "edge_items": 3, "max_line_width": 80, "digits": 4,
                         "float_format": "auto", "separator": ", ", "open_bracket": "(", "close_bracket": ")"}
PRINT_FLOAT_FORMATS = ("auto", "fixed", "scientific", "none")
# what PopART appends to the title of the print of a gradient
PRINT_GRADIENT_TITLE_SUFFIX = "_gradient"


class PrintTensorOp(_IdentityOp):
    """`poptorch.ipu_print_tensor(x, title, ...)`: prints when it runs, as
    `format` says (PRINT_FORMAT_DEFAULTS' keys; absent: the defaults)."""

    name = "ipu.print_tensor"
    title = opt_prop_def(StringAttr)
    format = opt_prop_def(DictionaryAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        super().verify_()
        if self.format is None:
            return
        if unknown := sorted(set(self.format.data) - set(PRINT_FORMAT_DEFAULTS)):
            raise VerifyException(f"ipu.print_tensor: unknown format keys {unknown}")
        ff = self.format.data.get("float_format")
        if ff is not None and (not isinstance(ff, StringAttr) or ff.data not in PRINT_FLOAT_FORMATS):
            raise VerifyException(f"ipu.print_tensor: float_format must be one of {PRINT_FLOAT_FORMATS}")


# The share of a tile's memory an op may use for temporaries when the user
# sets none: Poplar's default for matmuls and convolutions (PopTorch user
# guide, "Available memory proportion"; PopLibs `availableMemoryProportion`).
DEFAULT_PROPORTION = 0.6


def is_proportion(p) -> bool:
    """An available memory proportion: a share of a tile's memory, 0 < p <= 1."""
    return 0.0 < p <= 1.0


class SetAvailableMemoryOp(_IdentityOp):
    """`poptorch.set_available_memory(x, p)`: the proportion of tile memory
    the op producing `x` may use for temporaries (0 < p <= 1)."""

    name = "ipu.set_available_memory"
    proportion = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        p = self.proportion.value.data
        if not is_proportion(p):
            raise VerifyException(f"available memory proportion must be in (0, 1], got {p}")
        super().verify_()


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
        self.dims()

    def dims(self) -> tuple[list[int], int, int, int]:
        """(batch, m, k, n) of lhs [..., m, k] times rhs [k, n], checked: the
        mode and factor (which divides the dimension the mode splits), the
        result [..., m, n] and the element types."""
        if self.mode.data not in _SERIAL_MODES:
            raise VerifyException(f"mode must be one of {_SERIAL_MODES}, got {self.mode.data!r}")
        factor = self.factor.value.data
        if factor < 1:
            raise VerifyException(f"factor must be >= 1, got {factor}")
        ls, rs = list(self.lhs.type.get_shape()), list(self.rhs.type.get_shape())
        if len(rs) != 2 or len(ls) < 2 or ls[-1] != rs[0]:
            raise VerifyException(f"ipu.serialized_matmul: expected lhs [..., m, k] and rhs [k, n], "
                                  f"got {ls} and {rs}")
        batch, (m, k), n = ls[:-2], ls[-2:], rs[1]
        dim = {"input_channels": m, "reducing_dim": k, "output_channels": n}[self.mode.data]
        if dim % factor:
            raise VerifyException(f"ipu.serialized_matmul: factor {factor} does not divide "
                                  f"the {self.mode.data} dimension {dim}")
        if self.rhs.type.element_type != self.lhs.type.element_type:
            raise VerifyException(f"ipu.serialized_matmul: lhs and rhs element types differ "
                                  f"({self.lhs.type.element_type}, {self.rhs.type.element_type})")
        want = TensorType(self.lhs.type.element_type, [*batch, m, n])
        if self.result.type != want:
            raise VerifyException(f"ipu.serialized_matmul: {self.lhs.type} times {self.rhs.type} is "
                                  f"{want}, not {self.result.type}")
        return batch, m, k, n


class AccumulateOp(IRDLOperation):
    """Gradient accumulation: `acc + grad`, one per micro-batch and replica."""

    name = "ipu.accumulate"
    T: ClassVar = VarConstraint("T", base(TensorType))
    accumulator = operand_def(T)
    grad = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$accumulator `,` $grad attr-dict `:` type($result)"


# Optimizer updates. Every hyper-parameter is either a property (constant:
# compiled into the program) or, when the optimizer marks it variable, a
# scalar `tensor<f32>` operand written after its keyword (`weight_decay %wd`)
# whose value the executor supplies at every weight update. `lr` is always
# an operand. The state tensors' element types are the accumulation types
# (fp16 state is computed in fp32 and rounded when stored).

SCALAR_F32 = TensorType(f32, [])


def _hyper_operand():
    return opt_operand_def(EqAttrConstraint(SCALAR_F32))


def _hyper_format(names: Sequence[str]) -> str:
    return " ".join(f"(`{n}` ${n}_var^)?" for n in names)


def _check_hypers(op: IRDLOperation, names: Sequence[str]) -> None:
    """Each hyper-parameter is a property (constant) or an operand (variable), never both."""
    for n in names:
        prop, var = op.properties.get(n), getattr(op, f"{n}_var")
        if (prop is None) == (var is None):
            what = "both a property and an operand" if prop is not None else "neither a property nor an operand"
            raise VerifyException(f"{op.name}: hyper-parameter {n} is {what}")


def _constant(op: IRDLOperation, name: str):
    """The constant value of a hyper-parameter, None when it is variable."""
    attr = op.properties.get(name)
    if attr is None:
        return None
    return bool(attr.value.data) if isinstance(attr, IntegerAttr) else attr.value.data


def _check_update(op: IRDLOperation, states: Sequence[str]) -> None:
    """An update's types: the gradient and every state have the weight's
    shape; each new value has the type of the value it replaces (states keep
    their accumulation type); `lr` and `step` are f32 scalars."""
    shape = op.weight.type.get_shape()
    for name in ("grad", *states):
        v = getattr(op, name)
        if v is not None and v.type.get_shape() != shape:
            raise VerifyException(f"{op.name}: {name} {v.type} does not have the shape of the "
                                  f"weight {op.weight.type}")
    for name in ("weight", *states):
        v, new = getattr(op, name), getattr(op, f"new_{name}")
        if v is not None and new is not None and new.type != v.type:
            raise VerifyException(f"{op.name}: new_{name} is {new.type}, not the type of {name} {v.type}")
    for name in ("lr", "step"):
        v = getattr(op, name, None)
        if v is not None and v.type != SCALAR_F32:
            raise VerifyException(f"{op.name}: {name} must be {SCALAR_F32}, got {v.type}")


SGD_HYPERS = ("momentum", "dampening", "weight_decay", "nesterov", "velocity_scaling")
# PopART's SGD state forms (its SGDAccumulatorAndMomentum): ipu.sgd's popart_state
POPART_SGD_STATES = ("combined", "separate")


class SGDOp(IRDLOperation):
    """One SGD update of `weight` from its accumulated gradient, as torch.optim.SGD.

    `grad_scale` turns the accumulated sum into the gradient the update uses
    (1/(G*R) for Mean reduction). With momentum, `velocity` is the state: the
    velocity of torch.optim.SGD (separate variant) or, with `combined = true`,
    PopTorch's combined tensor holding velocity x `velocity_scaling`.

    `popart_state` selects PopART's SGD equations instead (its sessions'
    optimizer: v = mm v + (1 - dm)(g + wd w) from v = 0, no first-step
    exception) and its state: "separate" the velocity x `velocity_scaling`
    (SGDAccumulatorAndMomentum::Separate's Accl1___), "combined" that velocity
    with the next step's momentum and weight-decay terms folded in, mm v +
    (1 - dm) wd vs w, starting at (1 - dm) wd vs w (Combined's Accl___)."""

    name = "ipu.sgd"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    lr = operand_def(TensorType)
    velocity = opt_operand_def(TensorType)
    step = opt_operand_def(TensorType)
    momentum_var = _hyper_operand()
    dampening_var = _hyper_operand()
    weight_decay_var = _hyper_operand()
    nesterov_var = _hyper_operand()
    velocity_scaling_var = _hyper_operand()
    new_weight = result_def(TensorType)
    new_velocity = opt_result_def(TensorType)
    momentum = opt_prop_def(FloatAttr)
    dampening = opt_prop_def(FloatAttr)
    weight_decay = opt_prop_def(FloatAttr)
    nesterov = opt_prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    velocity_scaling = opt_prop_def(FloatAttr)
    combined = opt_prop_def(BoolAttr)
    popart_state = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "$weight `,` $grad `lr` $lr (`velocity` $velocity^)? (`step` $step^)? "
        + _hyper_format(SGD_HYPERS) + " attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($lr) (`velocity` type($velocity)^)? "
        "(`step` type($step)^)? `->` type(results)"
    )

    def verify_(self) -> None:
        _check_hypers(self, SGD_HYPERS[:4])
        _check_update(self, ("velocity",))
        has_v = self.velocity is not None
        if has_v != (self.new_velocity is not None):
            raise VerifyException("sgd: velocity operand and result must come together")
        momentum = _constant(self, "momentum")
        if (momentum is None or momentum != 0.0) and not has_v:
            raise VerifyException("sgd: momentum != 0 needs a velocity operand (a variable momentum too)")
        if has_v and self.step is None:
            raise VerifyException("sgd: velocity needs the step count operand")
        if self.velocity_scaling is not None and self.velocity_scaling_var is not None:
            raise VerifyException("sgd: velocity_scaling is both a property and an operand")
        combined = self.combined is not None and self.combined.value.data
        popart = None if self.popart_state is None else self.popart_state.data
        if popart is not None and popart not in POPART_SGD_STATES:
            raise VerifyException(f"sgd: popart_state must be one of {', '.join(POPART_SGD_STATES)}, "
                                  f"got {popart!r}")
        if popart is not None and combined:
            raise VerifyException("sgd: popart_state and PopTorch's combined variant exclude each other")
        if not combined and popart is None and (self.velocity_scaling is not None
                                                or self.velocity_scaling_var is not None):
            raise VerifyException("sgd: velocity_scaling applies to the combined variant and PopART's "
                                  "states only")


ADAM_HYPERS = ("beta1", "beta2", "eps", "weight_decay")


class AdamOp(IRDLOperation):
    """One Adam / AdamW update (`decoupled` selects AdamW's weight decay;
    `infinity_norm` PopART's AdaMax: `exp_avg_sq` holds max(beta2 u, |g|) and
    the update divides by it plus eps)."""

    name = "ipu.adam"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    exp_avg = operand_def(TensorType)
    exp_avg_sq = operand_def(TensorType)
    step = operand_def(TensorType)
    lr = operand_def(TensorType)
    beta1_var = _hyper_operand()
    beta2_var = _hyper_operand()
    eps_var = _hyper_operand()
    weight_decay_var = _hyper_operand()
    new_weight = result_def(TensorType)
    new_exp_avg = result_def(TensorType)
    new_exp_avg_sq = result_def(TensorType)
    beta1 = opt_prop_def(FloatAttr)
    beta2 = opt_prop_def(FloatAttr)
    eps = opt_prop_def(FloatAttr)
    weight_decay = opt_prop_def(FloatAttr)
    decoupled = prop_def(BoolAttr)
    bias_correction = prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    infinity_norm = opt_prop_def(BoolAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "$weight `,` $grad `,` $exp_avg `,` $exp_avg_sq `step` $step `lr` $lr "
        + _hyper_format(ADAM_HYPERS) + " attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `,` "
        "type($step) `,` type($lr) `->` type(results)"
    )

    def verify_(self) -> None:
        _check_hypers(self, ADAM_HYPERS)
        _check_update(self, ("exp_avg", "exp_avg_sq"))


RMSPROP_HYPERS = ("alpha", "eps", "weight_decay", "momentum", "centered")


class RMSpropOp(IRDLOperation):
    """One RMSprop update: torch.optim.RMSprop, or with `tf_variant = true`
    TensorFlow's (square_avg starts at ones, eps inside the square root, lr
    accumulated in the momentum buffer). `grad_avg` is the state of the
    centered variant, `momentum_buffer` the state when momentum is used."""

    name = "ipu.rmsprop"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    square_avg = operand_def(TensorType)
    grad_avg = opt_operand_def(TensorType)
    momentum_buffer = opt_operand_def(TensorType)
    lr = operand_def(EqAttrConstraint(SCALAR_F32))
    alpha_var = _hyper_operand()
    eps_var = _hyper_operand()
    weight_decay_var = _hyper_operand()
    momentum_var = _hyper_operand()
    centered_var = _hyper_operand()
    new_weight = result_def(TensorType)
    new_square_avg = result_def(TensorType)
    new_grad_avg = opt_result_def(TensorType)
    new_momentum_buffer = opt_result_def(TensorType)
    alpha = opt_prop_def(FloatAttr)
    eps = opt_prop_def(FloatAttr)
    weight_decay = opt_prop_def(FloatAttr)
    momentum = opt_prop_def(FloatAttr)
    centered = opt_prop_def(BoolAttr)
    tf_variant = prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True),
                    AttrSizedResultSegments(as_property=True))
    assembly_format = (
        "$weight `,` $grad `,` $square_avg (`grad_avg` $grad_avg^)? "
        "(`momentum_buffer` $momentum_buffer^)? `lr` $lr "
        + _hyper_format(RMSPROP_HYPERS) + " attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($square_avg) (`grad_avg` type($grad_avg)^)? "
        "(`momentum_buffer` type($momentum_buffer)^)? `->` type($new_weight) `,` type($new_square_avg) "
        "(`grad_avg` type($new_grad_avg)^)? (`momentum_buffer` type($new_momentum_buffer)^)?"
    )

    def verify_(self) -> None:
        _check_hypers(self, RMSPROP_HYPERS)
        _check_update(self, ("square_avg", "grad_avg", "momentum_buffer"))
        for state, new in (("grad_avg", "new_grad_avg"), ("momentum_buffer", "new_momentum_buffer")):
            if (getattr(self, state) is None) != (getattr(self, new) is None):
                raise VerifyException(f"rmsprop: {state} operand and result must come together")
        centered, momentum = _constant(self, "centered"), _constant(self, "momentum")
        if (centered is None or centered) and self.grad_avg is None:
            raise VerifyException("rmsprop: centered (or variable centered) needs a grad_avg operand")
        if (momentum is None or momentum != 0.0) and self.momentum_buffer is None:
            raise VerifyException("rmsprop: momentum != 0 (or variable) needs a momentum_buffer operand")


LAMB_HYPERS = ("beta1", "beta2", "eps", "weight_decay", "max_weight_norm")


class LambOp(IRDLOperation):
    """One LAMB update (You et al. 2019, PopTorch's formulation): the Adam
    direction plus decoupled weight decay, scaled by the trust ratio
    min(|w|, max_weight_norm) / |update| (1 when either norm is zero)."""

    name = "ipu.lamb"
    weight = operand_def(TensorType)
    grad = operand_def(TensorType)
    exp_avg = operand_def(TensorType)
    exp_avg_sq = operand_def(TensorType)
    step = operand_def(EqAttrConstraint(SCALAR_F32))
    lr = operand_def(EqAttrConstraint(SCALAR_F32))
    beta1_var = _hyper_operand()
    beta2_var = _hyper_operand()
    eps_var = _hyper_operand()
    weight_decay_var = _hyper_operand()
    max_weight_norm_var = _hyper_operand()
    new_weight = result_def(TensorType)
    new_exp_avg = result_def(TensorType)
    new_exp_avg_sq = result_def(TensorType)
    beta1 = opt_prop_def(FloatAttr)
    beta2 = opt_prop_def(FloatAttr)
    eps = opt_prop_def(FloatAttr)
    weight_decay = opt_prop_def(FloatAttr)
    max_weight_norm = opt_prop_def(FloatAttr)
    bias_correction = prop_def(BoolAttr)
    grad_scale = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "$weight `,` $grad `,` $exp_avg `,` $exp_avg_sq `step` $step `lr` $lr "
        + _hyper_format(LAMB_HYPERS) + " attr-dict `:` "
        "type($weight) `,` type($grad) `,` type($exp_avg) `,` type($exp_avg_sq) `->` type(results)"
    )

    def verify_(self) -> None:
        _check_hypers(self, LAMB_HYPERS)
        _check_update(self, ("exp_avg", "exp_avg_sq"))


class ClipGradNormOp(IRDLOperation):
    """`torch.nn.utils.clip_grad_norm_(parameters, max_norm)` over every trained
    parameter at once: the global L2 norm of the gradients (each accumulated
    gradient times `grad_scale`), then every gradient times
    min(1, max_norm / (norm + 1e-6)). Like torch's, it names the parameters
    whose gradients it clips; the results replace the gradients in the updates."""

    name = "ipu.clip_grad_norm"
    weights = var_operand_def(TensorType)
    grads = var_operand_def(TensorType)
    max_norm_var = _hyper_operand()
    clipped = var_result_def(TensorType)
    max_norm = opt_prop_def(FloatAttr)
    grad_scale = prop_def(FloatAttr)
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "`(` $weights `)` `grads` `(` $grads `)` (`max_norm` $max_norm_var^)? attr-dict `:` "
        "`(` type($weights) `)` `,` `(` type($grads) `)` `->` `(` type($clipped) `)`"
    )

    def verify_(self) -> None:
        _check_hypers(self, ("max_norm",))
        if not len(self.weights) == len(self.grads) == len(self.clipped) > 0:
            raise VerifyException("clip_grad_norm: one gradient and one result per weight (at least one)")
        for w, g, c in zip(self.weights, self.grads, self.clipped):
            if g.type.get_shape() != w.type.get_shape():
                raise VerifyException(f"clip_grad_norm: gradient {g.type} does not have the shape of "
                                      f"its weight {w.type}")
            if g.type != c.type:
                raise VerifyException(f"clip_grad_norm: result type {c.type} differs from gradient type {g.type}")


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

    def verify_(self) -> None:
        _check_ipu_ids(self, "src", "dst")


def _check_ipu_ids(op: IRDLOperation, *names: str) -> None:
    """Each named integer property is an IPU, stage or phase id: >= 0."""
    for n in names:
        v = op.properties[n].value.data
        if v < 0:
            raise VerifyException(f"{op.name}: {n} must be >= 0, got {v}")


STAGE_DIRECTIONS = ("fwd", "bwd", "fwd+bwd")


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

    def verify_(self) -> None:
        _check_ipu_ids(self, "stage", "ipu", "phase")
        if self.direction.data not in STAGE_DIRECTIONS:
            raise VerifyException(f"ipu.stage: direction must be one of {STAGE_DIRECTIONS}, "
                                  f"got {self.direction.data!r}")
        term = self.body.block.last_op
        got = [v.type for v in term.operands] if term is not None and term.name == "ipu.yield" else None
        want = [r.type for r in self.outs]
        if got != want:
            raise VerifyException("ipu.stage: the body must end with an ipu.yield of the stage's result "
                                  f"types (" + ", ".join(map(str, want)) + ")" +
                                  ("" if got is None else ", it yields (" + ", ".join(map(str, got)) + ")"))


class ForOp(IRDLOperation):
    """`poptorch.for_loop(count, body, inputs)`: the body region runs `count`
    times. Its block takes the loop-carried values (initialised by `inits`)
    followed by the loop-invariant values it reads (`invariants`: weights and
    other values from outside, passed explicitly so the region refers to
    nothing above it); its `ipu.yield` gives the next carried values, and
    the op's results are the carried values after the last iteration."""

    name = "ipu.for"
    inits = var_operand_def(TensorType)
    invariants = var_operand_def(TensorType)
    count = prop_def(IntegerAttr)
    outs = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = ("`(` $inits `)` `invariants` `(` $invariants `)` attr-dict `:` "
                       "`(` type($inits) `)` `,` `(` type($invariants) `)` `->` `(` type($outs) `)` $body")

    def verify_(self) -> None:
        if self.count.value.data < 0:
            raise VerifyException(f"ipu.for: count must be >= 0, got {self.count.value.data}")
        carried = [v.type for v in self.inits]
        if [r.type for r in self.outs] != carried:
            raise VerifyException("ipu.for: results must have the types of the carried inputs "
                                  f"({', '.join(map(str, carried))})")
        block = self.body.block
        want = carried + [v.type for v in self.invariants]
        if [a.type for a in block.args] != want:
            raise VerifyException("ipu.for: the body's arguments must be the carried inputs then the "
                                  f"invariants ({len(want)} values: {', '.join(map(str, want))})")
        term = block.last_op
        if term is None or term.name != "ipu.yield":
            raise VerifyException("ipu.for: the body must end with ipu.yield")
        got = [v.type for v in term.operands]
        if got != carried:
            raise VerifyException("ipu.for: the body yields (" + ", ".join(map(str, got)) + ") but the "
                                  "loop carries (" + ", ".join(map(str, carried)) + ")")


class YieldOp(IRDLOperation):
    """The values a stage hands on to later stages, or a loop body's next
    carried values."""

    name = "ipu.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(StageOp, ForOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"


class DynamicSliceOp(IRDLOperation):
    """`poptorch.dynamic_slice(x, dim, start, size, step)`: `x[start:start +
    size:step]` along `dim`, `start` a runtime index (a one-element integer
    tensor): ceil(size / step) elements."""

    name = "ipu.dynamic_slice"
    input = operand_def(TensorType)
    start = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    size = prop_def(IntegerAttr)
    step = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $start attr-dict `:` type($input) `,` type($start) `->` type($result)"

    def verify_(self) -> None:
        shape = list(self.input.type.get_shape())
        dim, size, step = self.dim.value.data, self.size.value.data, self.step.value.data
        if not 0 <= dim < len(shape):
            raise VerifyException(f"ipu.dynamic_slice: dim {dim} is out of range for rank {len(shape)}")
        if size < 1 or step < 1:
            raise VerifyException(f"ipu.dynamic_slice: size and step must be >= 1, got {size}, {step}")
        if size > shape[dim]:
            raise VerifyException(f"ipu.dynamic_slice: a slice of {size} elements does not fit in "
                                  f"dimension {dim} of size {shape[dim]}")
        want = shape[:dim] + [-(-size // step)] + shape[dim + 1:]
        if list(self.result.type.get_shape()) != want:
            raise VerifyException(f"ipu.dynamic_slice: result shape must be {want}")
        _check_index(self.start.type, "ipu.dynamic_slice")


class DynamicUpdateOp(IRDLOperation):
    """`poptorch.dynamic_update(x, src, dim, start, size)`: `x` with `src`
    written at the runtime index `start` along `dim`."""

    name = "ipu.dynamic_update"
    input = operand_def(TensorType)
    src = operand_def(TensorType)
    start = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr)
    size = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$input `,` $src `,` $start attr-dict `:` type($input) `,` type($src) `,` "
                       "type($start) `->` type($result)")

    def verify_(self) -> None:
        shape = list(self.input.type.get_shape())
        dim, size = self.dim.value.data, self.size.value.data
        if not 0 <= dim < len(shape):
            raise VerifyException(f"ipu.dynamic_update: dim {dim} is out of range for rank {len(shape)}")
        want = shape[:dim] + [size] + shape[dim + 1:]
        if list(self.src.type.get_shape()) != want or size > shape[dim]:
            raise VerifyException(f"ipu.dynamic_update: src must have shape {want} (size {size} along "
                                  f"dimension {dim} of size {shape[dim]})")
        if self.result.type != self.input.type:
            raise VerifyException("ipu.dynamic_update: the result has the input's type")
        if self.src.type.element_type != self.input.type.element_type:
            raise VerifyException(f"ipu.dynamic_update: src {self.src.type} must have the element type "
                                  f"of the input {self.input.type}")
        _check_index(self.start.type, "ipu.dynamic_update")


def _check_index(t, op: str) -> None:
    from xdsl.dialects.builtin import IntegerType

    if not isinstance(t.element_type, IntegerType) or len(list(t.get_shape())) > 1 or \
            any(d != 1 for d in t.get_shape()):
        raise VerifyException(f"{op}: start must be a 0-d or one-element integer tensor, got {t}")


class RecomputationCheckpointOp(_IdentityOp):
    """`poptorch.recomputationCheckpoint(x)`: an identity whose result the
    backward keeps (stashes); `ipu-recompute` recomputes the forward ops
    between checkpoints in the backward instead of keeping their results."""

    name = "ipu.recomputation_checkpoint"


class CtcBeamSearchDecoderOp(IRDLOperation):
    """`poptorch.ctc_beam_search_decoder(log_probs [T, B, C], lengths [B])`:
    per batch item the `top_paths` most likely label sequences (CTC prefix
    beam search, `blank` dropped and repeats merged), as their log
    probabilities [B, top_paths], lengths [B, top_paths] and paths
    [B, top_paths, T] (padded with zeros)."""

    name = "ipu.ctc_beam_search_decoder"
    log_probs = operand_def(TensorType)
    lengths = operand_def(TensorType)
    path_probs = result_def(TensorType)
    path_lengths = result_def(TensorType)
    paths = result_def(TensorType)
    blank = prop_def(IntegerAttr)
    beam_width = prop_def(IntegerAttr)
    top_paths = prop_def(IntegerAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$log_probs `,` $lengths attr-dict `:` type($log_probs) `,` type($lengths) "
                       "`->` type($path_probs) `,` type($path_lengths) `,` type($paths)")

    def verify_(self) -> None:
        shape = list(self.log_probs.type.get_shape())
        if len(shape) != 3:
            raise VerifyException(f"ipu.ctc_beam_search_decoder: log_probs must be [T, B, C], got {shape}")
        T, B, C = shape
        k, w, blank = self.top_paths.value.data, self.beam_width.value.data, self.blank.value.data
        if not 1 <= k <= w:
            raise VerifyException(f"ipu.ctc_beam_search_decoder: need 1 <= top_paths ({k}) <= "
                                  f"beam_width ({w})")
        if not 0 <= blank < C:
            raise VerifyException(f"ipu.ctc_beam_search_decoder: blank {blank} is not a class of {C}")
        if list(self.lengths.type.get_shape()) != [B]:
            raise VerifyException(f"ipu.ctc_beam_search_decoder: lengths must be [B] = [{B}], "
                                  f"got {list(self.lengths.type.get_shape())}")
        for r, want in ((self.path_probs, [B, k]), (self.path_lengths, [B, k]), (self.paths, [B, k, T])):
            if list(r.type.get_shape()) != want:
                raise VerifyException(f"ipu.ctc_beam_search_decoder: result shapes must be [B, top_paths], "
                                      f"[B, top_paths], [B, top_paths, T] = {[B, k]}, {[B, k]}, {[B, k, T]}")


def _ctc_operand_shapes(op, what: str) -> int:
    """Check CTC operands (log_probs [T, N, C], targets [N, S] or [sum S], lengths [N]); N."""
    lp = list(op.log_probs.type.get_shape())
    if len(lp) != 3:
        raise VerifyException(f"{what}: log_probs must be [T, N, C], got {lp}")
    n = lp[1]
    for v, name in ((op.input_lengths, "input_lengths"), (op.target_lengths, "target_lengths")):
        if list(v.type.get_shape()) != [n]:
            raise VerifyException(f"{what}: {name} must be [{n}], got {list(v.type.get_shape())}")
    tg = list(op.targets.type.get_shape())
    if len(tg) not in (1, 2) or (len(tg) == 2 and tg[0] != n):
        raise VerifyException(f"{what}: targets must be [{n}, S] or 1-D (concatenated), got {tg}")
    if not 0 <= op.blank.value.data < lp[2]:
        raise VerifyException(f"{what}: blank {op.blank.value.data} is not a class of {lp[2]}")
    return n


class CtcLossOp(IRDLOperation):
    """CTC loss per batch item (`torch.nn.functional.ctc_loss` with reduction
    "none", PopART's ctcloss): -log p(target | log_probs), [N]. torch's own op
    also returns the forward variables, whose size depends on the targets'
    values; this one returns only the loss, so its shape is static."""

    name = "ipu.ctc_loss"
    log_probs = operand_def(TensorType)
    targets = operand_def(TensorType)
    input_lengths = operand_def(TensorType)
    target_lengths = operand_def(TensorType)
    loss = result_def(TensorType)
    blank = prop_def(IntegerAttr)
    zero_infinity = prop_def(BoolAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$log_probs `,` $targets `,` $input_lengths `,` $target_lengths attr-dict `:` "
                       "type($log_probs) `,` type($targets) `,` type($input_lengths) `,` "
                       "type($target_lengths) `->` type($loss)")

    def verify_(self) -> None:
        n = _ctc_operand_shapes(self, self.name)
        if list(self.loss.type.get_shape()) != [n]:
            raise VerifyException(f"ipu.ctc_loss: the loss must be [{n}], got {list(self.loss.type.get_shape())}")


class CtcLossGradOp(IRDLOperation):
    """The gradient of sum(grad * ctc_loss) with respect to log_probs (torch's
    formula: through the log-softmax that made them)."""

    name = "ipu.ctc_loss_grad"
    grad = operand_def(TensorType)
    log_probs = operand_def(TensorType)
    targets = operand_def(TensorType)
    input_lengths = operand_def(TensorType)
    target_lengths = operand_def(TensorType)
    grad_log_probs = result_def(TensorType)
    blank = prop_def(IntegerAttr)
    zero_infinity = prop_def(BoolAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$grad `,` $log_probs `,` $targets `,` $input_lengths `,` $target_lengths attr-dict "
                       "`:` type($grad) `,` type($log_probs) `,` type($targets) `,` type($input_lengths) "
                       "`,` type($target_lengths) `->` type($grad_log_probs)")

    def verify_(self) -> None:
        n = _ctc_operand_shapes(self, self.name)
        if list(self.grad.type.get_shape()) != [n]:
            raise VerifyException(f"ipu.ctc_loss_grad: grad must be [{n}]")
        if self.grad_log_probs.type != self.log_probs.type:
            raise VerifyException("ipu.ctc_loss_grad: the result has the type of log_probs")


class CustomOp(IRDLOperation):
    """`poptorch.custom_op(inputs, name, domain, domain_version, ...)`: an op
    registered from Python (`tilefx.register_custom_op`) with a numpy
    implementation, run by name; `attributes` are passed to it."""

    name = "ipu.custom_op"
    inputs = var_operand_def(TensorType)
    outs = var_result_def(TensorType)
    op_name = prop_def(StringAttr)
    domain = prop_def(StringAttr)
    domain_version = prop_def(IntegerAttr)
    op_attributes = opt_prop_def(base(DictionaryAttr))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "`(` $inputs `)` attr-dict `:` `(` type($inputs) `)` `->` `(` type($outs) `)`"


# The op classes above are defined plain and made IRDL ops (`irdl_op_definition`,
# ~1.5 ms each) when first used, as the aten dialect's are: a compile builds
# the few it makes (a stage, its yield, an optimizer update), not all 22.
# `from tilefx.dialects.ipu import StageOp` and `ipu.StageOp` both give the
# IRDL class, which is the plain class made into one (irdl_op_definition
# completes the class it is given, so `HasParent(StageOp, ForOp)` on the
# yield, written with the plain classes, names the IRDL ones).
_PLAIN = {c.__name__: c for c in (
    IdentityLossOp, NopOp, PrintTensorOp, SetAvailableMemoryOp, SerializedMatmulOp,
    AccumulateOp, SGDOp, AdamOp, RMSpropOp, LambOp, ClipGradNormOp, CopyOp, YieldOp, StageOp,
    ForOp, DynamicSliceOp, DynamicUpdateOp, RecomputationCheckpointOp, CtcBeamSearchDecoderOp,
    CtcLossOp, CtcLossGradOp, CustomOp)}
for _name in _PLAIN:
    del globals()[_name]
_DEFINING = threading.RLock()  # the dialect defines every class under it


def _op_class(name: str) -> type[IRDLOperation]:
    with _DEFINING:
        cls = globals().get(name)
        if cls is None:
            cls = globals()[name] = irdl_op_definition(_PLAIN[name])
        return cls


_CLASS_OF_OP = {cls.name: class_name for class_name, cls in _PLAIN.items()}  # `ipu.nop` -> "NopOp"


def op_or_attr_named(name: str) -> type[IRDLOperation] | type[PlacementAttr] | None:
    """The op or attribute class called `name` (`ipu.nop`, `ipu.place`),
    defining only it; None for a name the dialect does not have
    (dialects/context.py)."""
    if name == PlacementAttr.name:
        return PlacementAttr
    class_name = _CLASS_OF_OP.get(name)
    return None if class_name is None else _op_class(class_name)


def __getattr__(name: str):
    if name in _PLAIN:
        return _op_class(name)
    if name == "IPU_OPS":  # every op class, in declaration order
        return [_op_class(n) for n in _PLAIN]
    if name == "IPU":  # the dialect, for parsing and for xDSL's tools
        with _DEFINING:
            if "_DIALECT" not in globals():
                globals()["_DIALECT"] = Dialect("ipu", [_op_class(n) for n in _PLAIN], [PlacementAttr])
            return globals()["_DIALECT"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
