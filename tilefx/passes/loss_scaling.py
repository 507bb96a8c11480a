"""`ipu-loss-scaling`: static and automatic loss scaling (PopTorch user guide, 4.5.1 "Loss scaling"; PopART's
automatic loss scaling).

Runs after `ipu-training-step`. @main gains a runtime argument
`%scale : tensor<f32> {tilefx.hyper = "loss_scaling"}` (loss_scaling x the
automatic factor, supplied by the executor at every call):

- the loss seed (the `aten.full` marked `tilefx.loss_seed`) is multiplied by
  it, so the backward computes scaled gradients (in fp16 this keeps small
  gradients from underflowing);
- each gradient is multiplied by 1/scale as it is accumulated (after a cast
  to the accumulator's type), so the optimizer sees the true gradient and
  the maths is unchanged in exact arithmetic.

With `automatic=true` @main also returns, per tracked gradient (the fp16
ones, else all), `{tilefx.als_upper}`: how many of its elements have
|g| >= 0.125 x 65504, the upper bin of PopART's histogram. The executor sums
it over micro-batches and replicas and, every update period, halves the
factor when upper > f x lower (f = t/(1-t), t = 1e-7) and doubles it
otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from tilefx.dialects.aten import create_aten_op, np_dtype, tensor_type
from tilefx.dialects.ipu import PLACE_KEY, AccumulateOp
from tilefx.dialects.irutil import attrs_of, find_func, set_results
from tilefx.dialects.names import ALS_TRACKED_KEY, ALS_UPPER_KEY, HYPER_KEY, LOSS_SEED_KEY

ALS_THRESHOLD = 0.125 * 65504.0
SCALE_KEY = "loss_scaling"


def _is_seed(op: Operation) -> bool:
    return op.name == "aten.full" and LOSS_SEED_KEY in op.attributes


@dataclass(frozen=True)
class LossScalingPass(ModulePass):
    name = "ipu-loss-scaling"

    automatic: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = find_func(op, "main")
        block = main.body.block
        seeds = [o for o in block.ops if _is_seed(o)]
        if not seeds:
            return  # inference, or no loss
        arg_attrs, res_attrs = attrs_of(main, "arg"), attrs_of(main, "res")
        if any(a.get(HYPER_KEY) == StringAttr(SCALE_KEY) for a in arg_attrs):
            return  # already applied
        scalar = TensorType(f32, [])
        scale = block.insert_arg(scalar, len(block.args))
        arg_attrs.append({HYPER_KEY: StringAttr(SCALE_KEY)})

        def emit(name, operands, props, rtype, before, place):
            new = create_aten_op(name, operands, props, [rtype], {PLACE_KEY: place} if place else {})
            before.parent_block().insert_op_before(new, before)
            return new.results[0]

        for seed in seeds:
            place = seed.attributes.get(PLACE_KEY)
            nxt = seed.next_op
            seed_type = seed.results[0].type
            factor = scale
            if seed_type.element_type != f32:  # scale in the loss's own precision
                factor = emit("_to_copy.default", {"self": scale},
                              {"dtype": np_dtype(seed_type.element_type)},
                              TensorType(seed_type.element_type, []), nxt, place)
            scaled = emit("mul.Tensor", {"self": seed.results[0], "other": factor}, {},
                          seed_type, nxt, place)
            for use in list(seed.results[0].uses):
                if use.operation is not scaled.owner:
                    use.operation.operands[use.index] = scaled

        accs = [o for o in block.ops if isinstance(o, AccumulateOp)]
        tracked = [a.grad for a in accs if np_dtype(a.grad.type.element_type).itemsize == 2] or \
                  [a.grad for a in accs]
        if self.automatic:  # the executor needs the bin sizes: lower = tracked - upper
            op.attributes[ALS_TRACKED_KEY] = IntegerAttr(
                sum(math.prod(g.type.get_shape()) for g in tracked), i64)
        counts = []  # one per tracked gradient, on its own stage: the executor sums them
        for acc in accs:
            place = acc.attributes.get(PLACE_KEY)
            grad = acc.grad
            if self.automatic and grad in tracked:
                big = emit("ge.Scalar", {"self": emit("abs.default", {"self": grad}, {}, grad.type, acc,
                                                      place)},
                           {"other": ALS_THRESHOLD},
                           tensor_type(grad.type.get_shape(), "bool"), acc, place)
                counts.append(emit("sum.default", {"self": big}, {"dtype": "int64"},
                                   TensorType(i64, []), acc, place))
            inv = emit("reciprocal.default", {"self": scale}, {}, scalar, acc, place)
            acc_type = acc.accumulator.type
            if grad.type != acc_type:
                grad = emit("_to_copy.default", {"self": grad},
                            {"dtype": np_dtype(acc_type.element_type)}, acc_type, acc, place)
            acc.operands[1] = emit("mul.Tensor", {"self": grad, "other": inv}, {}, acc_type, acc, place)

        results = list(block.last_op.operands)
        for count in counts:
            results.append(count)
            res_attrs.append({ALS_UPPER_KEY: UnitAttr()})
        set_results(main, results, arg_attrs, res_attrs)


__all__ = ["LossScalingPass", "ALS_THRESHOLD"]
