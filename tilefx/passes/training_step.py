"""`ipu-training-step`: turn the joint forward+backward graph into a training step.

Before: `@main(params, buffers, inputs) -> (buffer updates, outputs, grads)`.
After:
- `@main` also takes one accumulator per trained parameter and returns
  `ipu.accumulate(acc, grad)` in place of each gradient: it runs once per
  micro-batch and replica (gradient accumulation);
- a new `@update(weights, accumulators, optimizer state, lr per group, step)
  -> (new weights, new state)` holds one `ipu.sgd` / `ipu.adam` per weight:
  it runs once per weight update, after the replicas' accumulators are summed.

Hyper-parameters come from the module attribute `ipu.optimizer` (set by the
API from the user's optimizer: `{type, grad_scale, groups = [{lr, ...}]}`)
and each parameter's `tilefx.group`; without it, from this pass's options.
"""

from __future__ import annotations

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
    f32,
    f64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from tilefx.dialects import ipu

_SCALAR = TensorType(f32, [])
_ADAM_DEFAULTS = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0, "bias_correction": True}
_SGD_DEFAULTS = {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False}


def _py(attr: Attribute):
    from tilefx.dialects.aten import from_attr

    if isinstance(attr, DictionaryAttr):
        return {k: _py(v) for k, v in attr.data.items()}
    if isinstance(attr, ArrayAttr):
        return [_py(v) for v in attr.data]
    return from_attr(attr)


def find_func(module: ModuleOp, name: str) -> func.FuncOp:
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == name:
            return op
    raise DiagnosticException(f"no function @{name} in the module")


def _attrs_of(fn: func.FuncOp, which: str) -> list[dict[str, Attribute]]:
    arr = fn.arg_attrs if which == "arg" else fn.res_attrs
    n = len(fn.body.block.args) if which == "arg" else len(fn.function_type.outputs)
    return [dict(arr.data[i].data) if arr is not None else {} for i in range(n)]


@dataclass(frozen=True)
class TrainingStepPass(ModulePass):
    name = "ipu-training-step"

    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_scale: float = 1.0

    def _config(self, module: ModuleOp) -> dict:
        attr = module.attributes.get("ipu.optimizer")
        if attr is not None:
            cfg = _py(attr)
        else:
            group = {"lr": self.lr, "weight_decay": self.weight_decay}
            if self.optimizer == "sgd":
                group["momentum"] = self.momentum
            cfg = {"type": self.optimizer, "grad_scale": self.grad_scale, "groups": [group]}
        if cfg["type"] not in ("sgd", "adam", "adamw"):
            raise DiagnosticException(f"ipu-training-step: unknown optimizer {cfg['type']!r}")
        return cfg

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = find_func(op, "main")
        for o in op.ops:
            if isinstance(o, func.FuncOp) and o.sym_name.data == "update":
                raise DiagnosticException("ipu-training-step: the module already has an @update")
        cfg = self._config(op)
        arg_attrs, res_attrs = _attrs_of(main, "arg"), _attrs_of(main, "res")
        block = main.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        weights = {}
        for arg, a in zip(block.args, arg_attrs):
            if "tilefx.param" in a:
                weights[a["tilefx.param"].data] = (arg.type, a)

        # 1. gradients -> accumulators
        new_results = list(ret.operands)
        trained: list[str] = []
        for i, a in enumerate(res_attrs):
            if "tilefx.grad" not in a:
                continue
            name = a["tilefx.grad"].data
            acc = block.insert_arg(new_results[i].type, len(block.args))
            arg_attrs.append({"tilefx.accum": StringAttr(name)})
            place = ipu.PlacementAttr("bwd")
            owner = new_results[i].owner
            if isinstance(owner, Operation) and ipu.PLACE_KEY in owner.attributes:
                place = owner.attributes[ipu.PLACE_KEY]
            acc_op = ipu.AccumulateOp.build(operands=[acc, new_results[i]],
                                            result_types=[new_results[i].type],
                                            attributes={ipu.PLACE_KEY: place})
            block.insert_op_before(acc_op, ret)
            new_results[i] = acc_op.results[0]
            res_attrs[i] = {"tilefx.accum": StringAttr(name)}
            trained.append(name)
        new_ret = func.ReturnOp(*new_results)
        block.insert_op_before(new_ret, ret)
        block.erase_op(ret)
        main.function_type = func.FunctionType.from_lists([x.type for x in block.args],
                                                         [x.type for x in new_results])
        main.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in arg_attrs])
        main.res_attrs = ArrayAttr([DictionaryAttr(a) for a in res_attrs])

        # 2. @update
        self.build_update(op)

    def build_update(self, module: ModuleOp) -> None:
        """(Re)build @update from `ipu.optimizer` and @main's accumulators."""
        for o in list(module.ops):
            if isinstance(o, func.FuncOp) and o.sym_name.data == "update":
                module.body.block.erase_op(o)
        main = find_func(module, "main")
        weights, trained = {}, []
        for arg, a in zip(main.body.block.args, _attrs_of(main, "arg")):
            if "tilefx.param" in a:
                weights[a["tilefx.param"].data] = (arg.type, a)
            if "tilefx.accum" in a:
                trained.append(a["tilefx.accum"].data)
        module.body.block.add_op(self._update_func(self._config(module), trained, weights))

    def _update_func(self, cfg: dict, trained: list[str], weights: dict) -> func.FuncOp:
        kind = cfg["type"]
        groups = cfg["groups"]
        block = Block()
        arg_attrs: list[dict[str, Attribute]] = []
        res_vals, res_attrs = [], []

        def arg(t, attrs):
            v = block.insert_arg(t, len(block.args))
            arg_attrs.append(attrs)
            return v

        step = None
        lrs = {}
        w_args = {n: arg(weights[n][0], {"tilefx.param": StringAttr(n)}) for n in trained}
        acc_args = {n: arg(weights[n][0], {"tilefx.accum": StringAttr(n)}) for n in trained}
        for n in trained:
            g = int(_py(weights[n][1].get("tilefx.group", _int0())))
            hp = dict(_SGD_DEFAULTS if kind == "sgd" else _ADAM_DEFAULTS)
            if kind == "adamw":
                hp["weight_decay"] = 0.01
            hp.update({k: v for k, v in groups[g].items() if k != "lr"})
            if g not in lrs:
                lrs[g] = arg(_SCALAR, {"tilefx.hyper": StringAttr(f"lr/{g}")})
            wt = weights[n][0]
            place = {ipu.PLACE_KEY: ipu.PlacementAttr("bwd")}
            scale = FloatAttr(float(cfg.get("grad_scale", 1.0)), f64)
            if kind == "sgd":
                has_v = float(hp["momentum"]) != 0.0
                operands = [w_args[n], acc_args[n], lrs[g]]
                if has_v:
                    if step is None:
                        step = arg(_SCALAR, {"tilefx.step": UnitAttr()})
                    vel = arg(wt, {"tilefx.state": StringAttr(f"{n}/momentum_buffer")})
                operands += [[vel] if has_v else [], [step] if has_v else []]
                upd = ipu.SGDOp.build(
                    operands=operands, result_types=[wt, [wt] if has_v else []], attributes=place,
                    properties={
                        "momentum": FloatAttr(float(hp["momentum"]), f64),
                        "dampening": FloatAttr(float(hp["dampening"]), f64),
                        "weight_decay": FloatAttr(float(hp["weight_decay"]), f64),
                        "nesterov": BoolAttr.from_bool(bool(hp["nesterov"])),
                        "grad_scale": scale,
                        "operandSegmentSizes": _segments([1, 1, 1, int(has_v), int(has_v)]),
                    })
                block.add_op(upd)
                res_vals.append(upd.results[0])
                res_attrs.append({"tilefx.param": StringAttr(n)})
                if has_v:
                    res_vals.append(upd.results[1])
                    res_attrs.append({"tilefx.state": StringAttr(f"{n}/momentum_buffer")})
            else:
                if step is None:
                    step = arg(_SCALAR, {"tilefx.step": UnitAttr()})
                m = arg(wt, {"tilefx.state": StringAttr(f"{n}/exp_avg")})
                v = arg(wt, {"tilefx.state": StringAttr(f"{n}/exp_avg_sq")})
                upd = ipu.AdamOp.build(
                    operands=[w_args[n], acc_args[n], m, v, step, lrs[g]],
                    result_types=[wt, wt, wt], attributes=place,
                    properties={
                        "beta1": FloatAttr(float(hp["beta1"]), f64),
                        "beta2": FloatAttr(float(hp["beta2"]), f64),
                        "eps": FloatAttr(float(hp["eps"]), f64),
                        "weight_decay": FloatAttr(float(hp["weight_decay"]), f64),
                        "decoupled": BoolAttr.from_bool(kind == "adamw"),
                        "bias_correction": BoolAttr.from_bool(bool(hp["bias_correction"])),
                        "grad_scale": scale,
                    })
                block.add_op(upd)
                res_vals += list(upd.results)
                res_attrs += [{"tilefx.param": StringAttr(n)},
                              {"tilefx.state": StringAttr(f"{n}/exp_avg")},
                              {"tilefx.state": StringAttr(f"{n}/exp_avg_sq")}]
        block.add_op(func.ReturnOp(*res_vals))
        ftype = func.FunctionType.from_lists([a.type for a in block.args], [r.type for r in res_vals])
        return func.FuncOp("update", ftype, Region(block),
                           arg_attrs=ArrayAttr([DictionaryAttr(a) for a in arg_attrs]),
                           res_attrs=ArrayAttr([DictionaryAttr(a) for a in res_attrs]))


def _int0():
    from xdsl.dialects.builtin import IntegerAttr, i64

    return IntegerAttr(0, i64)


def _segments(sizes):
    from xdsl.dialects.builtin import DenseArrayBase, i32

    return DenseArrayBase.from_list(i32, sizes)
