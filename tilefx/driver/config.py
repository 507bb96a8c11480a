"""`CompileConfig`: everything the graph passes, the machine model and the
executor read from a surface's options, as one typed, frozen value.

PopTorch's `Options` become one in `api/compile_config.py`, PopART's
`SessionOptions` one in `popart/session.py` `_compile_config`, a JSON file
of these field names one for `tilefx-run --config`; `tilefx.driver.compile`
reads nothing else. Recomputation is PopART's `autoRecomputation`
(`auto_recomputation`, which `ipu-recompute` applies) and the checkpoints,
ops of the traced IR (`ipu.recomputation_checkpoint`)."""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from tilefx import limits
from tilefx.backend.locations import MIN_ELEMENTS_OFF_CHIP, MIN_ELEMENTS_SHARDED, Locations, TensorLocation
from tilefx.backend.machine import Machine
from tilefx.backend.machine import machine as machine_named
from tilefx.backend.schedule import LIVENESS
from tilefx.dialects.ipu import is_proportion
from tilefx.errors import Error
from tilefx.passes.recompute import MODELLED, RECOMPUTATION_TYPES

# no strategy set: PopTorch's default, pipelined, which Block(ipu_id=...) then
# switches on without the user asking (ipu-assign-stages says so in its errors)
DEFAULT_STRATEGY: Mapping[str, Any] = MappingProxyType(
    {"kind": "pipelined", "stages": [], "auto_stage": "same_as_ipu", "implicit": True})

_EMPTY: Mapping = MappingProxyType({})

# the precision policy's op classes (poptorch.autocasting.Policy)
AUTOCAST_CLASSES = ("fp16", "fp32", "promote", "demote")


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
    # the optimizer and its attributes (lowering/optimizers.py `optimizer_config`, with
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
    # PopART's autoRecomputation (passes/recompute.py RECOMPUTATION_TYPES);
    # None: not set, PopTorch's default (Pipeline when pipelined over several IPUs)
    auto_recomputation: int | None = None
    seed: int | None = None

    # the mapping fields are read-only views of deep copies (a read-only
    # mapping given, such as DEFAULT_STRATEGY or another config's field, is
    # kept as it is), so neither the config nor what made it changes the
    # other; they stay unhashable, and so is the config (no hash rather than
    # one that fails on its mappings)
    __hash__ = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in _BOOLS:
            _check(isinstance(getattr(self, name), bool), name, "a bool", getattr(self, name))
        try:  # a preset's name or a Machine, else an Error naming the presets
            machine_named(self.machine)
        except Error as e:
            raise Error(f"CompileConfig.machine: {e}") from None
        _check(isinstance(self.strategy, Mapping), "strategy", "a mapping", self.strategy)
        _check_data(self.strategy, "strategy")
        _check("auto" not in self.strategy or isinstance(self.strategy["auto"], Mapping), "strategy",
               "a mapping whose 'auto' entry is a mapping", self.strategy)
        _check(self.liveness in LIVENESS, "liveness", f"one of {list(LIVENESS)}", self.liveness)
        amp = self.available_memory_proportion
        _check(isinstance(amp, Mapping) and all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and is_proportion(v)
            for k, v in amp.items()), "available_memory_proportion", "a mapping of 'ipuN' to proportions in (0, 1]",
            amp)
        policy = self.autocast_policy
        _check(policy is None or isinstance(policy, Mapping) and set(policy) <= set(AUTOCAST_CLASSES) and all(
            isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v) for v in policy.values()),
            "autocast_policy", f"None or a mapping of some of {list(AUTOCAST_CLASSES)} to lists of op names", policy)
        _check(self.optimizer is None or isinstance(self.optimizer, Mapping), "optimizer", "None or a mapping",
               self.optimizer)
        if self.optimizer is not None:
            _check_data(self.optimizer, "optimizer")
        groups = self.optimizer_groups
        _check(isinstance(groups, Mapping) and all(isinstance(k, str) and _count(v, 0) for k, v in groups.items()),
               "optimizer_groups", "a mapping of weight names to non-negative ints", groups)
        for name in ("device_iterations", "replication_factor", "gradient_accumulation", "processes"):
            _check(_count(getattr(self, name), 1), name, "a positive int", getattr(self, name))
        _check(_count(self.process_id, 0) and self.process_id < self.processes, "process_id",
               "an int in [0, processes)", self.process_id)
        _check(_locations_ok(self.locations), "locations",
               "a Locations of TensorLocations with non-negative element counts", self.locations)
        _check(self.seed is None or _count(self.seed, 0), "seed", "None or a non-negative int", self.seed)
        rc = self.auto_recomputation
        _check(rc is None or _count(rc, 0) and rc in RECOMPUTATION_TYPES, "auto_recomputation",
               "None or one of PopART's RecomputationType values " +
               ", ".join(f"{k} ({v})" for k, v in RECOMPUTATION_TYPES.items()), rc)
        if self.training and rc is not None and rc not in MODELLED:
            raise Error(f"autoRecomputation {rc} (RecomputationType::{RECOMPUTATION_TYPES[rc]}) is not modelled "
                        f"by tilefx: set 0 (None) or 3 (Pipeline), or leave it unset (Pipeline when pipelined "
                        f"over several IPUs, else the model's recomputationCheckpoint()s)")
        for name in _MAPPINGS:
            v = getattr(self, name)
            if v is not None and not isinstance(v, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(copy.deepcopy(dict(v))))

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


_BOOLS = tuple(f.name for f in dataclasses.fields(CompileConfig) if f.type == "bool")
_MAPPINGS = ("strategy", "available_memory_proportion", "autocast_policy", "optimizer", "optimizer_groups")


def _check(ok: bool, name: str, expected: str, value) -> None:
    if not ok:
        raise Error(f"CompileConfig.{name} must be {expected}, got {value!r}")


def _count(value, least: int) -> bool:
    """Whether `value` is an int (not a bool) of at least `least`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _locations_ok(locations) -> bool:
    return isinstance(locations, Locations) and all(
        isinstance(loc, TensorLocation) and isinstance(loc.on_chip, bool) and isinstance(loc.sharded, bool)
        and _count(loc.min_elements_off_chip, 0) and _count(loc.min_elements_sharded, 0)
        for loc in (locations.weight, locations.activation, locations.accumulator, locations.optimizer))


def _check_data(value, where: str) -> None:
    """`value` is module attribute data (`irutil.from_py`): bools, ints,
    floats, strings, lists and string-keyed mappings."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check(isinstance(k, str), where, "data with string keys", k)
            _check_data(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_data(v, f"{where}[{i}]")
    else:
        _check(isinstance(value, (bool, int, float, str)), where,
               "bools, ints, floats, strings, lists or mappings", value)


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
    if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
        article = "an" if kind.__name__[0] in "aeiou" else "a"
        raise Error(f"{where} must be {article} {kind.__name__}, got {value!r}")
    return value


_FIELDS = {f.name for f in dataclasses.fields(CompileConfig)}
_DATA = {"strategy", "liveness", "available_memory_proportion", "autocast_policy", "optimizer", "optimizer_groups",
         "seed", "auto_recomputation", *_BOOLS, "device_iterations", "replication_factor", "gradient_accumulation", "processes",
         "process_id"}


def config_from_json(data: str | bytes, where: str) -> CompileConfig:
    """A CompileConfig from a JSON object naming its fields (bounded by
    tilefx.limits; `CompileConfig` checks every value; unknown names are an
    Error)."""
    obj = limits.load_json(data, where, limits.OPTIONS_TEXT_BYTES)
    if not isinstance(obj, dict):
        raise Error(f"{where}: expected a JSON object of CompileConfig fields, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _FIELDS)
    if unknown:
        raise Error(f"{where}: unknown CompileConfig field(s) {unknown}: expected some of {sorted(_FIELDS)}")
    out: dict[str, Any] = {}
    for name, value in obj.items():
        at = f"{where}: {name}"
        if name in _DATA:  # JSON values as they are
            out[name] = value
        elif name == "machine":  # a preset's name (the Machine itself has no JSON form)
            out[name] = _typed(value, str, at).lower()
        elif name == "locations":
            d = _typed(value, dict, at)
            extra = set(d) - {"weight", "activation", "accumulator", "optimizer"}
            if extra:
                raise Error(f"{at}: unknown tensor class(es) {sorted(extra)}")
            out[name] = Locations(**{k: _location(v, f"{at}.{k}") for k, v in d.items()})
        else:
            raise AssertionError(f"CompileConfig.{name} has no JSON form in config_from_json")
    try:
        return CompileConfig(**out)
    except Error as e:
        raise Error(f"{where}: {e}") from None


def read_config(path: str) -> CompileConfig:
    """`config_from_json` of a file (unreadable files are an Error)."""
    try:
        with open(path, "rb") as f:
            data = f.read(limits.OPTIONS_TEXT_BYTES.value() + 1)
    except OSError as e:
        raise Error(f"cannot read the config {os.fspath(path)!r}: {e.strerror or e}") from None
    return config_from_json(data, path)
