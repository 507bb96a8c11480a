"""`ipu-training-step`: turn the joint forward+backward graph into a training step.

Before: `@main(params, buffers, inputs) -> (buffer updates, outputs, grads)`.
After:
- `@main` also takes one accumulator per trained parameter and returns
  `ipu.accumulate(acc, grad)` in place of each gradient: it runs once per
  micro-batch and replica (gradient accumulation). With an `accum_type`
  other than the gradient's, the gradient is cast to it first;
- a new `@update(weights, accumulators, hyper-parameters, step, optimizer
  state) -> (new weights, new state)` runs once per weight update, after
  the replicas' accumulators are summed: optionally one `ipu.clip_grad_norm`
  over every gradient (`max_grad_norm`), then one `ipu.sgd` / `ipu.adam` /
  `ipu.rmsprop` / `ipu.lamb` per weight.

Hyper-parameters come from the module attribute `ipu.optimizer` (written
by the driver from the user's optimizer, see tilefx/lowering/optimizers.py:
`{type, grad_scale, variable, groups = [{lr, ...}], ...}`) and each
parameter's `tilefx.group`; without it, from this pass's options (one group
of SGD, Adam, RMSprop or LAMB). The optimizer is IR, not a pass option: the
program carries it with `@update` (an executable file stores the module,
and a loaded program's optimizer, which `setOptimizer` checks a new one
against, is read back from it), and its parameter groups, variable
hyper-parameters and accumulation types have no pipeline-text form. `lr` and the names in `variable` are
runtime arguments of @update (`tilefx.hyper = "<name>/<group>"`, or
`"max_grad_norm"`), the others properties of the update ops. State
arguments are `tilefx.state = "<param>/<kind>"` in their accumulation type,
with `tilefx.init` when they do not start at zero.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    DictionaryAttr,
    FloatAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    f16,
    f32,
    f64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from tilefx.analysis.shared_results import shared_of
from tilefx.dialects import ipu
from tilefx.passes import check_option, finite
from tilefx.dialects.irutil import attrs_of, find_func, module_config, set_results, to_py
from tilefx.dialects.names import ACCUM_KEY, GRAD_KEY, GROUP_KEY, HYPER_KEY, INIT_KEY, OPTIMIZER_KEY, PARAM_KEY, STATE_KEY, STEP_KEY

_SCALAR = TensorType(f32, [])
_FLOAT_TYPES = {"float16": f16, "float32": f32}
# PopTorch's defaults of each optimizer's group hyper-parameters (lr aside)
DEFAULTS = {
    "sgd": {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "velocity_scaling": 1.0},
    "adam": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0},
    "adamw": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01},
    "rmsprop": {"alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0, "momentum": 0.0, "centered": False},
    "lamb": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "max_weight_norm": 65500.0},
}
# their names, in the update ops' operand order
HYPERS = {"sgd": ipu.SGD_HYPERS, "adam": ipu.ADAM_HYPERS, "adamw": ipu.ADAM_HYPERS,
           "rmsprop": ipu.RMSPROP_HYPERS, "lamb": ipu.LAMB_HYPERS}
BOOL_HYPERS = {"nesterov", "centered"}
# the state kind (`tilefx.state = "<param>/<kind>"`) of each PopART SGD state form
POPART_STATE_KINDS = {"combined": "folded_velocity", "separate": "velocity"}


@dataclass(frozen=True)
class TrainingStepPass(ModulePass):
    name = "ipu-training-step"

    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_scale: float = 1.0
    max_grad_norm: float = 0.0  # > 0: clip the global gradient norm

    def __post_init__(self):
        check_option(self.name, self.optimizer in DEFAULTS,
                     f"optimizer must be one of {', '.join(sorted(DEFAULTS))}, got {self.optimizer!r}")
        for opt, lo, hi in (("lr", 0.0, None), ("weight_decay", 0.0, None), ("max_grad_norm", 0.0, None),
                            ("momentum", 0.0, 1.0)):
            v = getattr(self, opt)
            check_option(self.name, finite(v) and v >= lo and (hi is None or v < hi),
                         f"{opt} must be a finite number >= {lo}" + (f" and < {hi}" if hi else "")
                         + f", got {v!r}")
        check_option(self.name, finite(self.grad_scale) and self.grad_scale > 0,
                     f"grad_scale must be a finite number > 0, got {self.grad_scale!r}")

    def _config(self, module: ModuleOp) -> dict:
        cfg = module_config(module, OPTIMIZER_KEY)
        if cfg is None:
            group = {"lr": self.lr, "weight_decay": self.weight_decay}
            if self.optimizer in ("sgd", "rmsprop"):
                group["momentum"] = self.momentum
            cfg = {"type": self.optimizer, "grad_scale": self.grad_scale, "groups": [group]}
            if self.max_grad_norm > 0:
                cfg["max_grad_norm"] = self.max_grad_norm
        if cfg["type"] not in DEFAULTS:
            raise DiagnosticException(f"ipu-training-step: unknown optimizer {cfg['type']!r}; "
                                      f"expected one of {sorted(DEFAULTS)}")
        for key in ("accum_type", "velocity_accum_type", "first_order_momentum_accum_type",
                    "second_order_momentum_accum_type"):
            if cfg.get(key, "float32") not in _FLOAT_TYPES:
                raise DiagnosticException(f"ipu-training-step: {key} must be float16 or float32, "
                                          f"got {cfg[key]!r}")
        return cfg

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = find_func(op, "main")
        for o in op.ops:
            if isinstance(o, func.FuncOp) and o.sym_name.data == "update":
                raise DiagnosticException("ipu-training-step: the module already has an @update")
        cfg = self._config(op)
        accum_type = _FLOAT_TYPES.get(cfg.get("accum_type", ""))
        arg_attrs, res_attrs = attrs_of(main, "arg"), attrs_of(main, "res")
        block = main.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)

        # 1. gradients -> accumulators (of accum_type when given)
        new_results = list(ret.operands)
        for i, a in enumerate(res_attrs):
            if GRAD_KEY not in a:
                continue
            name = a[GRAD_KEY].data
            grad = new_results[i]
            place = ipu.PlacementAttr("bwd")
            owner = grad.owner
            if isinstance(owner, Operation) and ipu.PLACE_KEY in owner.attributes:
                place = owner.attributes[ipu.PLACE_KEY]
            gtype = grad.type
            assert isinstance(gtype, TensorType)
            if accum_type is not None and gtype.element_type != accum_type:
                from tilefx.dialects.aten import create_aten_op, np_dtype

                gtype = TensorType(accum_type, gtype.get_shape())
                cast = create_aten_op("_to_copy.default", {"self": grad}, {"dtype": np_dtype(accum_type)},
                                      [gtype], {ipu.PLACE_KEY: place})
                block.insert_op_before(cast, ret)
                grad = cast.results[0]
            acc = block.insert_arg(gtype, len(block.args))
            arg_attrs.append({ACCUM_KEY: StringAttr(name)})
            acc_op = ipu.AccumulateOp.build(operands=[acc, grad], result_types=[gtype],
                                            attributes={ipu.PLACE_KEY: place})
            block.insert_op_before(acc_op, ret)
            new_results[i] = acc_op.results[0]
            res_attrs[i] = {ACCUM_KEY: StringAttr(name)}
        set_results(main, new_results, arg_attrs, res_attrs)

        # 2. @update
        self.build_update(op)

    def build_update(self, module: ModuleOp) -> None:
        """(Re)build @update from `ipu.optimizer` and @main's accumulators."""
        for o in list(module.ops):
            if isinstance(o, func.FuncOp) and o.sym_name.data == "update":
                module.body.block.erase_op(o)
        main = find_func(module, "main")
        weights, trained, accums = {}, [], {}
        for arg, a in zip(main.body.block.args, attrs_of(main, "arg")):
            if PARAM_KEY in a:
                weights[a[PARAM_KEY].data] = (arg.type, a)
            if ACCUM_KEY in a:
                trained.append(a[ACCUM_KEY].data)
                accums[a[ACCUM_KEY].data] = arg.type
        for n in trained:
            if n not in weights:
                raise DiagnosticException(f"ipu-training-step: @main accumulates a gradient for {n!r} "
                                          f"but has no argument with {PARAM_KEY} = {n!r}")
        cfg = self._config(module)
        shared = shared_of(module)
        if shared is None:
            module.body.block.add_op(self._update_func(cfg, trained, weights, accums))
            return
        # a planner's copies of one trace: @update is a function of the
        # optimizer and of the weights and accumulators alone, built once for
        # all of them (analysis/shared_results.py) and copied into each
        key = ("update", repr(cfg), tuple((n, weights[n][0], accums[n], weights[n][1].get(GROUP_KEY))
                                          for n in trained))
        module.body.block.add_op(shared.get(key, lambda: self._update_func(cfg, trained, weights, accums)).clone())

    def _update_func(self, cfg: dict, trained: list[str], weights: dict,
                     accums: dict | None = None) -> func.FuncOp:
        kind = cfg["type"]
        groups = cfg["groups"]
        variable = set(cfg.get("variable", ()))
        accums = accums or {n: weights[n][0] for n in trained}
        block = Block()
        arg_attrs: list[dict[str, Attribute]] = []
        res_vals, res_attrs = [], []

        def arg(t, attrs):
            v = block.insert_arg(t, len(block.args))
            arg_attrs.append(attrs)
            return v

        scale = FloatAttr(float(cfg.get("grad_scale", 1.0)), f64)
        place = {ipu.PLACE_KEY: ipu.PlacementAttr("bwd")}
        w_args = {n: arg(weights[n][0], {PARAM_KEY: StringAttr(n)}) for n in trained}
        grads = {n: arg(accums[n], {ACCUM_KEY: StringAttr(n)}) for n in trained}

        # max_grad_norm: one global clip of every gradient, before any update
        max_norm = cfg.get("max_grad_norm")
        if trained and ("max_grad_norm" in variable or (max_norm is not None and math.isfinite(max_norm))):
            props = {"grad_scale": scale}
            norm_var = []
            if "max_grad_norm" in variable:
                norm_var = [arg(_SCALAR, {HYPER_KEY: StringAttr("max_grad_norm")})]
            else:
                props["max_norm"] = FloatAttr(float(max_norm), f64)
            clip = ipu.ClipGradNormOp.build(
                operands=[[w_args[n] for n in trained], [grads[n] for n in trained], norm_var],
                result_types=[[accums[n] for n in trained]], attributes=place,
                properties={**props, "operandSegmentSizes": _segments([len(trained), len(trained),
                                                                       len(norm_var)])})
            block.add_op(clip)
            grads = dict(zip(trained, clip.results))

        combined = kind == "sgd" and bool(cfg.get("use_combined_accum"))
        popart_state = cfg.get("popart_sgd") if kind == "sgd" else None  # PopART's SGD, its state form
        if popart_state is not None and popart_state not in ipu.POPART_SGD_STATES:
            raise DiagnosticException(f"ipu-training-step: popart_sgd must be one of "
                                      f"{', '.join(ipu.POPART_SGD_STATES)}, got {popart_state!r}")
        hypers = [h for h in HYPERS[kind] if h != "velocity_scaling" or combined or popart_state]
        group_args: dict[int, dict] = {}
        step = None

        def group_operands(g: int) -> dict:
            if g not in group_args:
                vals = {"lr": arg(_SCALAR, {HYPER_KEY: StringAttr(f"lr/{g}")})}
                for h in hypers:
                    if h in variable:
                        vals[h] = arg(_SCALAR, {HYPER_KEY: StringAttr(f"{h}/{g}")})
                group_args[g] = vals
            return group_args[g]

        def step_arg():
            nonlocal step
            if step is None:
                step = arg(_SCALAR, {STEP_KEY: UnitAttr()})
            return step

        def state(n: str, what: str, dtype_key: str | None, init: float = 0.0):
            wt = weights[n][0]
            t = wt
            if dtype_key is not None and dtype_key in cfg:
                t = TensorType(_FLOAT_TYPES[cfg[dtype_key]], wt.get_shape())
            attrs = {STATE_KEY: StringAttr(f"{n}/{what}")}
            if init != 0.0:
                attrs[INIT_KEY] = FloatAttr(init, f64)
            return arg(t, attrs), t, f"{n}/{what}"

        for n in trained:
            g = int(to_py(weights[n][1].get(GROUP_KEY, _int0())))
            if g >= len(groups):
                raise DiagnosticException(f"ipu-training-step: {n} is in group {g} but the optimizer "
                                          f"has {len(groups)} groups")
            hp = dict(DEFAULTS[kind])
            hp.update({k: v for k, v in groups[g].items() if k != "lr"})
            ops = group_operands(g)
            wt = weights[n][0]
            props: dict[str, Attribute] = {}
            for h in hypers:
                if h not in variable:
                    props[h] = _bool(bool(hp[h])) if h in BOOL_HYPERS else _f64(float(hp[h]))
            var_ops = [[ops[h]] if h in ops else [] for h in HYPERS[kind]]
            states = []  # (value, type, name) in result order
            if kind == "sgd":
                has_v = "momentum" in variable or float(hp["momentum"]) != 0.0
                if has_v:
                    step_arg()
                    kind_name = POPART_STATE_KINDS[popart_state] if popart_state else \
                        "scaled_velocity" if combined else "momentum_buffer"
                    states.append(state(n, kind_name, None if combined else "velocity_accum_type"))
                props["grad_scale"] = scale
                if combined:
                    props["combined"] = _bool(True)
                if popart_state:
                    props["popart_state"] = StringAttr(popart_state)
                if "velocity_scaling" in props:  # after grad_scale, like the other extras
                    props["velocity_scaling"] = props.pop("velocity_scaling")
                segs = [1, 1, 1, int(has_v), int(has_v)] + [len(x) for x in var_ops]
                upd = ipu.SGDOp.build(
                    operands=[w_args[n], grads[n], ops["lr"], [s[0] for s in states],
                              [step] if has_v else [], *var_ops],
                    result_types=[wt, [s[1] for s in states]], attributes=place,
                    properties={**props, "operandSegmentSizes": _segments(segs)})
            elif kind in ("adam", "adamw", "lamb"):
                step_arg()
                states = [state(n, "exp_avg", "first_order_momentum_accum_type"),
                          state(n, "exp_avg_sq", "second_order_momentum_accum_type")]
                if kind == "lamb":
                    props["bias_correction"] = _bool(bool(cfg.get("bias_correction", True)))
                    props["grad_scale"] = scale
                    cls = ipu.LambOp
                else:
                    props["decoupled"] = _bool(kind == "adamw")
                    props["bias_correction"] = _bool(
                        bool(cfg.get("bias_correction", groups[g].get("bias_correction", True))))
                    props["grad_scale"] = scale
                    if cfg.get("infinity_norm"):  # PopART's AdaMax
                        props["infinity_norm"] = _bool(True)
                    cls = ipu.AdamOp
                segs = [1, 1, 1, 1, 1, 1] + [len(x) for x in var_ops]
                upd = cls.build(
                    operands=[w_args[n], grads[n], states[0][0], states[1][0], step, ops["lr"], *var_ops],
                    result_types=[wt, states[0][1], states[1][1]], attributes=place,
                    properties={**props, "operandSegmentSizes": _segments(segs)})
            else:  # rmsprop
                tf = bool(cfg.get("use_tf_variant", False))
                states = [state(n, "square_avg", "second_order_momentum_accum_type", 1.0 if tf else 0.0)]
                centered = "centered" in variable or bool(hp["centered"])
                has_m = "momentum" in variable or float(hp["momentum"]) != 0.0
                if centered:
                    states.append(state(n, "grad_avg", "first_order_momentum_accum_type"))
                if has_m:
                    states.append(state(n, "momentum_buffer", "first_order_momentum_accum_type"))
                props["tf_variant"] = _bool(tf)
                props["grad_scale"] = scale
                segs = [1, 1, 1, int(centered), int(has_m), 1] + [len(x) for x in var_ops]
                upd = ipu.RMSpropOp.build(
                    operands=[w_args[n], grads[n], states[0][0], [states[1][0]] if centered else [],
                              [states[-1][0]] if has_m else [], ops["lr"], *var_ops],
                    result_types=[wt, states[0][1], [states[1][1]] if centered else [],
                                  [states[-1][1]] if has_m else []],
                    attributes=place,
                    properties={**props, "operandSegmentSizes": _segments(segs),
                                "resultSegmentSizes": _segments([1, 1, int(centered), int(has_m)])})
            block.add_op(upd)
            res_vals.append(upd.results[0])
            res_attrs.append({PARAM_KEY: StringAttr(n)})
            for (_, _, sname), r in zip(states, upd.results[1:]):
                res_vals.append(r)
                res_attrs.append({STATE_KEY: StringAttr(sname)})
        block.add_op(func.ReturnOp(*res_vals))
        ftype = func.FunctionType.from_lists([a.type for a in block.args], [r.type for r in res_vals])
        return func.FuncOp("update", ftype, Region(block),
                           arg_attrs=ArrayAttr([DictionaryAttr(a) for a in arg_attrs]),
                           res_attrs=ArrayAttr([DictionaryAttr(a) for a in res_attrs]))


# the optimizer's flags and hyperparameters as attributes, made once per
# value (attributes are immutable): each weight's update op carries them
@functools.lru_cache(maxsize=2)
def _bool(value: bool) -> Attribute:
    return BoolAttr.from_bool(bool(value))


def _f64(value: float) -> FloatAttr:
    return _f64_of(value.hex())  # by its bits: 0.0 and -0.0 apart


@functools.lru_cache(maxsize=1024)
def _f64_of(bits: str) -> FloatAttr:
    return FloatAttr(float.fromhex(bits), f64)


def _int0():
    from xdsl.dialects.builtin import IntegerAttr, i64

    return IntegerAttr(0, i64)


def _segments(sizes):
    from xdsl.dialects.builtin import DenseArrayBase, i32

    return DenseArrayBase.from_list(i32, sizes)
