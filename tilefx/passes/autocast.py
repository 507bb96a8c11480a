"""`ipu-autocast`: PopTorch's automatic mixed precision on the graph IR.

Only ops marked `ipu.autocast = true` (from `poptorch.autocast` regions,
backward included) are typed by the policy, the pass's options `fp16`,
`fp32`, `promote` and `demote` (comma-separated op names; PopTorch's default
policy unless given; the driver builds them from
`Options.Precision.autocastPolicy` with `AutocastPass.of_policy`):

- fp16 ops: float operands are cast to float16 (`aten._to_copy`) and the op
  runs in and returns float16 (fp32 partials, rounded once), as an op on
  `torch.autocast`'s fp16 list returns float16;
- fp32 ops: the same towards float32;
- promote / demote ops: when their float operands mix float16 and float32,
  all are cast to float32 / float16.

The new types then flow downstream by PyTorch's type promotion: an op whose
float operands changed type computes in the promoted type of its operands
(dimensioned tensors decide before zero-dimensional ones; float16 with
float32 gives float32, or float16 with `half_float_casting="downcast"`,
PopTorch's `HalfFloatCastingBehavior.FloatDowncastToHalf`), its mixed
operands cast to that type; a result typed by an explicit `dtype` keeps it.
User outputs of `@main` take the new types (the function's type changes);
every other result (gradients, buffers) and every operand of a non-aten op
is cast back to the type it had, so master weights and accumulators stay
float32.

A float16 value cast to float32 and back is folded to the value itself
(fp16 chains stay in fp16 without round trips).

Each cast takes the placement (`ipu.place`) of the op that reads it; a cast
before the return, which has none, that of the op whose value it casts, so
`ipu-auto-stage` and `ipu-assign-stages` put it in that op's stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, bf16, f16, f32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tilefx.dialects.aten import ATEN_OPS, create_aten_op, np_dtype, op_name
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.irutil import attrs_of, find_func
from tilefx.dialects.names import AUTOCAST_KEY, OUTPUT_KEY, UPCAST_INPUT_KEY
from tilefx.passes import check_option

_DEFAULT = {
    "fp16": "aten.addmm,aten.mm,aten.bmm,aten.convolution,aten.convolution_backward",
    "fp32": "",
    "promote": "aten.cat,aten.index_put",
    "demote": "",
}
_FLOATS = (f16, f32)
# ops that keep the types they were traced with when an operand turns float16:
# the negative log-likelihood, which torch.autocast runs in float32 (it is on
# autocast's float32 list), so a float16 model's loss stays float32
_FLOAT32_ALWAYS = {"aten.nll_loss_forward", "aten.nll_loss_backward"}
_CASTINGS = ("upcast", "downcast")


def _is_float(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and v.type.element_type in _FLOATS


@dataclass(frozen=True)
class AutocastPass(ModulePass):
    name = "ipu-autocast"

    fp16: str = _DEFAULT["fp16"]
    fp32: str = _DEFAULT["fp32"]
    promote: str = _DEFAULT["promote"]
    demote: str = _DEFAULT["demote"]
    half_float_casting: str = "upcast"

    def __post_init__(self):
        known = _known_ops()
        for k in _DEFAULT:
            for n in getattr(self, k).split(","):
                if n and n not in known and n.startswith("ipu."):  # the ipu op classes, when named
                    known = _known_ops(with_ipu=True)
                check_option(self.name, not n or n in known,
                             f"{k}: {n!r} is not an aten or ipu op name (e.g. aten.mm)")
        check_option(self.name, self.half_float_casting in _CASTINGS,
                     f"half_float_casting: {self.half_float_casting!r} is not one of {', '.join(_CASTINGS)}")

    @classmethod
    def of_policy(cls, policy: Mapping[str, Iterable[str]] | None, downcast: bool = False) -> AutocastPass:
        """The pass of a surface's precision policy (`CompileConfig.autocast_policy`:
        some of fp16/fp32/promote/demote to op names; None: PopTorch's default
        policy, a class not named: no op). A policy names torch functions as aten
        ops, some of which tilefx has no op for (`poptorch.autocasting.Policy`'s
        `bilinear`, `cross`, ...): no IR op can have those names, so they are left
        out rather than refused as a typo in a pass pipeline is."""
        casting = "downcast" if downcast else "upcast"
        if policy is None:
            return cls(half_float_casting=casting)
        known = _known_ops(with_ipu=True)
        return cls(**{k: ",".join(n for n in policy.get(k, ()) if n in known) for k in _DEFAULT},
                   half_float_casting=casting)

    def _policy(self) -> dict[str, set[str]]:
        return {k: {n for n in getattr(self, k).split(",") if n} for k in _DEFAULT}

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _Casting(find_func(op, "main"), self._policy(), self.half_float_casting == "downcast").run()


def _known_ops(with_ipu: bool = False) -> set[str]:
    """The op names a policy can name: the ATen schema's, and the ipu dialect's."""
    known = {op_name(s) for s in ATEN_OPS}
    if with_ipu:
        from tilefx.dialects.ipu import IPU

        known |= {c.name for c in IPU.operations}
    return known


class _Casting:
    """One run of the pass over @main."""

    def __init__(self, main: func.FuncOp, policy: dict[str, set[str]], downcast: bool):
        self._main, self._policy, self._downcast = main, policy, downcast
        self._ops = list(main.walk())
        # every value's type before the pass: what a changed operand is compared to
        self._orig = {v: v.type for o in self._ops for v in o.results}
        self._orig.update({a: a.type for o in self._ops for r in o.regions for b in r.blocks for a in b.args})
        self._orig.update({a: a.type for a in main.body.block.args})

    def run(self) -> None:
        main, policy = self._main, self._policy
        for o in self._ops:
            flag = o.attributes.get(AUTOCAST_KEY)
            marked = isinstance(flag, IntegerAttr) and bool(flag.value.data)
            if self._downcast and UPCAST_INPUT_KEY in o.attributes:
                self._undo_upcast(o)
            elif marked and o.name in policy["fp32"]:
                self._run_in(o, f32)
            elif marked and o.name in policy["fp16"]:
                self._run_in(o, f16)
            elif marked and o.name in policy["promote"] and self._mixed(o):
                self._cast_operands(o, f32)
                self._follow(o)
            elif marked and o.name in policy["demote"] and self._mixed(o):
                self._cast_operands(o, f16)
                self._follow(o)
            elif isinstance(o, func.ReturnOp) and o.parent_op() is main:
                self._returns(main, o)
            else:
                self._follow(o)

    @staticmethod
    def _mixed(o: Operation) -> bool:
        return len({v.type.element_type for v in o.operands if _is_float(v)}) > 1

    def _cast_operands(self, o: Operation, to) -> None:
        for i, v in enumerate(o.operands):
            if _is_float(v) and v.type.element_type != to:
                o.operands[i] = _cast(v, to, o)

    def _changed(self, o: Operation) -> bool:
        return any(v in self._orig and v.type != self._orig[v] for v in o.operands)

    def _run_in(self, o: Operation, to) -> None:
        """The op computes in and returns `to`."""
        if not any(_is_float(v) for v in o.operands):
            return
        self._cast_operands(o, to)
        for r in list(o.results):
            if _is_float(r) and r.type.element_type != to:
                self._retype(r, to)

    def _promoted(self, types) -> Attribute | None:
        """PyTorch's result type of values of these types (dimensioned tensors first)."""
        floats = [t for t in types if isinstance(t, TensorType) and t.element_type in _FLOATS]
        ranked = [t.element_type for t in floats if t.get_shape()] or [t.element_type for t in floats]
        if not ranked:
            return None
        if len(set(ranked)) == 1:
            return ranked[0]
        return f16 if self._downcast else f32

    def _follow(self, o: Operation) -> None:
        """Re-type an op whose float operands changed by PyTorch's promotion."""
        if not self._changed(o):
            return
        if not o.name.startswith("aten.") or o.regions or o.name in _FLOAT32_ALWAYS or any(
                isinstance(v.type, TensorType) and v.type.element_type == bf16 for v in o.operands):
            self._restore(o)  # a boundary: its operands get back the types it was built for
            return
        old = self._promoted([self._orig.get(v, v.type) for v in o.operands])
        new = self._promoted([v.type for v in o.operands])
        if "dtype" in o.properties or old is None or new is None or new == old:
            if new is not None and self._mixed(o) and "dtype" not in o.properties:
                self._cast_operands(o, new)
            return
        self._cast_operands(o, new)
        if _type_property(o, "input_dtype") == old:  # a softmax backward: its forward's input type
            o.properties["input_dtype"] = new
        for r in list(o.results):
            if _is_float(r) and r.type.element_type == old:
                self._retype(r, new)

    def _undo_upcast(self, o: Operation) -> None:
        """FloatDowncastToHalf: the frontend's cast of a float16 input to float32
        becomes a copy in float16, so float32 weights meet float16 and are cast down."""
        if _is_float(o.operands[0]) and o.operands[0].type.element_type == f16 and _is_float(o.results[0]):
            o.properties["dtype"] = f16
            self._retype(o.results[0], f16)

    def _retype(self, r: SSAValue, to) -> None:
        new = Rewriter.replace_value_with_new_type(r, TensorType(to, r.type.get_shape()))
        self._orig[new] = self._orig.get(r, r.type)

    def _restore(self, o: Operation) -> None:
        for i, v in enumerate(o.operands):
            want = self._orig.get(v)
            if want is not None and v.type != want and isinstance(want, TensorType):
                o.operands[i] = _cast(v, want.element_type, o)

    def _returns(self, main: func.FuncOp, ret: Operation) -> None:
        """User outputs keep their new types; every other result gets its old one back."""
        res_attrs = attrs_of(main, "res")
        for i, v in enumerate(ret.operands):
            want = main.function_type.outputs.data[i]
            if v.type != want and OUTPUT_KEY not in res_attrs[i] and isinstance(want, TensorType):
                ret.operands[i] = _cast(v, want.element_type, ret)
        main.function_type = func.FunctionType.from_lists(
            list(main.function_type.inputs.data), [v.type for v in ret.operands])


def _type_property(o: Operation, name: str) -> Attribute | None:
    attr = o.properties.get(name)
    return attr if attr in _FLOATS else None


def _make_cast(v: SSAValue, to, near: Operation) -> Operation:
    """A cast of `v` for its user `near`, placed with the user; a cast for an
    op without a placement (@main's return: a gradient or buffer given back
    its type) lives where `v` is made, so the stage passes see the backward
    op it belongs to (unplaced, it would count as a forward op of the first
    stage reading a backward value of a later one)."""
    src = v.owner if isinstance(v.owner, Operation) else None
    where = near if PLACE_KEY in near.attributes else src
    attrs = {PLACE_KEY: where.attributes[PLACE_KEY]} if where is not None and PLACE_KEY in where.attributes else {}
    return create_aten_op("_to_copy.default", {"self": v}, {"dtype": np_dtype(to)},
                          [TensorType(to, v.type.get_shape())], attrs)


def _cast(v: SSAValue, to, user: Operation) -> SSAValue:
    """`v` as `to`: a float16 value cast to float32 and back is the value itself
    (the other way round would skip a rounding, so it stays)."""
    src = v.owner
    if isinstance(src, ATEN_OPS["_to_copy.default"]) and src.operands[0].type.element_type == to == f16:
        return src.operands[0]
    c = _make_cast(v, to, user)
    user.parent_block().insert_op_before(c, user)
    return c.results[0]
