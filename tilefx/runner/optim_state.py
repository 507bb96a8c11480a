"""The optimizer state as PopTorch's `optimizer.state_dict()` shows it: the
device's tensors under PopART's names (PopTorch user guide, "Reading and
writing the optimizer state"; PopART's reserved tensor prefixes, popart
tensornames.hpp).

    ipu_state: {"Accl1___fc.weight": Tensor, ...,      # the optimizer's state tensors
                "lossScaleUpdateFactor": Tensor}        # automatic loss scaling's factor
    ipu_param: {"learningRate___specific___fc.weight": Tensor, ...,
                "lossScaling_FLOAT": Tensor}            # the variable hyper-parameters

State tensors: SGD's velocity is `Accl___`; Adam / AdamW / LAMB keep the
first and second moments in `Accl1___` / `Accl2___`; RMSprop its mean
square, mean gradient (centered) and momentum in `Accl1___` / `Accl2___` /
`Accl3___`.

Hyper-parameters, per trained weight (`___specific___<weight>`), only the
variable ones (PopART makes a tensor of a non-constant value only). SGD uses
PopART's compound scalars: without a velocity (SGD0)

    scaledLearningRate0 = lr (1 - dampening) / loss_scaling
    weightDecayScaleFactor0 = 1 - lr (1 - dampening) weight_decay

and with one (SGD1: v = scaledMomentum1 v + dampeningScaleFactor1 g +
scaledWeightDecay1 w, w -= scaledLearningRate1 v)

    scaledLearningRate1 = lr / velocity_scaling
    scaledWeightDecay1 = (1 - dampening) weight_decay velocity_scaling
    dampeningScaleFactor1 = (1 - dampening) velocity_scaling / loss_scaling
    scaledMomentum1 = momentum

The others name each attribute: learningRate, weightDecay, adamBeta1,
adamBeta2, adamEps, maxWeightNorm (LAMB), alpha, momentum (RMSprop).

tilefx keeps one value of a hyper-parameter per parameter group: a state
whose weights of one group disagree cannot be loaded (an error names them).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tilefx.errors import Error

SPECIFIC = "___specific___"
LOSS_SCALE_FACTOR = "lossScaleUpdateFactor"

# the executor's state kinds (passes/training_step.py) -> PopART's prefixes
_STATE = {
    "sgd": {"momentum_buffer": "Accl___", "scaled_velocity": "Accl___", "velocity": "Accl___",
            "folded_velocity": "Accl___"},
    "adam": {"exp_avg": "Accl1___", "exp_avg_sq": "Accl2___"},
    "rmsprop": {"square_avg": "Accl1___", "grad_avg": "Accl2___", "momentum_buffer": "Accl3___"},
}
_STATE["adamw"] = _STATE["lamb"] = _STATE["adam"]

# an attribute's PopART name (optimizers other than SGD)
_NAMES = {"lr": "learningRate", "weight_decay": "weightDecay", "beta1": "adamBeta1", "beta2": "adamBeta2",
          "eps": "adamEps", "max_weight_norm": "maxWeightNorm", "alpha": "alpha", "momentum": "momentum"}


def state_name(kind: str, key: str) -> str:
    """The PopART name of the executor's state `<weight>/<state kind>`."""
    weight, what = key.rsplit("/", 1)
    return _STATE[kind].get(what, what + "___") + weight


def loss_scaling_name(weights_half: bool) -> str:
    return "lossScaling_" + ("FLOAT16" if weights_half else "FLOAT")


def _sgd_params(g: dict, variable: set, ls: float, ls_variable: bool, has_velocity: bool) -> dict:
    lr = g["lr"]
    dm, wd = g.get("dampening", 0.0), g.get("weight_decay", 0.0)
    mm, vs = g.get("momentum", 0.0), g.get("velocity_scaling", 1.0)
    var = variable | {"lr"} | ({"loss_scaling"} if ls_variable else set())
    out = {}
    if not has_velocity:
        out["scaledLearningRate0"] = (lr * (1 - dm) / ls, {"lr", "dampening", "loss_scaling"})
        out["weightDecayScaleFactor0"] = (1 - lr * (1 - dm) * wd, {"lr", "dampening", "weight_decay"})
    else:
        out["scaledLearningRate1"] = (lr / vs, {"lr", "velocity_scaling"})
        out["scaledWeightDecay1"] = ((1 - dm) * wd * vs, {"dampening", "weight_decay", "velocity_scaling"})
        out["dampeningScaleFactor1"] = ((1 - dm) * vs / ls, {"dampening", "velocity_scaling", "loss_scaling"})
        out["scaledMomentum1"] = (mm, {"momentum"})
    return {k: v for k, (v, deps) in out.items() if deps & var}


def device_params(cfg: dict, group_of: dict[str, int], hypers: dict, has_velocity: set[str],
                  weights_half: bool) -> dict[str, torch.Tensor]:
    """The variable hyper-parameters as the device holds them (PopART names)."""
    kind = cfg["type"]
    variable = set(cfg.get("variable", ()))
    ls = float(cfg.get("loss_scaling", 1.0))
    ls_variable = "loss_scaling" in variable
    out: dict[str, torch.Tensor] = {}
    for weight, gi in sorted(group_of.items()):
        g = dict(cfg["groups"][gi])
        for k in list(g):  # the operands in use (a setOptimizer may have changed them)
            if f"{k}/{gi}" in hypers:
                g[k] = float(hypers[f"{k}/{gi}"])
        if kind == "sgd":
            values = _sgd_params(g, variable, ls, ls_variable, weight in has_velocity)
        else:
            values = {_NAMES.get(k, k): float(v) for k, v in g.items()
                      if (k == "lr" or k in variable) and k not in ("centered", "nesterov")}
        for name, v in values.items():
            out[f"{name}{SPECIFIC}{weight}"] = torch.tensor(v, dtype=torch.float32)
    if ls_variable:
        out[loss_scaling_name(weights_half)] = torch.tensor(ls, dtype=torch.float32)
    return out


def operands_from_params(cfg: dict, group_of: dict[str, int], hypers: dict, params: dict,
                         changed: set[str]) -> tuple[dict, float | None]:
    """The @update operands (`<hyper>/<group>`) and the loss scaling that
    device hyper-parameters `params` (all of device_params' names) give, of
    which the entries `changed` are new: the inverse of device_params for
    the values that changed (an unchanged compound keeps the operands it was
    made from, bit for bit), one group at a time."""
    kind = cfg["type"]
    ls_names = [k for k in params if k.startswith("lossScaling_") and k in changed]
    ls = float(params[ls_names[0]]) if ls_names else float(cfg.get("loss_scaling", 1.0))
    per_group: dict[int, dict[str, tuple[float, str]]] = {}
    news: dict[int, set[str]] = {}  # per group, the names with a new value
    for key, value in params.items():
        if SPECIFIC not in key:
            continue
        name, weight = key.split(SPECIFIC, 1)
        if weight not in group_of:
            raise Error(f"load_state_dict: ipu_param {key!r} names {weight!r}, which this model does not train")
        seen = per_group.setdefault(group_of[weight], {})
        v = float(value)
        if key in changed:
            news.setdefault(group_of[weight], set()).add(name)
        if name in seen and seen[name][0] != v:
            raise Error(f"load_state_dict: ipu_param gives the weights of parameter group {group_of[weight]} "
                        f"different values of {name} ({seen[name][1]}: {seen[name][0]}, {weight}: {v}); "
                        "tilefx keeps one value per parameter group: put weights that need their own "
                        "values in their own group")
        seen[name] = (v, weight)
    out = {}
    inverse = {v: k for k, v in _NAMES.items()}
    for gi, named in per_group.items():
        cur = {k: float(hypers[f"{k}/{gi}"]) for k in cfg["groups"][gi] if f"{k}/{gi}" in hypers}
        g = {**cfg["groups"][gi], **cur}
        vals = {n: v for n, (v, _) in named.items() if n in news.get(gi, ())}
        if not vals:
            continue
        if kind == "sgd":
            dm, vs = g.get("dampening", 0.0), g.get("velocity_scaling", 1.0)
            if "dampeningScaleFactor1" in vals and "dampening" in cur:
                dm = 1 - vals["dampeningScaleFactor1"] * ls / vs
                cur["dampening"] = dm
            if "scaledMomentum1" in vals and "momentum" in cur:
                cur["momentum"] = vals["scaledMomentum1"]
            if "scaledLearningRate1" in vals:
                cur["lr"] = vals["scaledLearningRate1"] * vs
            if "scaledWeightDecay1" in vals and "weight_decay" in cur and (1 - dm) * vs:
                cur["weight_decay"] = vals["scaledWeightDecay1"] / ((1 - dm) * vs)
            if "scaledLearningRate0" in vals and 1 - dm:
                cur["lr"] = vals["scaledLearningRate0"] * ls / (1 - dm)
            if "weightDecayScaleFactor0" in vals and "weight_decay" in cur and cur["lr"] * (1 - dm):
                cur["weight_decay"] = (1 - vals["weightDecayScaleFactor0"]) / (cur["lr"] * (1 - dm))
        else:
            for n, v in vals.items():
                attr = inverse.get(n, n)
                if attr in cur:
                    cur[attr] = v
        for k, v in cur.items():
            if math.isfinite(v):
                out[f"{k}/{gi}"] = np.asarray(v, dtype=np.float32)
    return out, (ls if ls_names else None)
