"""The facts of a compilation PopTorch logs at DEBUG, in PopTorch's words.

PopTorch's users (and its own tests) read its DEBUG log to see how a model
was compiled: the session options as applied ("poptorch.Options set
device_iterations to value 4", "enablePipelining set to value 1": PopTorch's
own, api/compiling.py `log_options`), where
each op of the forward graph runs ("Mul:0 [float32(2, 5), mode(Pipelined),
ipu(1), stage(1)]"), and the optimizer as handed to the backend ("Updating
graph optimizer with SGD2, defaultLearningRate=0.01, ... lossScaling=2
(const), accumType=float32, ..."). tilefx logs the same facts, taken from
what it compiled (the placement the stage passes left on each op, the
optimizer configuration of the update; PopTorch's options), so
that a PopTorch user's habits and log-reading scripts keep working.

The lines are DEBUG records of the "tilefx.compile" logger and cost nothing
when DEBUG is off (each function returns at once).
"""

from __future__ import annotations

import logging
import math
from typing import Any

log = logging.getLogger("tilefx.compile")

# PopART's execution mode numbers (poptorch.Options' execution_mode): the
# strategy kinds of `ipu.stages` (passes/assign_stages.py) they stand for
_EXECUTION_MODE = {"pipelined": (0, "Pipelined"), "single": (0, "Pipelined"), "sharded": (1, "Sharded"),
                   "serial_phased": (2, "Phased"), "parallel_phased": (2, "Phased")}

# ATen ops under the ONNX operator names PopART gives their results' tensor
# ids ("Mul:0"); other ops keep their ATen name in PopART's CamelCase
_ONNX_NAMES = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "neg": "Neg", "pow": "Pow", "sqrt": "Sqrt",
    "rsqrt": "Rsqrt", "exp": "Exp", "log": "Log", "abs": "Abs", "relu": "Relu", "sigmoid": "Sigmoid",
    "tanh": "Tanh", "gelu": "Gelu", "mm": "MatMul", "bmm": "MatMul", "matmul": "MatMul", "addmm": "Gemm",
    "convolution": "Conv", "slice": "Slice", "cat": "Concat", "view": "Reshape", "reshape": "Reshape",
    "_unsafe_view": "Reshape", "t": "Transpose", "transpose": "Transpose", "permute": "Transpose",
    "sum": "ReduceSum", "mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin",
    "_softmax": "Softmax", "_log_softmax": "LogSoftmax", "where": "Where", "expand": "Expand",
    "squeeze": "Squeeze", "unsqueeze": "Unsqueeze", "clone": "Identity", "alias": "Identity",
    "embedding": "Gather", "index_select": "Gather", "gather": "GatherElements",
    "max_pool2d_with_indices": "MaxPool", "avg_pool2d": "AveragePool", "_to_copy": "Cast",
    "clamp": "Clip", "eq": "Equal", "lt": "Less", "gt": "Greater", "maximum": "Max", "minimum": "Min",
}


def value_text(v: Any) -> str:
    """A value as PopTorch's C++ streams print it (6 significant digits)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "inf" if math.isinf(v) and v > 0 else format(v, "g")
    if hasattr(v, "value") and hasattr(v, "name"):  # an enum: its number, as PopTorch passes it
        return str(v.value)
    return str(v)


# -- the execution mode ----------------------------------------------------------
def execution_mode(module) -> tuple[int, str]:
    """The execution mode the user's strategy asked for (PopTorch's; a
    sharded model on one IPU is still sharded) and its number."""
    from tilefx.dialects.irutil import to_py
    from tilefx.dialects.names import STRATEGY_KEY

    kind = to_py(module.attributes[STRATEGY_KEY]).get("kind", "pipelined") if STRATEGY_KEY in module.attributes \
        else "pipelined"
    return _EXECUTION_MODE.get(kind, (0, "Pipelined"))


# -- where each op runs --------------------------------------------------------
def _onnx_name(op_name: str) -> str:
    base = op_name.split(".")[1] if op_name.count(".") else op_name
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]  # in-place variants name their functional op
    return _ONNX_NAMES.get(base) or "".join(w.capitalize() for w in base.split("_") if w)


def _type_text(t) -> str:
    from tilefx.dialects.aten import np_dtype

    try:
        dtype = np_dtype(t.element_type).name
        shape = ", ".join(str(d) for d in t.get_shape())
    except (AttributeError, TypeError, KeyError, ValueError):
        return str(t)
    return f"{dtype}({shape})"


def log_placements(module) -> None:
    """One line per op of the forward graph, as PopTorch logs the lowering
    of each: its results' tensor ids (PopART's: the module scope, the ONNX
    operator name, ":0", "/1", "/2" ... for later ops of the same name), their
    types and the placement the stage passes gave it ("mode(Pipelined),
    ipu(1), stage(1)"; phased strategies name the phase)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    from tilefx.dialects.ipu import PlacementAttr
    from tilefx.dialects.irutil import find_func
    from tilefx.dialects.names import NAME_KEY, PLACE_KEY

    mode = execution_mode(module)[1]
    main = find_func(module, "main")
    used: dict[str, int] = {}
    log.debug("Graph lowered to PopART {")
    for op in main.walk():
        place = op.attributes.get(PLACE_KEY)
        if not isinstance(place, PlacementAttr) or place.is_backward or not op.name.startswith("aten."):
            continue
        if not op.operands or not op.results:  # constants: PopTorch keeps them on the host
            continue
        scope = op.attributes[NAME_KEY].data.rsplit("/", 1)[0] + "/" if NAME_KEY in op.attributes else ""
        ids = []
        for _ in op.results:
            base = f"{scope}{_onnx_name(op.name)}:0"
            n = used.get(base, 0)
            used[base] = n + 1
            ids.append(base if n == 0 else f"{base}/{n}")
        where = (f"phase({place.phase.data})" if mode == "Phased" else f"stage({place.stage.data})")
        log.debug("  %s was lowered to %s [%s, mode(%s), ipu(%d), %s]", op.name, ", ".join(ids),
                  ", ".join(_type_text(r.type) for r in op.results), mode, place.ipu.data, where)
    log.debug("}")


# -- the optimizer -------------------------------------------------------------
# tilefx's hyper-parameter names (passes/training_step.py HYPERS) as PopART's
# optimizers name them (popart::SGD, Adam, Adaptive; the group's name, and
# with the "default" prefix the optimizer-wide one)
_POPART_NAMES = {"lr": "LearningRate", "weight_decay": "WeightDecay", "momentum": "Momentum",
                 "dampening": "Dampening", "velocity_scaling": "VelocityScaling", "beta1": "Beta1",
                 "beta2": "Beta2", "eps": "Eps", "alpha": "Alpha", "max_weight_norm": "MaxWeightNorm"}
_UNPREFIXED = {"nesterov"}  # PopART's SGD has no per-group default for these


def _popart_type(cfg: dict) -> str:
    kind = cfg["type"]
    if kind == "sgd":  # PopART's SGD state forms: combined (SGD1) or separate (SGD2)
        return "SGD1" if cfg.get("use_combined_accum") else "SGD2"
    if kind == "rmsprop":
        return "RMSPROP"
    return kind.upper()


def _attrs(kind_hypers: tuple, values: dict, variable: set, default: bool, cfg: dict) -> dict[str, str]:
    out = {}
    for name, value in values.items():
        if name not in _POPART_NAMES and name not in _UNPREFIXED:
            continue
        if name not in kind_hypers and name != "lr":
            continue
        popart = name if name in _UNPREFIXED else (
            "default" + _POPART_NAMES[name] if default else
            _POPART_NAMES[name][0].lower() + _POPART_NAMES[name][1:])
        text = value_text(float(value))
        out[popart] = text if name == "lr" or name in variable else f"{text} (const)"
    if cfg["type"] == "sgd" and not cfg.get("use_combined_accum") and not cfg.get("popart_sgd"):
        # the separate form scales the velocity by the loss scaling (PopART glues the two)
        name = "defaultVelocityScaling" if default else "velocityScaling"
        text = value_text(float(cfg.get("loss_scaling", 1.0)))
        out[name] = text if "loss_scaling" in variable else f"{text} (const)"
    return out


def optimizer_lines(cfg: dict, defaults: dict, group_params: dict[int, list[str]], grad_dtype: str) -> list[str]:
    """The optimizer as PopTorch hands it to PopART: the optimizer-wide line
    (every attribute by PopART's name, "(const)" after those fixed at
    compile time, the accumulation types, the gradient clipping) and one line
    per parameter group with the tensors it updates."""
    from tilefx.passes.training_step import HYPERS

    kind = cfg["type"]
    hypers = HYPERS[kind]
    variable = set(cfg.get("variable", ()))
    name = _popart_type(cfg)
    top = _attrs(hypers, defaults, variable, True, cfg)
    ls = value_text(float(cfg.get("loss_scaling", 1.0)))
    top["lossScaling"] = ls if "loss_scaling" in variable else f"{ls} (const)"
    accum = cfg.get("accum_type") or grad_dtype
    first = cfg.get("velocity_accum_type") or cfg.get("first_order_momentum_accum_type") or "float32"
    second = cfg.get("second_order_momentum_accum_type") or "float32"
    tail = (f", accumType={accum}, firstOrderMomentumAccumType={first}, secondOrderMomentumAccumType={second}"
            f", useTfVariant={int(bool(cfg.get('use_tf_variant', False)))}"
            f", maxGradNorm={value_text(float(cfg.get('max_grad_norm', math.inf)))}")
    lines = ["Updating graph optimizer with " + ", ".join([name] + [f"{k}={v}" for k, v in sorted(top.items())])
             + tail]
    for gi, group in enumerate(cfg["groups"]):
        attrs = _attrs(hypers, group, variable, False, cfg)
        body = ", ".join([name] + [f"{k}={v}" for k, v in sorted(attrs.items())])
        lines.append(f"Updating group {gi} optimizer with {body} for (tensors affected "
                     f"[{', '.join(group_params.get(gi, []))}])")
    return lines


def log_optimizer(optimizer, cfg: dict, group_of: dict[str, int], grad_dtype: str,
                  previous: list[str] | None) -> list[str] | None:
    """Log the optimizer handed to the update when it differs from the one
    handed last, `previous` (PopTorch updates the backend, and logs, only
    then); the lines that now describe it, for the caller to keep."""
    if not log.isEnabledFor(logging.DEBUG) or optimizer is None:
        return previous
    from tilefx.lowering.optimizers import _group_values

    groups: dict[int, list[str]] = {}
    for pname, gi in group_of.items():
        groups.setdefault(gi, []).append(pname)
    defaults = dict(optimizer.defaults)
    if defaults.get("lr") is None:
        defaults["lr"] = cfg["groups"][0]["lr"]
    lines = optimizer_lines(cfg, _group_values(cfg["type"], defaults), groups, grad_dtype)
    if lines == previous:
        return previous
    for line in lines:
        log.debug("%s", line)
    return lines
