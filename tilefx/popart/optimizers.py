"""PopART's optimizers (SGD, ConstSGD, Adam) and their hyper-parameter conventions.

PopART gives hyper-parameters as `(value, isConst)` pairs in a dictionary:

    popart.SGD({"defaultLearningRate": (0.1, False), "defaultMomentum": (0.9, True)})
    popart.SGD(0.01)                          # a learning rate (variable)
    popart.ConstSGD(0.01, weight_decay=1e-4)  # every value constant
    popart.Adam({"defaultLearningRate": (1e-3, False), "defaultBeta1": (0.9, True)},
                mode=popart.AdamMode.Adam, weight_decay_mode=popart.WeightDecayMode.Decay)

`insertSpecific(weightId, {"learningRate": (v, False), ...})` gives one weight
its own values. A constant may not change in `updateOptimizerFromHost`; a
variable one changes without recompiling. A session runs them as the tilefx
optimizers of the PopTorch side (`to_tilefx`): the same `ipu.sgd` /
`ipu.adam` / `ipu.lamb` updates. Numerics: SGD with a constant momentum of 0
is PopART's SGD0, PyTorch's with the step scaled by 1 - dampening (no state);
with momentum it is PopART's (its sgd.hpp equations, `ipu.sgd`'s
`popart_state`): v = mm v + (1 - dm)(g + wd w) from v = 0 (PyTorch's first
step takes g + wd w undamped), w -= lr v, velocity scaling vs keeping v x vs,
and the state in the form `accumulatorAndMomentum` selects: Combined
(PopART's default) keeps one tensor, `Accl___<w>`, holding mm v + (1 - dm)
wd vs w after each update (the next step's momentum and weight-decay terms
folded in; so a momentum or weight decay changed by updateOptimizerFromHost
takes full effect one step late, as in PopART), Separate keeps the velocity
itself, `Accl1___<w>`;
Adam with WeightDecayMode.Decay is AdamW (decoupled decay), with
L2Regularization it is Adam; AdamMode.Lamb is LAMB; the *NoBias modes drop
the bias correction; AdamMode.AdaMax is PopART's AdaMax (the infinity norm
max(beta2 u, |g|) in place of the second moment, no bias correction of it,
w -= lr (m / (1 - beta1^t)) / (u + eps): backend/kernels/ipu.py `_adamax`).
"""

from __future__ import annotations

import enum
from typing import ClassVar

from tilefx.popart.errors import popart_exception


class AdamMode(enum.Enum):
    Adam = "Adam"
    AdamNoBias = "AdamNoBias"
    AdaMax = "AdaMax"
    Lamb = "Lamb"
    LambNoBias = "LambNoBias"


class SGDAccumulatorAndMomentum(enum.Enum):
    """How PopART's SGD keeps its momentum: one tensor with the next step's terms
    folded in (Combined, `Accl___`) or the velocity (Separate, `Accl1___`)."""

    Combined = "combined"
    Separate = "separate"


class WeightDecayMode(enum.Enum):
    Decay = "Decay"
    L2Regularization = "L2Regularization"


class OptimizerValue:
    """A hyper-parameter value and whether it is constant."""

    def __init__(self, val: float = 0.0, isConst: bool = True):
        self._val, self._const = float(val), bool(isConst)

    def val(self) -> float:
        return self._val

    def isConst(self) -> bool:
        return self._const

    def __eq__(self, other) -> bool:
        return isinstance(other, OptimizerValue) and (self._val, self._const) == (other._val, other._const)

    def __repr__(self) -> str:
        return f"OptimizerValue({self._val}, isConst={self._const})"


class Optimizer:
    """Common to PopART's optimizers: default values, per-weight values, loss scaling."""

    _keys: ClassVar[dict[str, tuple[str, float]]] = {}  # PopART key -> (tilefx name, default)
    _name = ""

    def __init__(self, values: dict | None = None):
        self._default: dict[str, OptimizerValue] = {
            k: OptimizerValue(d, True) for k, (_, d) in self._keys.items()}
        self._loss_scaling = OptimizerValue(1.0, True)
        self._specific: dict[str, dict[str, OptimizerValue]] = {}
        for key, value in (values or {}).items():
            self._set(self._default, key, value, "defaults")

    def _value(self, key: str, value) -> OptimizerValue:
        if isinstance(value, OptimizerValue):
            return value
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return OptimizerValue(float(value[0]), bool(value[1]))
        if isinstance(value, (int, float)):
            return OptimizerValue(float(value), False)
        raise popart_exception(f"{self._name}: {key} must be a (value, isConst) pair, got {value!r}")

    def _set(self, table: dict, key: str, value, where: str) -> None:
        if key == "lossScaling":
            self._loss_scaling = self._value(key, value)
            return
        name = key if key in self._keys else "default" + key[0].upper() + key[1:]
        if name not in self._keys:
            raise popart_exception(f"{self._name}: unknown hyper-parameter {key!r} in the {where} "
                                   f"(known: {', '.join(sorted(self._keys))}, lossScaling)")
        table[name] = self._value(key, value)

    def insertSpecific(self, weightId: str, values: dict) -> None:
        """Values for one weight (keys without the "default" prefix: "learningRate", ...)."""
        table = dict(self._default)
        for key, value in values.items():
            self._set(table, key, value, f"values of {weightId!r}")
        self._specific[weightId] = table

    def hasSpecific(self, weightId: str | None = None) -> bool:
        return bool(self._specific) if weightId is None else weightId in self._specific

    def getLossScalingVal(self) -> float:
        return self._loss_scaling.val()

    def lossScaling(self) -> OptimizerValue:
        return self._loss_scaling

    def learningRates(self) -> dict[str, OptimizerValue]:
        return {"default": self._default["defaultLearningRate"],
                **{w: t["defaultLearningRate"] for w, t in self._specific.items()}}

    def kind(self) -> str:
        return self._name

    # -- to the tilefx optimizers ---------------------------------------
    def tables(self, weights: list[str]) -> list[tuple[list[str], dict[str, OptimizerValue]]]:
        """The weights of each parameter group and its values: the defaults first."""
        for w in self._specific:
            if w not in weights:
                raise popart_exception(f"{self._name}: insertSpecific names {w!r}, which is not a weight "
                                       f"of the model (weights: {', '.join(weights)})")
        groups = [([w for w in weights if w not in self._specific], self._default)]
        groups += [([w], t) for w, t in self._specific.items()]
        return [g for g in groups if g[0]]

    def constants(self, weights: list[str]) -> dict[str, float]:
        """Every constant value, by group and key (what may not change after compile)."""
        out = {}
        for gi, (_, table) in enumerate(self.tables(weights)):
            for k, v in table.items():
                if v.isConst():
                    out[f"{k}/{gi}"] = v.val()
        if self._loss_scaling.isConst():
            out["lossScaling"] = self._loss_scaling.val()
        return out

    def to_tilefx(self, params: dict):
        """A tilefx optimizer over `params` (weight name -> torch parameter)."""
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay, velocity scaling."""

    _name = "SGD"
    _keys: ClassVar[dict[str, tuple[str, float]]] = {
             "defaultLearningRate": ("lr", 0.1), "defaultWeightDecay": ("weight_decay", 0.0),
             "defaultMomentum": ("momentum", 0.0), "defaultDampening": ("dampening", 0.0),
             "defaultVelocityScaling": ("velocity_scaling", 1.0), "defaultMaxWeightNorm": ("", 0.0),
             "defaultNesterov": ("nesterov", 0.0)}

    def __init__(self, params=None, clip_norm_settings=None, accumulatorAndMomentum=None,
                 accumType=None, accl1Type=None, debug_context="", nesterov=None, **kw):
        if isinstance(params, (int, float)):  # popart.SGD(learning_rate[, weight_decay])
            values = {"defaultLearningRate": (float(params), False)}
            if isinstance(clip_norm_settings, (int, float)):
                values["defaultWeightDecay"] = (float(clip_norm_settings), False)
            if kw.get("loss_scaling") is not None:
                values["lossScaling"] = (float(kw.pop("loss_scaling")), False)
            params = values
        if kw:
            raise popart_exception(f"SGD: unknown argument(s) {sorted(kw)}")
        super().__init__(params)
        if nesterov:
            self._default["defaultNesterov"] = OptimizerValue(1.0, True)
        if clip_norm_settings and not isinstance(clip_norm_settings, (int, float)):
            raise popart_exception("SGD: clip_norm_settings are not supported by tilefx")
        form = SGDAccumulatorAndMomentum.Combined if accumulatorAndMomentum is None else accumulatorAndMomentum
        if not isinstance(form, SGDAccumulatorAndMomentum):
            raise popart_exception(f"SGD: accumulatorAndMomentum must be a popart.SGDAccumulatorAndMomentum "
                                   f"(Combined or Separate), got {accumulatorAndMomentum!r}")
        self.accumulatorAndMomentum = form

    def kind(self) -> str:
        return f"{self._name}/{self.accumulatorAndMomentum.name}"

    def to_tilefx(self, params: dict):
        from tilefx.lowering.optimizers import SGD as TilefxSGD

        groups = []
        for names, t in self.tables(list(params)):
            groups.append({"params": [params[n] for n in names], "lr": _sgd0_lr(t),
                           "momentum": t["defaultMomentum"].val(),
                           "dampening": t["defaultDampening"].val(),
                           "weight_decay": t["defaultWeightDecay"].val(),
                           "nesterov": bool(t["defaultNesterov"].val())})
        d = self._default
        opt = TilefxSGD(groups, lr=_sgd0_lr(d), momentum=d["defaultMomentum"].val(),
                        dampening=d["defaultDampening"].val(), weight_decay=d["defaultWeightDecay"].val(),
                        nesterov=bool(d["defaultNesterov"].val()), loss_scaling=self.getLossScalingVal())
        opt.popart_velocity(self.accumulatorAndMomentum.value,
                            [t["defaultVelocityScaling"].val() for _, t in self.tables(list(params))])
        _mark(opt, self, {"defaultMomentum": "momentum", "defaultDampening": "dampening",
                          "defaultWeightDecay": "weight_decay", "defaultVelocityScaling": "velocity_scaling",
                          "defaultNesterov": "nesterov"})
        return opt


def _sgd0_lr(table: dict) -> float:
    """The learning rate tilefx's SGD takes for PopART's: with a constant momentum of
    0 (PopART's SGD0, no state), w -= lr (1 - dm)(g + wd w) — the dampening scales the
    step, where PyTorch ignores it without momentum — so lr (1 - dm)."""
    lr = table["defaultLearningRate"].val()
    momentum = table["defaultMomentum"]
    if momentum.isConst() and momentum.val() == 0.0:
        return lr * (1.0 - table["defaultDampening"].val())
    return lr


class ConstSGD(SGD):
    """SGD whose learning rate, weight decay and loss scaling are all constant."""

    _name = "SGD"

    def __init__(self, learning_rate: float, weight_decay: float = 0.0, loss_scaling: float = 1.0):
        super().__init__({"defaultLearningRate": (float(learning_rate), True),
                          "defaultWeightDecay": (float(weight_decay), True),
                          "lossScaling": (float(loss_scaling), True)})


class Adam(Optimizer):
    """Adam / AdamW / LAMB (AdamMode, WeightDecayMode as PopART)."""

    _name = "Adam"
    _keys: ClassVar[dict[str, tuple[str, float]]] = {
             "defaultLearningRate": ("lr", 1e-3), "defaultWeightDecay": ("weight_decay", 0.0),
             "defaultBeta1": ("beta1", 0.9), "defaultBeta2": ("beta2", 0.999),
             "defaultEps": ("eps", 1e-6), "defaultMaxWeightNorm": ("max_weight_norm", 65500.0)}

    def __init__(self, params=None, mode: AdamMode = AdamMode.Adam,
                 weight_decay_mode: WeightDecayMode = WeightDecayMode.Decay,
                 accum_type=None, accl1_type=None, accl2_type=None, clip_norm_settings=None,
                 scaled_optimizer_state: bool = False, debug_context: str = ""):
        if isinstance(params, (int, float)):
            params = {"defaultLearningRate": (float(params), False)}
        super().__init__(params)
        if not isinstance(mode, AdamMode):
            raise popart_exception(f"Adam: mode {mode!r} is not a popart.AdamMode (Adam, AdamNoBias, AdaMax, "
                                   "Lamb, LambNoBias)")
        self.mode = mode
        self.weight_decay_mode = WeightDecayMode(weight_decay_mode)

    def kind(self) -> str:
        return f"{self._name}/{self.mode.value}/{self.weight_decay_mode.value}"

    def to_tilefx(self, params: dict):
        from tilefx.lowering.optimizers import LAMB, AdamW
        from tilefx.lowering.optimizers import Adam as TilefxAdam

        lamb = self.mode in (AdamMode.Lamb, AdamMode.LambNoBias)
        bias = self.mode in (AdamMode.Adam, AdamMode.Lamb, AdamMode.AdaMax)  # AdaMax: the first moment's
        groups = []
        for names, t in self.tables(list(params)):
            g = {"params": [params[n] for n in names], "lr": t["defaultLearningRate"].val(),
                 "betas": (t["defaultBeta1"].val(), t["defaultBeta2"].val()), "eps": t["defaultEps"].val(),
                 "weight_decay": t["defaultWeightDecay"].val()}
            if lamb:
                g["max_weight_norm"] = t["defaultMaxWeightNorm"].val()
            groups.append(g)
        d = self._default
        common = {"lr": d["defaultLearningRate"].val(),
                  "betas": (d["defaultBeta1"].val(), d["defaultBeta2"].val()), "eps": d["defaultEps"].val(),
                  "weight_decay": d["defaultWeightDecay"].val(), "loss_scaling": self.getLossScalingVal(),
                  "bias_correction": bias}
        if lamb:
            opt = LAMB(groups, max_weight_norm=d["defaultMaxWeightNorm"].val(), **common)
        elif self.weight_decay_mode == WeightDecayMode.Decay:
            opt = AdamW(groups, **common)
        else:
            opt = TilefxAdam(groups, **common)
        opt.infinity_norm = self.mode == AdamMode.AdaMax
        _mark(opt, self, {"defaultBeta1": "betas", "defaultBeta2": "betas", "defaultEps": "eps",
                          "defaultWeightDecay": "weight_decay"})
        return opt


def _mark(opt, popart_opt: Optimizer, names: dict[str, str]) -> None:
    """PopART's non-constant values are tilefx's variable attributes, its constant
    ones constants (compiled in: a constant momentum of 0 keeps no state, PopART's
    SGD0), whatever the tilefx optimizer's explicit arguments made them."""
    tables = [popart_opt._default, *popart_opt._specific.values()]
    variable: dict[str, bool] = {}
    for key, attr in names.items():
        variable[attr] = variable.get(attr, False) or any(not t[key].isConst() for t in tables)
    for attr, is_variable in variable.items():
        if is_variable:
            opt.variable_attrs.markAsVariable(attr)
        else:
            opt.variable_attrs.markAsConstant(attr)
    if not popart_opt.lossScaling().isConst():
        opt.variable_attrs.markAsVariable("loss_scaling")
