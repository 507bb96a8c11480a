"""PopTorch optimizers (seeds/000 section 4.5): torch.optim subclasses that
remember which attributes were given explicitly (variable) and carry the
IPU extras (loss_scaling, velocity_scaling, accumulation types).

The compiled program never calls `step()`: `optimizer_config` reads the
hyper-parameters, and the `ipu-training-step` pass builds the update ops.
"""

from __future__ import annotations

import torch

from tilefx.api.errors import Error


class VariableAttributes:
    """Which optimizer attributes are variable (changeable after compile)."""

    def __init__(self, variable: set[str], allowed: set[str]):
        self._variable = set(variable) | {"lr"}
        self._allowed = allowed

    def markAsConstant(self, attr: str) -> None:
        self._check(attr)
        if attr == "lr":
            raise Error("lr is always variable")
        self._variable.discard(attr)

    def markAsVariable(self, attr: str) -> None:
        self._check(attr)
        self._variable.add(attr)

    def isConstant(self, attr: str) -> bool:
        return attr not in self._variable

    def _check(self, attr: str) -> None:
        if attr not in self._allowed:
            raise Error(f"unknown optimizer attribute {attr!r}; expected one of {sorted(self._allowed)}")


def _explicit(local: dict, names: list[str]) -> dict:
    return {k: local[k] for k in names if local.get(k) is not None}


class _Extras:
    def _init_extras(self, explicit: dict, extras: dict, allowed: set[str]):
        self.variable_attrs = VariableAttributes(set(explicit), allowed)
        for k, v in extras.items():
            setattr(self, k, v)


class SGD(torch.optim.SGD, _Extras):
    def __init__(self, params, lr=None, momentum=None, dampening=None, weight_decay=None,
                 nesterov=None, maximize=None, foreach=None, differentiable=None,
                 loss_scaling=None, velocity_scaling=None, use_combined_accum=None,
                 max_grad_norm=None):
        if maximize:
            raise Error("SGD: maximize=True is not supported")
        explicit = _explicit(locals(), ["lr", "momentum", "dampening", "weight_decay", "nesterov",
                                        "loss_scaling", "velocity_scaling"])
        super().__init__(params, lr=0.01 if lr is None else lr, momentum=momentum or 0.0,
                         dampening=dampening or 0.0, weight_decay=weight_decay or 0.0,
                         nesterov=bool(nesterov))
        self._init_extras(explicit, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "velocity_scaling": 1.0 if velocity_scaling is None else float(velocity_scaling),
            "use_combined_accum": use_combined_accum, "max_grad_norm": max_grad_norm,
        }, {"lr", "momentum", "dampening", "weight_decay", "nesterov", "loss_scaling",
            "velocity_scaling"})


class Adam(torch.optim.Adam, _Extras):
    _decoupled = False

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None,
                 foreach=None, maximize=None, capturable=None, differentiable=None, fused=None,
                 loss_scaling=None, accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None,
                 bias_correction=None):
        if amsgrad:
            raise Error(f"{type(self).__name__}: amsgrad=True is not supported")
        if maximize:
            raise Error(f"{type(self).__name__}: maximize=True is not supported")
        explicit = _explicit(locals(), ["lr", "betas", "eps", "weight_decay", "loss_scaling"])
        default_wd = 0.01 if self._decoupled else 0.0
        super().__init__(params, lr=1e-3 if lr is None else lr,
                         betas=(0.9, 0.999) if betas is None else betas,
                         eps=1e-8 if eps is None else eps,
                         weight_decay=default_wd if weight_decay is None else weight_decay)
        self._init_extras(explicit, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "accum_type": accum_type,
            "first_order_momentum_accum_type": first_order_momentum_accum_type,
            "second_order_momentum_accum_type": second_order_momentum_accum_type,
            "max_grad_norm": max_grad_norm,
            "bias_correction": True if bias_correction is None else bool(bias_correction),
        }, {"lr", "betas", "eps", "weight_decay", "loss_scaling"})


class AdamW(Adam):
    _decoupled = True


def optimizer_config(opt: torch.optim.Optimizer, param_names: dict[int, str]) -> tuple[dict, dict[str, int]]:
    """The optimizer as the `ipu.optimizer` dictionary and each parameter's group.

    Accepts tilefx optimizers and torch.optim SGD / Adam / AdamW.
    """
    if isinstance(opt, torch.optim.AdamW) or isinstance(opt, AdamW):
        kind = "adamw"
    elif isinstance(opt, torch.optim.Adam):
        kind = "adam"
    elif isinstance(opt, torch.optim.SGD):
        kind = "sgd"
    else:
        raise Error(f"unsupported optimizer {type(opt).__name__}: use tilefx.optim.SGD, Adam or AdamW")
    groups, group_of = [], {}
    for gi, g in enumerate(opt.param_groups):
        if g.get("amsgrad"):
            raise Error(f"{type(opt).__name__}: amsgrad=True is not supported")
        if g.get("maximize"):
            raise Error(f"{type(opt).__name__}: maximize=True is not supported")
        if kind == "sgd":
            hp = {"lr": g["lr"], "momentum": g["momentum"], "dampening": g["dampening"],
                  "weight_decay": g["weight_decay"], "nesterov": bool(g["nesterov"])}
        else:
            hp = {"lr": g["lr"], "beta1": g["betas"][0], "beta2": g["betas"][1], "eps": g["eps"],
                  "weight_decay": g["weight_decay"],
                  "bias_correction": bool(getattr(opt, "bias_correction", True))}
        groups.append(hp)
        for p in g["params"]:
            if id(p) in param_names:
                group_of[param_names[id(p)]] = gi
    return {"type": kind, "groups": groups}, group_of
