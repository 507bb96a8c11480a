"""PopTorch optimizers (PopTorch user guide, 4.5 "Optimizers"): SGD, Adam, AdamW, RMSprop and
LAMB as torch.optim subclasses with PopTorch's extras (loss_scaling,
velocity_scaling, accumulation types, max_grad_norm, ...).

The compiled program never calls `step()`: `optimizer_config` turns an
optimizer (one of these, or a torch.optim SGD / Adam / AdamW / RMSprop) into
the `ipu.optimizer` dictionary the `ipu-training-step` pass builds the update
ops from:

    {type, loss_scaling, variable: [names], groups: [{lr, momentum, ...}],
     max_grad_norm?, accum_type?, velocity_accum_type? (SGD),
     first_order_momentum_accum_type?, second_order_momentum_accum_type?,
     use_combined_accum?, bias_correction?, use_tf_variant?, infinity_norm?, popart_sgd?}

(`infinity_norm`: an Adam / AdamW whose `infinity_norm` attribute is set,
PopART's AdaMax, which tilefx.popart's Adam builds; `popart_sgd`: an SGD
whose `popart_sgd` attribute is "combined" or "separate", PopART's SGD
equations and state, which tilefx.popart's SGD builds; no PopTorch
arguments.)

(accumulation types as "float16" / "float32"; absent for torch.optim
optimizers: the state then has the weight's type).

Constant versus variable (4.5.4): the hyper-parameters in `variable` become
runtime operands of the update ops (`@update` arguments `<name>/<group>`, or
`max_grad_norm`), the others are compiled in as properties. For tilefx
optimizers the arguments given explicitly are variable (`variable_attrs`
overrides); for torch.optim ones those left at their default are constant.
`lr` is always variable.

Optimizer state (4.5.5): `state_dict()` holds torch's part (`state`,
`param_groups`) plus the device's state, as PopTorch shows it:

    ipu_optimizer: "adam"                       # which update the state belongs to
    ipu_step: 5                                  # weight updates done so far
    ipu_state: {"Accl1___fc1.weight": Tensor, "Accl2___fc1.weight": Tensor, ...}
    ipu_param: {"learningRate___specific___fc1.weight": Tensor, ...}

(PopART's tensor names: runner/optim_state.py; `ipu_state` and `ipu_param`
are None before the model is compiled.) `load_state_dict` writes the
tensors and hyper-parameters it holds into the attached, compiled
trainingModel (the others keep the device's values), or keeps them until a
trainingModel using this optimizer compiles; `state_dict()` returns the
loaded state itself until the model runs again.
"""

from __future__ import annotations

import inspect
import logging
import math
import weakref
from typing import Any

import torch

from tilefx.errors import Error, error_also
from tilefx.lowering.no_compiler import without_compiler
from tilefx.passes.training_step import BOOL_HYPERS, HYPERS

log = logging.getLogger("tilefx")

_DTYPES = {torch.float16: "float16", torch.half: "float16", torch.float32: "float32"}

# IR names of each optimizer's group hyper-parameters (lr aside), in operand order
GROUP_HYPERS = HYPERS
# attributes fixed at compile time whatever the variable marks say: they
# change the program's structure (state tensors, their types, the variant)
STRUCTURAL = ("use_combined_accum", "accum_type", "velocity_accum_type", "first_order_momentum_accum_type",
              "second_order_momentum_accum_type", "bias_correction", "use_tf_variant", "infinity_norm",
              "popart_sgd")


class VariableAttributes:
    """Which optimizer attributes are variable (changeable after compile).
    The two sets keep PopTorch's attribute names (`_variable_attributes`,
    `_allowed_attributes`), which PopTorch programs read and assign."""

    def __init__(self, variable: set[str], allowed: set[str]):
        self._variable_attributes = (set(variable) & set(allowed)) | {"lr"}
        self._allowed_attributes = set(allowed)

    def markAsConstant(self, attr: str) -> None:
        self._check(attr)
        if attr == "lr":
            raise Error("lr is always variable")
        self._variable_attributes.discard(attr)

    def markAsVariable(self, attr: str) -> None:
        self._check(attr)
        self._variable_attributes.add(attr)

    def isConstant(self, attr: str) -> bool:
        return attr not in self._variable_attributes

    def _check(self, attr: str) -> None:
        if attr not in self._allowed_attributes:
            raise Error(f"unknown optimizer attribute {attr!r}; expected one of "
                        f"{sorted(self._allowed_attributes)}")


def _accum_dtype(name: str, value) -> str | None:
    if value is None:
        return None
    if value not in _DTYPES:
        raise Error(f"{name} must be torch.float16 or torch.float32, got {value}")
    return _DTYPES[value]


class Optimizer:
    """The base class of every tilefx (poptorch.optim) optimizer: what each
    adds to its torch.optim base (PopTorch user guide, "Optimizers")."""

    _kind = ""
    _child_vars = ("loss_scaling", "max_grad_norm")  # optimizer-level attributes that may be variable

    def _init_tilefx(self, local: dict, extras: dict) -> None:
        for k in ("amsgrad", "maximize"):
            if local.get(k):
                raise Error(f"{type(self).__name__}: {k}=True is not supported")
        explicit = {k for k, v in local.items() if v is not None and k not in ("self", "params", "__class__")}
        self.variable_attrs = VariableAttributes(explicit, set(self.defaults) | set(self._child_vars))
        for k, v in extras.items():
            setattr(self, k, v)
        self._tilefx_executor = None
        self._tilefx_pending = None
        # the host's copy of the device's state: (the model's update count then, the state
        # read or written), as PopTorch's cached state dict, valid until the model updates
        self._tilefx_loaded = None

    # -- state ------------------------------------------------------------
    def _executor(self):
        return getattr(self, "_tilefx_executor", None)

    def state_dict(self) -> dict[str, Any]:
        """torch's state dict (hyper-parameters, for LR schedulers) plus the
        device's state: see the module docstring."""
        sd = torch.optim.Optimizer.state_dict(self)
        ex = self._executor()
        ipu = read_device_state(self) if ex is not None and ex.runs_optimizer(self) else None
        if ipu is None:
            ipu = self._tilefx_pending
        sd["ipu_optimizer"] = self._kind
        sd["ipu_step"] = None if ipu is None or ipu["step"] is None else int(ipu["step"])
        for key in ("ipu_state", "ipu_param"):
            sd[key] = None if ipu is None else {k: t.clone() for k, t in ipu[key].items()}
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from `state_dict()`: hyper-parameters into the groups,
        the device's state into the compiled trainingModel (now, or when one
        compiles)."""
        if not isinstance(state_dict, dict) or "ipu_state" not in state_dict:
            raise Error("Only IPU optimizer states can be loaded onto the IPU. (load_state_dict takes "
                        "the state_dict() of a poptorch.optim optimizer; a torch.optim one's has "
                        "another structure)")
        kind = state_dict.get("ipu_optimizer")
        if kind is not None and kind != self._kind:
            raise Error(f"load_state_dict: the state belongs to a {kind} optimizer, this is {self._kind}")
        torch.optim.Optimizer.load_state_dict(
            self, {"state": state_dict.get("state", {}), "param_groups": state_dict["param_groups"]})
        if state_dict["ipu_state"] is None and state_dict.get("ipu_param") is None:
            self._tilefx_pending = None
            return
        for key in ("ipu_state", "ipu_param"):
            part = state_dict.get(key) or {}
            if not isinstance(part, dict) or not all(isinstance(k, str) for k in part):
                raise Error(f"load_state_dict: {key} must map PopART tensor names to tensors")
        step = state_dict.get("ipu_step")
        pending = {"step": None if step is None else int(step),
                   **{key: {k: torch.as_tensor(t).detach().clone() for k, t in (state_dict.get(key) or {}).items()}
                      for key in ("ipu_state", "ipu_param")}}
        ex = self._executor()
        step = ex.write_optimizer_state(self, pending) if ex is not None else None
        if step is not None:
            shown = {**pending, "step": step}
            self._tilefx_loaded = (ex.optimizer_state_writes(), shown)
            self._tilefx_pending = None
        else:
            self._tilefx_pending = pending

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_tilefx_executor"] = None
        state["_tilefx_loaded"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)


class SGD(Optimizer, torch.optim.SGD):
    """torch.optim.SGD with PopTorch's separate (default) and combined variants.

    Both equal torch.optim.SGD numerically in fp32. The separate variant keeps
    the velocity in `velocity_accum_type`; the combined one keeps a single
    tensor holding velocity x `velocity_scaling` (a group attribute)."""

    _kind = "sgd"

    def __init__(self, params, lr=None, momentum=None, dampening=None, weight_decay=None,
                 nesterov=None, maximize=None, foreach=None, differentiable=None,
                 loss_scaling=None, velocity_scaling=None, use_combined_accum=None,
                 accum_type=None, velocity_accum_type=None, max_grad_norm=None):
        local = dict(locals())
        if maximize:
            raise Error("SGD: maximize=True is not supported")
        with without_compiler():  # torch's add_param_group would import torch._dynamo (~2 s)
            super().__init__(params, lr=0.01 if lr is None else lr, momentum=momentum or 0.0,
                             dampening=dampening or 0.0, weight_decay=weight_decay or 0.0,
                             nesterov=bool(nesterov))
        combined = bool(use_combined_accum)
        if velocity_scaling is not None and not combined:
            log.warning("SGD: velocity_scaling is ignored by the separate variant (use_combined_accum=False)")
        if combined:
            vs = 1.0 if velocity_scaling is None else float(velocity_scaling)
            self.defaults["velocity_scaling"] = vs
            for g in self.param_groups:
                g.setdefault("velocity_scaling", vs)
        self._init_tilefx(local, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "use_combined_accum": combined,
            "popart_sgd": None,  # PopART's SGD state form (tilefx.popart sets it: `popart_velocity`)
            "accum_type": accum_type,
            "velocity_accum_type": velocity_accum_type,
            "max_grad_norm": _max_norm(max_grad_norm),
        })


    def popart_velocity(self, form: str, velocity_scaling: list[float]) -> None:
        """Make this PopART's SGD (tilefx.popart's SGD calls it): its equations and
        state in `form` ("combined" or "separate", PopART's SGDAccumulatorAndMomentum),
        each group's velocity scaling in `velocity_scaling` (both forms use it)."""
        self.popart_sgd = form
        self.defaults["velocity_scaling"] = float(velocity_scaling[0])
        for g, vs in zip(self.param_groups, velocity_scaling):
            g["velocity_scaling"] = float(vs)
        self.variable_attrs._allowed_attributes.add("velocity_scaling")


class Adam(Optimizer, torch.optim.Adam):
    """torch.optim.Adam (amsgrad is not supported)."""

    _kind = "adam"
    _default_wd = 0.0

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None,
                 foreach=None, maximize=None, capturable=None, differentiable=None, fused=None,
                 loss_scaling=None, accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, max_grad_norm=None, bias_correction=None):
        local = dict(locals())
        self._adam_init(local, params, lr, betas, eps, weight_decay, amsgrad, maximize, loss_scaling,
                        bias_correction, accum_type, first_order_momentum_accum_type,
                        second_order_momentum_accum_type, max_grad_norm)

    def _adam_init(self, local, params, lr, betas, eps, weight_decay, amsgrad, maximize, loss_scaling,
                   bias_correction, accum_type, first, second, max_grad_norm):
        if amsgrad:
            raise Error(f"{type(self).__name__}: amsgrad=True is not supported")
        if maximize:
            raise Error(f"{type(self).__name__}: maximize=True is not supported")
        base = torch.optim.AdamW if self._kind == "adamw" else torch.optim.Adam
        with without_compiler():  # torch's add_param_group would import torch._dynamo (~2 s)
            base.__init__(self, params, lr=1e-3 if lr is None else lr,
                          betas=(0.9, 0.999) if betas is None else betas,
                          eps=1e-8 if eps is None else eps,
                          weight_decay=self._default_wd if weight_decay is None else weight_decay)
        self._init_tilefx(local, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "bias_correction": True if bias_correction is None else bool(bias_correction),
            "infinity_norm": False,  # PopART's AdaMax (tilefx.popart sets it)
            "accum_type": accum_type,
            "first_order_momentum_accum_type": first,
            "second_order_momentum_accum_type": second,
            "max_grad_norm": _max_norm(max_grad_norm),
        })


class AdamW(Adam, torch.optim.AdamW):
    """torch.optim.AdamW (decoupled weight decay, default 0.01), `bias_correction`."""

    _kind = "adamw"
    _default_wd = 0.01

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None,
                 maximize=None, foreach=None, capturable=None, differentiable=None, fused=None,
                 loss_scaling=None, bias_correction=None, accum_type=None,
                 first_order_momentum_accum_type=None, second_order_momentum_accum_type=None,
                 max_grad_norm=None):
        local = dict(locals())
        self._adam_init(local, params, lr, betas, eps, weight_decay, amsgrad, maximize, loss_scaling,
                        bias_correction, accum_type, first_order_momentum_accum_type,
                        second_order_momentum_accum_type, max_grad_norm)


class RMSprop(Optimizer, torch.optim.RMSprop):
    """torch.optim.RMSprop; `use_tf_variant=True` gives TensorFlow's RMSprop
    (PopART's definition: square_avg starts at ones, eps inside the square
    root, lr accumulated in the momentum buffer)."""

    _kind = "rmsprop"

    def __init__(self, params, lr=None, alpha=None, eps=None, weight_decay=None, momentum=None,
                 centered=None, foreach=None, maximize=None, differentiable=None,
                 loss_scaling=None, accum_type=None, first_order_momentum_accum_type=None,
                 second_order_momentum_accum_type=None, use_tf_variant=None, max_grad_norm=None):
        local = dict(locals())
        if maximize:
            raise Error("RMSprop: maximize=True is not supported")
        with without_compiler():  # torch's add_param_group would import torch._dynamo (~2 s)
            super().__init__(params, lr=1e-2 if lr is None else lr, alpha=0.99 if alpha is None else alpha,
                             eps=1e-8 if eps is None else eps, weight_decay=weight_decay or 0.0,
                             momentum=momentum or 0.0, centered=bool(centered))
        self._init_tilefx(local, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "accum_type": accum_type,
            "first_order_momentum_accum_type": first_order_momentum_accum_type,
            "second_order_momentum_accum_type": second_order_momentum_accum_type,
            "use_tf_variant": bool(use_tf_variant),
            "max_grad_norm": _max_norm(max_grad_norm),
        })


class LAMB(Optimizer, torch.optim.Optimizer):
    """Layer-wise Adaptive Moments (You et al. 2019, "Large Batch Optimization
    for Deep Learning"), as PopTorch defines it:

        m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
        u = (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps) + weight_decay * w
        r1 = min(|w|, max_weight_norm);  r2 = |u|
        w -= lr * (r1 / r2 if |w| > 0 and r2 > 0 else 1) * u

    (no bias correction terms with `bias_correction=False`)."""

    _kind = "lamb"

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None,
                 bias_correction=None, loss_scaling=None, max_weight_norm=None, accum_type=None,
                 first_order_momentum_accum_type=None, second_order_momentum_accum_type=None,
                 max_grad_norm=None):
        local = dict(locals())
        defaults = dict(lr=1e-3 if lr is None else lr, betas=(0.9, 0.999) if betas is None else betas,
                        eps=1e-8 if eps is None else eps,
                        weight_decay=1e-2 if weight_decay is None else weight_decay,
                        max_weight_norm=65500.0 if max_weight_norm is None else float(max_weight_norm))
        with without_compiler():  # torch's add_param_group would import torch._dynamo (~2 s)
            torch.optim.Optimizer.__init__(self, params, defaults)
        self._init_tilefx(local, {
            "loss_scaling": 1.0 if loss_scaling is None else float(loss_scaling),
            "bias_correction": True if bias_correction is None else bool(bias_correction),
            "accum_type": accum_type,
            "first_order_momentum_accum_type": first_order_momentum_accum_type,
            "second_order_momentum_accum_type": second_order_momentum_accum_type,
            "max_grad_norm": _max_norm(max_grad_norm),
        })

    @property
    def max_weight_norm(self) -> float:
        """PopTorch's optimizer attribute (`optimizer.max_weight_norm = 100.0`
        then `setOptimizer`): one value, kept in every parameter group, where
        the update reads it; None disables the clip (65500, fp16's largest)."""
        return self.defaults["max_weight_norm"]

    @max_weight_norm.setter
    def max_weight_norm(self, value) -> None:
        value = 65500.0 if value is None else float(value)
        self.defaults["max_weight_norm"] = value
        for group in self.param_groups:
            group["max_weight_norm"] = value

    @torch.no_grad()
    def step(self, closure=None):
        """One LAMB update of the parameters on the host, from their `.grad`
        (the equations above, as the compiled update computes them): the
        reference a trainingModel's LAMB is checked against, as PopTorch's
        LAMB.step is."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            eps, wd, max_norm = group["eps"], group["weight_decay"], group["max_weight_norm"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    st["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                st["step"] += 1
                t = st["step"]
                g = p.grad.float()
                m, v = st["exp_avg"], st["exp_avg_sq"]
                m.mul_(beta1).add_(g, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                bc1, bc2 = (1.0 - beta1 ** t, 1.0 - beta2 ** t) if self.bias_correction else (1.0, 1.0)
                w = p.float()
                u = (m / bc1) / (v.sqrt() / bc2 ** 0.5 + eps)
                if wd:
                    u = u + wd * w
                w_norm, r2 = float(w.norm()), float(u.norm())
                trust = 1.0 if w_norm == 0.0 or r2 == 0.0 else min(w_norm, max_norm) / r2
                p.copy_((w - group["lr"] * trust * u).to(p.dtype))
        return loss


def _max_norm(value) -> float | None:
    if value is None or math.isinf(float(value)):
        return None
    if float(value) <= 0:
        raise Error(f"max_grad_norm must be > 0, got {value}")
    return float(value)


# -- optimizer -> ipu.optimizer ---------------------------------------------
def _kind_of(opt: torch.optim.Optimizer) -> str:
    if isinstance(opt, Optimizer):
        return opt._kind
    if isinstance(opt, torch.optim.AdamW):
        return "adamw"
    if isinstance(opt, torch.optim.Adam):
        return "adamw" if opt.defaults.get("decoupled_weight_decay") else "adam"
    if isinstance(opt, torch.optim.SGD):
        return "sgd"
    if isinstance(opt, torch.optim.RMSprop):
        return "rmsprop"
    raise Error(f"unsupported optimizer {type(opt).__name__}: use tilefx.optim.SGD, Adam, AdamW, "
                "RMSprop or LAMB (or torch.optim SGD, Adam, AdamW, RMSprop)")


_warned_subclasses: weakref.WeakSet = weakref.WeakSet()  # optimizers already warned about


def _builtin_types() -> tuple[type, ...]:
    return (SGD, Adam, AdamW, RMSprop, LAMB, torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW,
            torch.optim.RMSprop)


def warn_if_subclassed(opt: torch.optim.Optimizer) -> None:
    """PopTorch user guide, 4.5 "Optimizers": "Subclassing a built-in optimizer will generate a warning":
    the update is compiled from the hyper-parameters of the built-in it derives
    from, so whatever the subclass adds (a custom step() above all) does not run.
    Once per optimizer object."""
    builtins = _builtin_types()
    cls = type(opt)
    if cls in builtins or opt in _warned_subclasses:
        return
    base = next((c for c in cls.__mro__ if c in builtins), None)
    if base is None:
        return
    _warned_subclasses.add(opt)
    # torch wraps `step` in its profiling hook (in the subclass too): compare the functions inside
    builtin_steps = {inspect.unwrap(b.step) for b in builtins}
    custom_step = inspect.unwrap(cls.step) not in builtin_steps
    where = "poptorch.optim" if issubclass(base, Optimizer) else "torch.optim"
    log.warning("%s subclasses the built-in optimizer %s.%s: Poptorch does not run Python optimizer code "
                "directly: tilefx (as PopTorch) uses its own implementation of %s, so custom behaviour in "
                "the subclass is unlikely to take effect, "
                "other than setting the existing attributes%s", cls.__qualname__, where,
                base.__name__, base.__name__,
                "; its custom step() is not used (the update compiled into the program replaces it)"
                if custom_step else "")


def _ir_names(attr: str) -> tuple[str, ...]:
    """IR hyper-parameter names of an optimizer attribute (`betas` -> beta1, beta2)."""
    return ("beta1", "beta2") if attr == "betas" else (attr,)


def _group_values(kind: str, g: dict) -> dict[str, Any]:
    hp: dict[str, Any] = {"lr": float(g["lr"])}
    for k, v in g.items():
        if k == "betas":
            hp["beta1"], hp["beta2"] = float(v[0]), float(v[1])
        elif k in GROUP_HYPERS[kind]:
            hp[k] = bool(v) if k in BOOL_HYPERS else float(v)
    return hp


def _torch_variable(opt: torch.optim.Optimizer, kind: str) -> set[str]:
    """torch.optim optimizers: attributes left at their constructor default are constant."""
    sig = inspect.signature(type(opt).__init__).parameters
    variable = set()
    for attr, p in sig.items():
        if p.default is inspect.Parameter.empty or attr not in opt.defaults:
            continue
        if not any(attr in g and g[attr] != p.default for g in opt.param_groups):
            continue
        variable.update(n for n in _ir_names(attr) if n in GROUP_HYPERS[kind])
    return variable


def optimizer_config(opt: torch.optim.Optimizer, param_names: dict[int, str]) -> tuple[dict, dict[str, int]]:
    """The optimizer as the `ipu.optimizer` dictionary and each parameter's group.

    Accepts tilefx optimizers and torch.optim SGD / Adam / AdamW / RMSprop.
    """
    kind = _kind_of(opt)
    warn_if_subclassed(opt)
    groups, group_of = [], {}
    for gi, g in enumerate(opt.param_groups):
        for k in ("amsgrad", "maximize"):
            if g.get(k):
                raise Error(f"{type(opt).__name__}: {k}=True is not supported")
        groups.append(_group_values(kind, g))
        for p in g["params"]:
            if id(p) in param_names:
                group_of[param_names[id(p)]] = gi
    cfg: dict[str, Any] = {"type": kind, "loss_scaling": float(getattr(opt, "loss_scaling", 1.0) or 1.0)}
    if isinstance(opt, Optimizer):
        va = opt.variable_attrs
        variable = {"lr"} | {n for a in va._variable_attributes for n in _ir_names(a)}
        combined = kind == "sgd" and bool(opt.use_combined_accum)
        if kind == "sgd":
            cfg["use_combined_accum"] = combined
            if getattr(opt, "popart_sgd", None):
                cfg["popart_sgd"] = opt.popart_sgd
        if kind in ("adam", "adamw", "lamb"):
            cfg["bias_correction"] = bool(opt.bias_correction)
        if kind in ("adam", "adamw") and getattr(opt, "infinity_norm", False):
            cfg["infinity_norm"] = True
        if kind == "rmsprop":
            cfg["use_tf_variant"] = bool(opt.use_tf_variant)
        # accumulators: the gradient's type unless given; state: float32 unless given
        names = ["accum_type"] + (["velocity_accum_type"] if kind == "sgd" else
                                  ["first_order_momentum_accum_type", "second_order_momentum_accum_type"])
        for name in names:
            dtype = _accum_dtype(name, getattr(opt, name))
            if dtype is not None or name != "accum_type":
                cfg[name] = dtype or "float32"
        if opt.max_grad_norm is not None:
            cfg["max_grad_norm"] = float(opt.max_grad_norm)
        if not combined and not cfg.get("popart_sgd"):
            variable.discard("velocity_scaling")
            for g in groups:
                g.pop("velocity_scaling", None)
    else:
        variable = {"lr"} | _torch_variable(opt, kind)
    cfg["variable"] = sorted(v for v in variable
                             if v in GROUP_HYPERS[kind] or v in ("lr", "loss_scaling", "max_grad_norm"))
    cfg["groups"] = groups
    return cfg, group_of


# an optimizer's own attributes that are torch's machinery, not hyper-parameters
_MACHINERY = frozenset({"defaults", "state", "param_groups", "variable_attrs"})


def attribute_names(opt: torch.optim.Optimizer) -> tuple[frozenset, frozenset]:
    """The names of `opt`'s group attributes (its defaults' and every
    group's keys) and of its own attributes: what a compiled model knows."""
    groups = set(opt.defaults)
    for g in opt.param_groups:
        groups.update(k for k in g if k != "params")
    own = {k for k in vars(opt) if k not in _MACHINERY and not k.startswith("_")}
    return frozenset(groups), frozenset(own)


def warn_unexpected_attributes(opt: torch.optim.Optimizer, known: tuple[frozenset, frozenset],
                               warned: set, relaxed: bool = False) -> None:
    """setOptimizer after compile: warn (once per message) of attributes the
    compiled model did not have and ignores, in PopTorch's words ("Ignoring
    unexpected group 0 attribute in SGD optimizer: ['loss_scaling']": a
    group's loss_scaling, which is an optimizer attribute, does nothing)."""
    groups, own = known
    kind = type(opt).__name__
    messages = []
    for gi, g in enumerate(opt.param_groups):
        if extra := sorted(k for k in g if k != "params" and k not in groups):
            messages.append(f"Ignoring unexpected group {gi} attribute in {kind} optimizer: {extra}")
    if extra := sorted(attribute_names(opt)[1] - own):
        messages.append(f"Ignoring unexpected optimizer attribute in {kind} optimizer: {extra}")
    for m in messages:
        if m not in warned:
            warned.add(m)
            # Options.relaxOptimizerAttributesChecks: a debug message instead of a warning
            log.log(logging.DEBUG if relaxed else logging.WARNING, m)


def hyper_values(cfg: dict) -> dict[str, Any]:
    """The runtime operands of @update (`tilefx.hyper` names) from a config."""
    import numpy as np

    variable = set(cfg.get("variable", ()))
    out = {}
    for gi, g in enumerate(cfg["groups"]):
        for k, v in g.items():
            if k == "lr" or k in variable:
                out[f"{k}/{gi}"] = np.asarray(float(v), dtype=np.float32)
    if "max_grad_norm" in variable:
        out["max_grad_norm"] = np.asarray(cfg.get("max_grad_norm", math.inf), dtype=np.float32)
    return out


def _how_to_make_variable(opt: torch.optim.Optimizer, attr: str) -> str:
    """The advice of a constant-attribute error: a poptorch.optim optimizer
    marks it variable; a torch.optim one has no way to (PopTorch user guide, 4.5.4 "Constant attributes")."""
    if isinstance(opt, Optimizer):
        return f"mark it variable with optimizer.variable_attrs.markAsVariable({attr!r}) before compiling"
    return (f"a torch.optim optimizer makes variable only the attributes its constructor was given "
            f"a non-default value for: pass {attr} explicitly, or use poptorch.optim."
            f"{type(opt).__name__} and its variable_attrs.markAsVariable({attr!r}), before compiling")


def check_unchanged_constants(compiled: dict, new: dict, compiled_groups: dict[str, int],
                              new_groups: dict[str, int], opt: torch.optim.Optimizer,
                              grad_dtype: str | None = "float32") -> None:
    """setOptimizer(opt) after compile: everything compiled in as a constant must be unchanged.
    A torch.optim optimizer (either side) is PopTorch's of the same kind with its
    structure's defaults (torch's update, state in the gradients' type `grad_dtype`)."""
    # a structural key one side lacks is the torch.optim optimizer's (or the
    # unset accum_type's: the gradients' type) on that side
    state = grad_dtype or "float32"
    torch_defaults = {"use_combined_accum": False, "accum_type": state, "velocity_accum_type": state,
                      "first_order_momentum_accum_type": state, "second_order_momentum_accum_type": state,
                      "bias_correction": True, "use_tf_variant": False}
    compiled, new = ({**{k: v for k, v in torch_defaults.items() if k in other}, **cfg}
                     for cfg, other in ((compiled, new), (new, compiled)))
    if compiled["type"] != new["type"]:
        raise Error(f"setOptimizer: cannot change the optimizer type from {compiled['type']} to {new['type']}")
    if len(compiled["groups"]) != len(new["groups"]) or compiled_groups != new_groups:
        raise Error("setOptimizer: the parameter groups differ from the compiled ones "
                    f"({len(compiled['groups'])} groups at compile, {len(new['groups'])} now)")
    for key in STRUCTURAL:
        if compiled.get(key) != new.get(key):
            # a ValueError too, as PopTorch's
            raise error_also(ValueError)(f"setOptimizer: the model is already compiled with {key} "
                                         f"{compiled.get(key)}: it cannot change to {new.get(key)} "
                                         "after compile; wrap the model again")
    variable = set(compiled.get("variable", ()))
    for key in ("loss_scaling", "max_grad_norm"):
        if key not in variable and compiled.get(key) != new.get(key):
            raise Error(f"setOptimizer: {key} is a constant of the compiled model "
                        f"({compiled.get(key)} -> {new.get(key)}); {_how_to_make_variable(opt, key)}")
    for gi, (old, cur) in enumerate(zip(compiled["groups"], new["groups"])):
        for key, value in old.items():
            if key != "lr" and key not in variable and cur.get(key) != value:
                attr = "betas" if key in ("beta1", "beta2") else key
                raise Error(f"setOptimizer: {attr} is a constant of the compiled model "
                            f"(group {gi}: {key} {value} -> {cur.get(key)}); "
                            f"{_how_to_make_variable(opt, attr)}")


def attach(opt: torch.optim.Optimizer, executor) -> None:
    """Let a tilefx optimizer's state_dict / load_state_dict reach `executor`."""
    if isinstance(opt, Optimizer):
        opt._tilefx_executor = executor


def read_device_state(opt: Optimizer) -> dict | None:
    """The attached model's optimizer state as `opt.state_dict()` shows it:
    read from the device once per change (PopTorch's words at DEBUG for the
    read and for the cached copy), None before the model compiled."""
    ex = opt._executor()
    loaded = getattr(opt, "_tilefx_loaded", None)
    if loaded is not None and loaded[0] == ex.optimizer_state_writes():
        log.debug("Using cached optimiser state dict")  # PopTorch's words
        return loaded[1]
    ipu = ex.device_optimizer_state()
    if ipu is not None:
        log.debug("Writing optimiser state tensors from IPU to host.")  # PopTorch's words
        opt._tilefx_loaded = (ex.optimizer_state_writes(), ipu)
    return ipu


def take_pending_state(opt: torch.optim.Optimizer) -> dict | None:
    """The state loaded into `opt` before it was compiled (consumed)."""
    pending = getattr(opt, "_tilefx_pending", None)
    if pending is not None:
        opt._tilefx_pending = None
    return pending
