"""`ipu-autocast`: PopTorch's automatic mixed precision on the graph IR.

Only ops marked `ipu.autocast = true` (from `poptorch.autocast` regions,
backward included) are touched. The policy (module attribute
`ipu.autocast_policy = {fp16 = [...], fp32 = [...], promote = [...], demote = [...]}`
set by the API from `Options.Precision.autocastPolicy`, else the pass
options, else PopTorch's default policy) says:

- fp16 ops: float32 operands are cast to float16 (`aten._to_copy`), the op
  runs in float16 (fp32 partials, rounded once) and its result is cast back
  to the type the rest of the graph expects;
- fp32 ops: the same towards float32;
- promote / demote ops: when their float operands mix float16 and float32,
  all are cast to float32 / float16.

A cast of a cast back to the original type is folded away, so chains of
fp16 ops stay in fp16.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, f16, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from tilefx.dialects.aten import ATEN_OPS, create_aten_op, np_dtype
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.irutil import find_func, to_py
from tilefx.dialects.names import AUTOCAST_KEY, AUTOCAST_POLICY_KEY
from tilefx.passes import check_option

_DEFAULT = {
    "fp16": "aten.addmm,aten.mm,aten.bmm,aten.convolution,aten.convolution_backward",
    "fp32": "",
    "promote": "aten.cat,aten.index_put",
    "demote": "",
}
_FLOATS = (f16, f32)


def _is_float(v: SSAValue) -> bool:
    return isinstance(v.type, TensorType) and v.type.element_type in _FLOATS


@dataclass(frozen=True)
class AutocastPass(ModulePass):
    name = "ipu-autocast"

    fp16: str = _DEFAULT["fp16"]
    fp32: str = _DEFAULT["fp32"]
    promote: str = _DEFAULT["promote"]
    demote: str = _DEFAULT["demote"]

    def __post_init__(self):
        from tilefx.dialects.ipu import IPU

        known = {c.name for c in ATEN_OPS.values()} | {c.name for c in IPU.operations}
        for k in _DEFAULT:
            for n in getattr(self, k).split(","):
                check_option(self.name, not n or n in known,
                             f"{k}: {n!r} is not an aten or ipu op name (e.g. aten.mm)")

    def _policy(self, module: ModuleOp) -> dict[str, set[str]]:
        attr = module.attributes.get(AUTOCAST_POLICY_KEY)
        if attr is not None:
            return {k: set(v) for k, v in to_py(attr).items()}
        return {k: {n for n in getattr(self, k).split(",") if n} for k in _DEFAULT}

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        policy = self._policy(op)
        main = find_func(op, "main")
        for o in list(main.walk()):
            flag = o.attributes.get(AUTOCAST_KEY)
            if not isinstance(flag, IntegerAttr) or not flag.value.data:
                continue
            if o.name in policy["fp32"]:
                self._run_in(o, f32)
            elif o.name in policy["fp16"]:
                self._run_in(o, f16)
            elif o.name in policy["promote"] and self._mixed(o):
                self._cast_operands(o, f32)
            elif o.name in policy["demote"] and self._mixed(o):
                self._cast_operands(o, f16)

    @staticmethod
    def _mixed(o: Operation) -> bool:
        return len({v.type.element_type for v in o.operands if _is_float(v)}) > 1

    def _cast_operands(self, o: Operation, to) -> None:
        for i, v in enumerate(o.operands):
            if _is_float(v) and v.type.element_type != to:
                o.operands[i] = _cast(v, to, o)

    def _run_in(self, o: Operation, to) -> None:
        if not any(_is_float(v) for v in o.operands):
            return
        self._cast_operands(o, to)
        retyped = [TensorType(to, r.type.get_shape()) if _is_float(r) else r.type for r in o.results]
        if retyped == [r.type for r in o.results]:
            return
        # a result type cannot change in place: make the op anew, cast its results back
        new = type(o).create(operands=list(o.operands), result_types=retyped,
                             properties=dict(o.properties), attributes=dict(o.attributes))
        block = o.parent_block()
        block.insert_op_before(new, o)
        anchor = new
        for old_r, new_r in zip(o.results, new.results):
            if old_r.type == new_r.type:
                old_r.replace_all_uses_with(new_r)
            elif old_r.uses:
                back = _make_cast(new_r, old_r.type.element_type, new)
                block.insert_op_after(back, anchor)
                anchor = back
                old_r.replace_all_uses_with(back.results[0])
        block.erase_op(o)


def _make_cast(v: SSAValue, to, near: Operation) -> Operation:
    attrs = {PLACE_KEY: near.attributes[PLACE_KEY]} if PLACE_KEY in near.attributes else {}
    return create_aten_op("_to_copy.default", {"self": v}, {"dtype": np_dtype(to)},
                          [TensorType(to, v.type.get_shape())], attrs)


def _cast(v: SSAValue, to, user: Operation) -> SSAValue:
    """`v` as `to`: folds a cast of a cast back to the original type."""
    src = v.owner
    if isinstance(src, ATEN_OPS["_to_copy.default"]) and src.operands[0].type.element_type == to:
        return src.operands[0]
    c = _make_cast(v, to, user)
    user.parent_block().insert_op_before(c, user)
    return c.results[0]
