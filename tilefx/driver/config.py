"""`CompileConfig`: everything the graph passes, the machine model and the
executor read from a surface's options, as one typed, frozen value.

Each surface turns its own options into one (PopTorch's `Options` in
`api/compile_config.py`, PopART's `SessionOptions` in `popart/session.py`,
a JSON file of these field names for `tilefx-run --config`), and
`tilefx.driver.compile` reads nothing else. Recomputation is not a field:
its checkpoints are ops of the traced IR (`ipu.recomputation_checkpoint`)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from tilefx import limits
from tilefx.backend.locations import MIN_ELEMENTS_OFF_CHIP, MIN_ELEMENTS_SHARDED, Locations, TensorLocation
from tilefx.backend.machine import Machine
from tilefx.backend.machine import machine as machine_named
from tilefx.dialects.ipu import is_proportion
from tilefx.errors import Error

# no strategy set: PopTorch's default, pipelined, which Block(ipu_id=...) then
# switches on without the user asking (ipu-assign-stages says so in its errors)
DEFAULT_STRATEGY: Mapping[str, Any] = MappingProxyType(
    {"kind": "pipelined", "stages": [], "auto_stage": "same_as_ipu", "implicit": True})

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class CompileConfig:
    """What one compilation reads (the defaults are PopTorch's)."""

    training: bool = False
    # the IPU: a preset's name (backend/machine.py PRESETS) or a Machine
    machine: str | Machine = "mk2"
    # the execution strategy as ipu-assign-stages reads it (the `ipu.strategy`
    # module attribute: kind, stages, phases, auto, schedule)
    strategy: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_STRATEGY)
    # the phased strategies' tensor liveness (poptorch.Liveness's name)
    liveness: str = "AlwaysLive"
    # per-IPU available memory proportion, "ipuN" -> (0, 1]
    available_memory_proportion: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    # precision policy
    autocast: bool = True
    autocast_policy: Mapping[str, list] | None = None  # fp16/fp32/promote/demote op sets
    downcast_half: bool = False  # HalfFloatCastingBehavior.FloatDowncastToHalf
    half_partials: bool = False  # float16 partials of products (Precision.setPartialsType)
    stochastic_rounding: bool = False
    # the optimizer and its attributes (api/optim.py `optimizer_config`, with
    # `grad_scale`), and each trained weight's parameter group
    optimizer: Mapping[str, Any] | None = None
    optimizer_groups: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    automatic_loss_scaling: bool = False
    loss_scaled: bool = False  # a loss scale other than 1, or a variable one
    # the host loop's factors
    device_iterations: int = 1
    replication_factor: int = 1
    gradient_accumulation: int = 1
    processes: int = 1
    process_id: int = 0
    # whether the IPUs are reserved on a machine (PopTorch's count rule holds),
    # and whether a count that breaks it is rounded up instead
    reserve_ipus: bool = True
    auto_round_num_ipus: bool = False
    # where tensors live (resolved TensorLocations); `optimizer_location_set`:
    # the optimizer state's location was given (ipu-auto-stage is told it)
    locations: Locations = Locations()
    optimizer_location_set: bool = False
    host_io: bool = True  # False: synthetic data, nothing streams to or from the host
    decompose_grad_sum: bool = False  # PopART's session option of that name
    seed: int | None = None

    def __post_init__(self) -> None:
        # read-only views of copies: a config is not changed through what made it
        for name in ("strategy", "available_memory_proportion", "autocast_policy", "optimizer",
                     "optimizer_groups"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(v)))
        for name in ("device_iterations", "replication_factor", "gradient_accumulation", "processes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise Error(f"CompileConfig.{name} must be a positive int, got {v!r}")
        if not 0 <= self.process_id < self.processes:
            raise Error(f"CompileConfig.process_id must be in [0, processes), got {self.process_id!r}")
        machine_named(self.machine)  # a preset's name or a Machine, else an Error naming the presets

    @property
    def accumulate(self) -> bool:
        """Whether gradients are accumulated before the update (several
        micro-batches or replicas)."""
        return self.training and (self.gradient_accumulation > 1 or self.replication_factor > 1)

    @property
    def micro_batches(self) -> int:
        """The micro-batches of one weight update (training) or one call."""
        return self.gradient_accumulation if self.training else self.device_iterations

    def replace(self, **changes) -> CompileConfig:
        return dataclasses.replace(self, **changes)


# -- a JSON file of CompileConfig fields (tilefx-run --config) ---------------

def _location(data, where: str) -> TensorLocation:
    if not isinstance(data, dict) or set(data) - {"on_chip", "sharded", "min_elements_off_chip",
                                                  "min_elements_sharded"}:
        raise Error(f"{where}: expected an object with on_chip, sharded, min_elements_off_chip and "
                    f"min_elements_sharded, got {data!r}")
    return TensorLocation(on_chip=_typed(data.get("on_chip", True), bool, f"{where}.on_chip"),
                          sharded=_typed(data.get("sharded", False), bool, f"{where}.sharded"),
                          min_elements_off_chip=_typed(data.get("min_elements_off_chip", MIN_ELEMENTS_OFF_CHIP),
                                                       int, f"{where}.min_elements_off_chip"),
                          min_elements_sharded=_typed(data.get("min_elements_sharded", MIN_ELEMENTS_SHARDED),
                                                      int, f"{where}.min_elements_sharded"))


def _typed(value, kind: type, where: str):
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
        raise Error(f"{where} must be a {kind.__name__}, got {value!r}")
    if kind is float and not math.isfinite(value):
        raise Error(f"{where} must be finite, got {value!r}")
    return value


_FIELDS = {f.name: f.type for f in dataclasses.fields(CompileConfig)}
_PLAIN = {"training": bool, "liveness": str, "autocast": bool, "downcast_half": bool, "half_partials": bool,
          "stochastic_rounding": bool, "automatic_loss_scaling": bool, "loss_scaled": bool,
          "device_iterations": int, "replication_factor": int, "gradient_accumulation": int, "processes": int,
          "process_id": int, "reserve_ipus": bool, "auto_round_num_ipus": bool,
          "optimizer_location_set": bool, "host_io": bool, "decompose_grad_sum": bool}


def config_from_json(data: str | bytes, where: str) -> CompileConfig:
    """A CompileConfig from a JSON object naming its fields (bounded by
    tilefx.limits; every value type-checked; unknown names are an Error)."""
    obj = limits.load_json(data, where, limits.OPTIONS_TEXT_BYTES)
    if not isinstance(obj, dict):
        raise Error(f"{where}: expected a JSON object of CompileConfig fields, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(_FIELDS))
    if unknown:
        raise Error(f"{where}: unknown CompileConfig field(s) {unknown}: expected some of {sorted(_FIELDS)}")
    out: dict[str, Any] = {}
    for name, value in obj.items():
        at = f"{where}: {name}"
        if name in _PLAIN:
            out[name] = _typed(value, _PLAIN[name], at)
        elif name == "machine":
            out[name] = _typed(value, str, at).lower()
        elif name == "seed":
            out[name] = None if value is None else _typed(value, int, at)
        elif name in ("strategy", "optimizer", "autocast_policy"):
            if value is None and name != "strategy":
                out[name] = None
                continue
            out[name] = _typed(value, dict, at)
        elif name == "available_memory_proportion":
            props = {str(k): _typed(v, float, f"{at}.{k}") for k, v in _typed(value, dict, at).items()}
            bad = {k: v for k, v in props.items() if not is_proportion(v)}
            if bad:
                raise Error(f"{at}: each proportion must be in (0, 1], got {bad}")
            out[name] = props
        elif name == "optimizer_groups":
            out[name] = {str(k): _typed(v, int, f"{at}.{k}") for k, v in _typed(value, dict, at).items()}
        elif name == "locations":
            d = _typed(value, dict, at)
            extra = set(d) - {"weight", "activation", "accumulator", "optimizer"}
            if extra:
                raise Error(f"{at}: unknown tensor class(es) {sorted(extra)}")
            out[name] = Locations(**{k: _location(v, f"{at}.{k}") for k, v in d.items()})
    return CompileConfig(**out)


def read_config(path: str) -> CompileConfig:
    """`config_from_json` of a file (unreadable files are an Error)."""
    try:
        with open(path, "rb") as f:
            data = f.read(limits.OPTIONS_TEXT_BYTES.value() + 1)
    except OSError as e:
        raise Error(f"cannot read the config {os.fspath(path)!r}: {e.strerror or e}") from None
    return config_from_json(data, path)
