"""The option groups of ``poptorch.Options`` (``opts.Precision``,
``opts.Training``, ``opts.TensorLocations``, ``opts.Jit``, ``opts.Distributed``,
``opts._Popart``), ``TensorLocationSettings``, and what every option class
shares: the setters' validation, freezing, ``repr`` and the options errors.

``Options`` itself (tilefx/api/options.py) re-exports every public name here;
this module imports nothing from tilefx but the errors, the enums and, where
a group resolves its values for the machine model, two leaf modules of the
backend (``locations``, lazily).
"""

from __future__ import annotations

import copy
import enum
import functools
import logging
import numbers
import os
from collections.abc import Mapping
from typing import Any, Callable, Optional

import torch

from tilefx.api.enums import (
    HalfFloatCastingBehavior,
    MeanReductionStrategy,
    ReductionType,
)
from tilefx.errors import Error

logger = logging.getLogger("tilefx.options")

#: PopTorch's exact message when a frozen Options object is modified.
FROZEN_MESSAGE = "Can't modify frozen Options"


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class OptionsError(Error, ValueError):
    """An invalid option value (a ``poptorch.Error`` and a ``ValueError``)."""

    def __init__(self, message: str, location: str = ""):
        super().__init__(message, type="options", location=location)


class FrozenOptionsError(Error, AttributeError):
    """Options changed after a model wrapper froze them (a ``poptorch.Error``
    and, as in PopTorch, an ``AttributeError``)."""

    def __init__(self, message: str = FROZEN_MESSAGE):
        super().__init__(message, type="options")


class OptionsAssertionError(Error, AssertionError):
    """An invalid option value where PopTorch raises ``AssertionError``."""

    def __init__(self, message: str, location: str = ""):
        super().__init__(message, type="options", location=location)


#: Constructors a config file may call inside ``setExecutionStrategy(...)``
#: (or anywhere a value is expected), by name: ``ShardedExecution`` accepts
#: ``poptorch.ShardedExecution(...)``, ``tilefx.ShardedExecution(...)`` and
#: ``ShardedExecution(...)``.  Empty here; the strategies module fills it.
#: A constructed object may be followed by chained method calls only when its
#: class lists them in a ``_CONFIG_METHODS`` set of method names.
STRATEGY_FACTORIES: dict[str, Callable[..., Any]] = {}


class ConfigFileError(Error):
    """An invalid line in an options file (or in the JSON defaults).

    Like ``poptorch.options.ConfigFileError`` its message names the file and
    the line; ``filename``, ``lineno`` (1-based), ``column`` (1-based) and
    ``text`` (the offending line) are also attributes.
    """

    def __init__(self, detail: str, filename: str, lineno: int, column: int,
                 text: str, kind: str = "Error"):
        self.detail = detail
        self.filename = filename
        self.lineno = lineno
        self.column = column
        self.text = text
        message = (f"{kind} at line {lineno}, column {column} of {filename}: "
                   f"{detail}\n> {text}")
        super().__init__(message, type="config")


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _is_stage_or_phase(value: Any) -> bool:
    """A Stage or Phase is part of a strategy, not one (strategies registers them)."""
    return type(value).__name__ in ("Stage", "Phase") and \
        type(value).__module__ == "tilefx.api.strategies"


def _check_int(name: str, value: Any, minimum: Optional[int] = None,
               maximum: Optional[int] = None, limit: str = "") -> int:
    """`value` as an int within [minimum, maximum]; `limit` says what the
    maximum is (in the error when the value is over it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionsError(f"{name} must be an int, got {value!r} "
                           f"({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise OptionsError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise OptionsError(f"{name} must be <= {maximum}"
                           f"{f' ({limit})' if limit else ''}, got {value}")
    return value


# the bounds of counts set by options, from the largest IPU system (an option
# value beyond them cannot be run, and would only make the host allocate or
# loop for it)
IPUS_LIMIT = "the IPUs of the largest IPU system, an IPU-POD256"
REPEAT_LIMIT = "Poplar's 32-bit repeat count"


def check_ipus(name: str, value: Any, minimum: int = 1) -> int:
    """A count of IPUs (replicas, processes, a group's size)."""
    from tilefx.backend.machine import MAX_IPUS

    return _check_int(name, value, minimum, MAX_IPUS, IPUS_LIMIT)


def check_repeats(name: str, value: Any) -> int:
    """A count of iterations the device program repeats."""
    from tilefx.backend.machine import MAX_REPEAT_COUNT

    return _check_int(name, value, 1, MAX_REPEAT_COUNT, REPEAT_LIMIT)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionsError(f"{name} must be True or False, got {value!r} "
                           f"({type(value).__name__})")
    return value


def _check_str(name: str, value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise OptionsError(f"{name} must be a str, got {value!r} "
                           f"({type(value).__name__})")
    return value


def _check_enum(name: str, value: Any, enum_type: type[enum.Enum],
                exc: type[Exception] = OptionsError) -> Any:
    if not isinstance(value, enum_type):
        members = ", ".join(f"poptorch.{enum_type.__name__}.{m}"
                            for m in enum_type.__members__)
        raise exc(f"{name} must be one of {members}; got {value!r}")
    return value


def _assert(condition: bool, message: str) -> None:
    if not condition:
        raise OptionsAssertionError(message)


def _setter(fn: Callable) -> Callable:
    """Mark an option setter: refuse frozen objects, return ``self``."""

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        self._check_not_frozen()
        fn(self, *args, **kwargs)
        return self

    wrapper._tilefx_setter = True  # type: ignore[attr-defined]
    return wrapper


@functools.lru_cache(maxsize=None)
def _setter_names(cls: type) -> frozenset[str]:
    """Names of the option setters of ``cls`` (what config files may call)."""
    names = set()
    for name in dir(cls):
        attr = getattr(cls, name, None)
        if getattr(attr, "_tilefx_setter", False):
            names.add(name)
    return frozenset(names)


def _format_value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_format_value(k)}: {_format_value(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_format_value(v) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    return repr(value)


# --------------------------------------------------------------------------
# Base class: plain attributes + freezing
# --------------------------------------------------------------------------


class _OptionsBase:
    """Plain-attribute option storage that can be frozen.

    Once frozen (``_freeze()``, done by the model wrappers and the
    DataLoader) every setter and every attribute assignment raises
    ``AttributeError("Can't modify frozen Options")``.  Freezing recurses
    into nested option groups.  ``copy.deepcopy`` gives an unfrozen copy.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_frozen", False)

    # -- freezing -----------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen", False):
            raise FrozenOptionsError(FROZEN_MESSAGE)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get("_frozen", False):
            raise FrozenOptionsError(FROZEN_MESSAGE)
        object.__delattr__(self, name)

    def _check_not_frozen(self) -> None:
        if self.__dict__.get("_frozen", False):
            raise FrozenOptionsError(FROZEN_MESSAGE)

    def _set_frozen(self, state: bool) -> None:
        object.__setattr__(self, "_frozen", state)
        for value in self.__dict__.values():
            if isinstance(value, _OptionsBase):
                value._set_frozen(state)

    def _freeze(self):
        """Make this object (and its groups) read-only.  Returns self."""
        self._set_frozen(True)
        return self

    def _unfreeze(self):
        self._set_frozen(False)
        return self

    @property
    def frozen(self) -> bool:
        """True once the options have been handed to a model or DataLoader."""
        return self.__dict__.get("_frozen", False)

    def __deepcopy__(self, memo):
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            object.__setattr__(new, key, copy.deepcopy(value, memo))
        new._set_frozen(False)
        return new

    # -- introspection ------------------------------------------------------
    def _public_items(self) -> list[tuple[str, Any]]:
        return [(k, v) for k, v in self.__dict__.items()
                if not k.startswith("_")]

    def exists(self, option: str) -> bool:
        """PopTorch's ``Options.exists(name)``: whether the option has a value
        (``exists("random_seed")`` is False until ``randomSeed`` is called; PopTorch's
        own DataLoader asks it before shuffling across processes)."""
        return not option.startswith("_") and self.__dict__.get(option) is not None

    def toDict(self) -> dict[str, Any]:
        """The stored values, keyed by attribute name (a deep copy)."""
        out = {}
        for key, value in self._public_items():
            if isinstance(value, _OptionsBase):
                value = value.toDict()
            else:
                value = copy.deepcopy(value)
            out[key] = value
        return out

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_format_value(v)}"
                         for k, v in self._public_items())
        return f"{type(self).__name__}({body})"


# --------------------------------------------------------------------------
# Tensor locations
# --------------------------------------------------------------------------


class TensorLocationSettings(_OptionsBase):
    """Where a class of tensors is stored (``poptorch.TensorLocationSettings``).

    Every setting starts undefined (``None``): the consumer picks its own
    default (for example on-chip storage, and replicated tensor sharding
    only for tensors of at least 8192 elements).

    >>> opts.TensorLocations.setOptimizerLocation(
    ...     poptorch.TensorLocationSettings().useOnChipStorage(False))
    """

    #: PopTorch's backend key for each attribute (used by ``toDict``).
    _BACKEND_KEYS = {
        "on_chip": "onChip",
        "replicated_tensor_sharding": "useReplicatedTensorSharding",
        "min_elements_for_off_chip": "minElementsForOffChip",
        "min_elements_for_replicated_tensor_sharding":
            "minElementsForReplicatedTensorSharding",
        "io_tiles_to_load": "useIOTilesToLoad",
        "io_tiles_to_store": "useIOTilesToStore",
    }

    def __init__(self) -> None:
        super().__init__()
        self.on_chip: Optional[bool] = None
        self.replicated_tensor_sharding: Optional[bool] = None
        self.min_elements_for_off_chip: Optional[int] = None
        self.min_elements_for_replicated_tensor_sharding: Optional[int] = None
        self.io_tiles_to_load: Optional[bool] = None
        self.io_tiles_to_store: Optional[bool] = None

    @_setter
    def useOnChipStorage(self, use: Optional[bool] = True):
        """Permanent storage: True on-chip, False off-chip (streaming
        memory), None leaves it undefined."""
        if use is not None:
            _assert(isinstance(use, bool),
                    f"useOnChipStorage expects a bool or None, got {use!r}")
        self.on_chip = use

    @_setter
    def useReplicatedTensorSharding(self, use: bool = True):
        """Shard the tensors between replicas (weights and optimizer state)."""
        _assert(isinstance(use, bool),
                f"useReplicatedTensorSharding expects a bool, got {use!r}")
        self.replicated_tensor_sharding = use

    @_setter
    def minElementsForOffChip(self, min_elements: int):
        """Tensors with fewer elements than this are never moved off-chip."""
        _assert(isinstance(min_elements, int)
                and not isinstance(min_elements, bool) and min_elements >= 0,
                f"minElementsForOffChip expects a non-negative int, got "
                f"{min_elements!r}")
        self.min_elements_for_off_chip = min_elements

    @_setter
    def minElementsForReplicatedTensorSharding(self, min_elements: int):
        """Only shard tensors with at least this many elements."""
        _assert(isinstance(min_elements, int)
                and not isinstance(min_elements, bool) and min_elements >= 0,
                f"minElementsForReplicatedTensorSharding expects a "
                f"non-negative int, got {min_elements!r}")
        self.min_elements_for_replicated_tensor_sharding = min_elements

    @_setter
    def useIOTilesToLoad(self, use: bool = True):
        """Load the tensors through IO tiles (True) or compute tiles."""
        _assert(isinstance(use, bool),
                f"useIOTilesToLoad expects a bool, got {use!r}")
        self.io_tiles_to_load = use

    @_setter
    def useIOTilesToStore(self, use: bool = True):
        """Store the tensors through IO tiles (True) or compute tiles."""
        _assert(isinstance(use, bool),
                f"useIOTilesToStore expects a bool, got {use!r}")
        self.io_tiles_to_store = use

    def toDict(self) -> dict[str, int]:
        """The defined settings with PopTorch's backend keys and int values
        (``{"onChip": 0, "useReplicatedTensorSharding": 1}``)."""
        out = {}
        for attr, key in self._BACKEND_KEYS.items():
            value = getattr(self, attr)
            if value is not None:
                out[key] = int(value)
        return out

    def resolved(self):
        """These settings as the machine model reads them
        (`tilefx.backend.locations.TensorLocation`): undefined settings take
        PopART's defaults (on chip, not sharded, sharding from 8192 elements)."""
        from tilefx.backend import locations

        return locations.TensorLocation(
            on_chip=self.on_chip is not False, sharded=bool(self.replicated_tensor_sharding),
            min_elements_off_chip=(locations.MIN_ELEMENTS_OFF_CHIP if self.min_elements_for_off_chip is None
                                   else self.min_elements_for_off_chip),
            min_elements_sharded=(locations.MIN_ELEMENTS_SHARDED
                                  if self.min_elements_for_replicated_tensor_sharding is None
                                  else self.min_elements_for_replicated_tensor_sharding))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorLocationSettings):
            return NotImplemented
        return self._public_items() == other._public_items()

    __hash__ = None  # type: ignore[assignment]


class _TensorLocationOptions(_OptionsBase):
    """Where tensors are stored (``opts.TensorLocations``).

    ``optimizer``, ``weight``, ``activation`` and ``accumulator`` hold a copy
    of the ``TensorLocationSettings`` given to the setter, or None.
    """

    def __init__(self) -> None:
        super().__init__()
        self.optimizer: Optional[TensorLocationSettings] = None
        self.weight: Optional[TensorLocationSettings] = None
        self.activation: Optional[TensorLocationSettings] = None
        self.accumulator: Optional[TensorLocationSettings] = None
        self.num_io_tiles: int = 0

    @staticmethod
    def _copy_location(method: str, location: Any) -> TensorLocationSettings:
        _assert(isinstance(location, TensorLocationSettings),
                f"{method} expects a poptorch.TensorLocationSettings, got "
                f"{location!r}")
        return copy.deepcopy(location)

    @_setter
    def setOptimizerLocation(self, location: TensorLocationSettings):
        """Tensor location settings for the optimizer state."""
        self.optimizer = self._copy_location("setOptimizerLocation", location)

    @_setter
    def setWeightLocation(self, location: TensorLocationSettings):
        """Tensor location settings for the weights."""
        self.weight = self._copy_location("setWeightLocation", location)

    @_setter
    def setActivationLocation(self, location: TensorLocationSettings):
        """Tensor location settings for the activations."""
        self.activation = self._copy_location("setActivationLocation",
                                              location)

    @_setter
    def setAccumulatorLocation(self, location: TensorLocationSettings):
        """Tensor location settings for the gradient accumulators."""
        self.accumulator = self._copy_location("setAccumulatorLocation",
                                               location)

    @_setter
    def numIOTiles(self, num_tiles: int):
        """Number of tiles of each IPU reserved for IO (an even number
        between 32 and 192)."""
        message = "numIOTiles must be an even number between 32 and 192."
        _assert(isinstance(num_tiles, int) and not isinstance(num_tiles, bool),
                message)
        _assert(32 <= num_tiles <= 192 and num_tiles % 2 == 0, message)
        self.num_io_tiles = num_tiles

    def __repr__(self) -> str:
        """PopTorch's form, which the pipelining tutorial prints (Graphcore's tutorial "PopTorch Parallel
        Execution Using Pipelining":
        ``_TensorLocationOptions(location_optimizer={'onChip': 0})``): each
        location set, as its backend dictionary, then the IO tiles if any."""
        parts = [f"location_{kind}={getattr(self, kind).toDict()!r}"
                 for kind in ("activation", "weight", "optimizer", "accumulator")
                 if getattr(self, kind) is not None]
        if self.num_io_tiles:
            parts.append(f"num_io_tiles={self.num_io_tiles}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def resolved(self):
        """Where the machine model puts each class of tensors
        (`tilefx.backend.locations.Locations`): unset classes on chip. PopART
        shards only variables (weights, optimizer state): activations are
        never sharded, and sharded accumulators are not modelled (the compile
        warns)."""
        from tilefx.backend import locations

        def of(settings, shardable=True):
            if settings is None:
                return locations.ON_CHIP
            loc = settings.resolved()
            return loc if shardable else locations.TensorLocation(
                loc.on_chip, False, loc.min_elements_off_chip, loc.min_elements_sharded)

        return locations.Locations(weight=of(self.weight), activation=of(self.activation, False),
                                   accumulator=of(self.accumulator, False), optimizer=of(self.optimizer))

    # PopTorch's names for the stored dictionaries.
    @property
    def location_optimizer(self) -> Optional[dict[str, int]]:
        return None if self.optimizer is None else self.optimizer.toDict()

    @property
    def location_weight(self) -> Optional[dict[str, int]]:
        return None if self.weight is None else self.weight.toDict()

    @property
    def location_activation(self) -> Optional[dict[str, int]]:
        return None if self.activation is None else self.activation.toDict()

    @property
    def location_accumulator(self) -> Optional[dict[str, int]]:
        return None if self.accumulator is None else self.accumulator.toDict()


# --------------------------------------------------------------------------
# Option groups
# --------------------------------------------------------------------------


class _JitOptions(_OptionsBase):
    """Options of PyTorch's JIT (``opts.Jit``).

    Note: tilefx always captures the model the same way, so ``traceModel``
    is accepted for compatibility and otherwise ignored.
    """

    def __init__(self) -> None:
        super().__init__()
        self.trace_model: bool = True

    @_setter
    def traceModel(self, trace_model: bool):
        """Accepted and ignored: tilefx has a single capture path."""
        self.trace_model = _check_bool("traceModel", trace_model)
        logger.info("Options.Jit.traceModel(%s) has no effect in tilefx",
                    trace_model)


class _PrecisionOptions(_OptionsBase):
    """Half-precision and casting options (``opts.Precision``).

    Attributes: ``partials_type`` (torch.float32 or torch.float16),
    ``floating_point_exceptions``, ``stochastic_rounding``,
    ``half_float_casting``, ``running_statistics_always_float``,
    ``autocast_enabled``, ``autocast_policy`` (None: the default policy).
    """

    def __init__(self) -> None:
        super().__init__()
        self.partials_type: torch.dtype = torch.float32
        self.floating_point_exceptions: bool = False
        self.stochastic_rounding: bool = False
        self.half_float_casting: HalfFloatCastingBehavior = \
            HalfFloatCastingBehavior.Default
        self.running_statistics_always_float: bool = True
        self.autocast_enabled: bool = True
        self.autocast_policy: Any = None

    @_setter
    def setPartialsType(self, dtype: torch.dtype):
        """Data type of matmul and convolution partials: ``torch.float``
        (default) or ``torch.half``."""
        if dtype in (torch.float, torch.float32):
            self.partials_type = torch.float32
        elif dtype in (torch.half, torch.float16):
            self.partials_type = torch.float16
        else:
            raise OptionsError("parameter to setPartialsType should be either "
                               f"torch.float or torch.half, got {dtype!r}")

    @_setter
    def enableFloatingPointExceptions(self, enabled: bool):
        """Raise on IPU floating point exceptions (inf - inf, x / 0, ...)."""
        _assert(isinstance(enabled, bool),
                "enableFloatingPointExceptions needs to be set to a bool")
        self.floating_point_exceptions = enabled

    @_setter
    def enableStochasticRounding(self, enabled: bool):
        """Round to float16 stochastically (recommended for training)."""
        self.stochastic_rounding = _check_bool("enableStochasticRounding",
                                               enabled)

    @_setter
    def halfFloatCasting(self, half_float_casting: HalfFloatCastingBehavior):
        """How ops mixing float16 and float32 operands are cast."""
        _check_enum("halfFloatCasting", half_float_casting,
                    HalfFloatCastingBehavior)
        self.half_float_casting = half_float_casting

    @_setter
    def runningStatisticsAlwaysFloat(self, value: bool):
        """Keep batch-norm running mean/variance in float32 (default True)."""
        if not isinstance(value, bool):
            raise OptionsError(
                "runningStatisticsAlwaysFloat needs to be set to a bool")
        self.running_statistics_always_float = value

    @_setter
    def autocastEnabled(self, autocast_enabled: bool):
        """Turn automatic mixed-precision casting on (default) or off."""
        if not isinstance(autocast_enabled, bool):
            raise OptionsError(
                "autocastEnabled must be set to either True or False")
        self.autocast_enabled = autocast_enabled

    @_setter
    def autocastPolicy(self, autocast_policy: Any):
        """Set the automatic casting policy object (stored as given)."""
        if autocast_policy is None or isinstance(autocast_policy,
                                                 (bool, int, float, str)):
            raise OptionsError("autocastPolicy must be set to an instance of "
                               f"poptorch.autocasting.Policy, got "
                               f"{autocast_policy!r}")
        self.autocast_policy = autocast_policy


class _TrainingOptions(_OptionsBase):
    """Training options (``opts.Training``).

    Attributes: ``gradient_accumulation``, ``reduction_type`` (default
    ``ReductionType.Mean``), ``mean_reduction_strategy`` (None = automatic:
    ``Running`` when the optimizer accumulates in float16, else ``Post``),
    ``automatic_loss_scaling``, ``convolution_dithering``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.gradient_accumulation: int = 1
        self.reduction_type: ReductionType = ReductionType.Mean
        self.mean_reduction_strategy: Optional[MeanReductionStrategy] = None
        self.automatic_loss_scaling: bool = False
        self.convolution_dithering: bool = False

    @_setter
    def gradientAccumulation(self, gradient_accumulation: int):
        """Number of micro-batches whose gradients are accumulated before
        each weight update (default 1)."""
        self.gradient_accumulation = check_repeats("gradientAccumulation",
                                                   gradient_accumulation)

    @_setter
    def accumulationAndReplicationReductionType(
            self, reduction_type: ReductionType):
        """Reduce accumulated and replicated gradients with ``Mean``
        (default) or ``Sum``."""
        if (not isinstance(reduction_type, ReductionType)
                or reduction_type == ReductionType.NoReduction):
            raise OptionsError(
                "accumulationAndReplicationReductionType must be set to "
                "poptorch.ReductionType.Mean or poptorch.ReductionType.Sum, "
                f"got {reduction_type!r}")
        self.reduction_type = reduction_type

    @_setter
    def accumulationReductionType(self, reduction_type: ReductionType):
        """The older PopTorch's name of
        ``accumulationAndReplicationReductionType`` (code written for it
        still runs, with PopTorch's deprecation warning)."""
        logger.warning("Options.Training.accumulationReductionType is deprecated: use "
                       "Options.Training.accumulationAndReplicationReductionType")
        self.accumulationAndReplicationReductionType(reduction_type)

    @_setter
    def setMeanAccumulationAndReplicationReductionStrategy(
            self, mean_reduction_strategy: MeanReductionStrategy):
        """When to divide for a ``Mean`` reduction: ``Running``, ``Post`` or
        (deprecated) ``PostAndLoss``."""
        _check_enum("setMeanAccumulationAndReplicationReductionStrategy",
                    mean_reduction_strategy, MeanReductionStrategy)
        self.mean_reduction_strategy = mean_reduction_strategy

    @_setter
    def setAutomaticLossScaling(self, enabled: bool):
        """Enable automatic loss scaling (for float16 gradients)."""
        self.automatic_loss_scaling = _check_bool("setAutomaticLossScaling",
                                                  enabled)

    @_setter
    def setConvolutionDithering(self, enabled: bool):
        """Lay convolutions out from different tiles to balance tile use."""
        self.convolution_dithering = _check_bool("setConvolutionDithering",
                                                 enabled)

    # PopTorch's attribute names.
    @property
    def accumulation_and_replication_reduction_type(self) -> ReductionType:
        return self.reduction_type

    @property
    def meanAccumulationAndReplicationReductionStrategy(
            self) -> Optional[MeanReductionStrategy]:
        return self.mean_reduction_strategy


class _DistributedOptions(_OptionsBase):
    """Distributed execution without PopRun (``opts.Distributed``).

    The process id and count are read at construction from
    ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE`` (PopRun, mpirun) or,
    when those are unset, from torchrun's ``RANK`` / ``WORLD_SIZE``
    (defaults 0 and 1).  With several processes, a training model sums its
    gradients over the processes with ``torch.distributed``: see
    docs/distributed.md.
    """

    def __init__(self) -> None:
        super().__init__()
        self.process_id: int = 0
        self.num_processes: int = 1
        self.setup_process_groups: bool = True
        # torch.distributed's default for gloo (a simulated step can be slow),
        # or TILEFX_DISTRIBUTED_TIMEOUT (seconds) to set it without code
        self.timeout_seconds: float = 1800.0
        text = os.environ.get("TILEFX_DISTRIBUTED_TIMEOUT")
        if text:
            try:
                seconds = float(text)
            except ValueError:
                raise OptionsError(f"Environment variable TILEFX_DISTRIBUTED_TIMEOUT={text!r} is not a "
                                   "number of seconds") from None
            self.setTimeout(seconds)
        if "OMPI_COMM_WORLD_SIZE" not in os.environ and "WORLD_SIZE" in os.environ:
            self.setEnvVarNames("WORLD_SIZE", "RANK")  # torchrun
        else:
            self.setEnvVarNames("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")

    @_setter
    def setTimeout(self, seconds: float):
        """How long a process waits for the others (rendezvous, gradient
        sums) before it gives up with a ``tilefx.Error`` (a tilefx
        extension; default 1800 s, torch.distributed's, or the
        TILEFX_DISTRIBUTED_TIMEOUT environment variable)."""
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) \
                or not 0 < float(seconds) < float("inf"):
            raise OptionsError(f"setTimeout: seconds must be a finite number > 0, "
                               f"got {seconds!r}")
        self.timeout_seconds = float(seconds)

    @_setter
    def disable(self):
        """Ignore the environment: a single process with id 0."""
        self.process_id = 0
        self.num_processes = 1

    @_setter
    def disableProcessGroupsSetup(self):
        """Do not set up torch process groups automatically."""
        self.setup_process_groups = False

    @_setter
    def setEnvVarNames(self, var_num_processes: str, var_process_id: str):
        """Read the process count and id from these environment variables."""
        values = {}
        for var, default in ((var_num_processes, "1"), (var_process_id, "0")):
            _check_str("setEnvVarNames", var)
            text = os.environ.get(var, default)
            try:
                values[var] = int(text)
            except ValueError:
                raise OptionsError(f"Environment variable {var}={text!r} is "
                                   "not an integer") from None
        self.configureProcessId(values[var_process_id],
                                values[var_num_processes])

    @_setter
    def configureProcessId(self, process_id: int, num_processes: int):
        """Set this process's id and the total number of processes."""
        num_processes = check_ipus("num_processes", num_processes)
        process_id = _check_int("process_id", process_id, 0)
        if process_id >= num_processes:
            raise OptionsError(f"process_id ({process_id}) must be smaller "
                               f"than num_processes ({num_processes})")
        self.process_id = process_id
        self.num_processes = num_processes

    @property
    def processId(self) -> int:
        """Id of the current process."""
        return self.process_id

    @property
    def numProcesses(self) -> int:
        """Total number of processes."""
        return self.num_processes

    # PopTorch's attribute names.
    @property
    def distributed_process_id(self) -> int:
        return self.process_id

    @property
    def num_distributed_processes(self) -> int:
        return self.num_processes


class _PopartOptions(_OptionsBase):
    """Raw backend options (``opts._Popart``), stored in ``options``.

    tilefx keeps them for inspection; only the keys tilefx understands have
    an effect.
    """

    def __init__(self) -> None:
        super().__init__()
        self.options: dict[str, Any] = {}

    @_setter
    def set(self, key: str, value: Any):
        """Set the backend option ``key`` to ``value``."""
        if not isinstance(key, str) or not key:
            raise OptionsError(f"_Popart.set expects a non-empty str key, got "
                               f"{key!r}")
        self.options[key] = copy.deepcopy(value)

    @_setter
    def setEngineOptions(self, engine_options: dict[str, str]):
        """Set the ``engineOptions`` dictionary."""
        if not isinstance(engine_options, Mapping):
            raise OptionsError("setEngineOptions expects a dict, got "
                               f"{engine_options!r}")
        self.options["engineOptions"] = dict(engine_options)

    @_setter
    def setPatterns(self, patterns: dict[str, bool], level: int = 2):
        """Enable/disable backend patterns by name, on top of ``level``."""
        _assert(isinstance(level, int) and not isinstance(level, bool),
                f"setPatterns level must be an int, got {level!r}")
        _assert(isinstance(patterns, dict),
                f"setPatterns expects a dict of pattern names, got "
                f"{patterns!r}")
        self.options["patterns_level"] = level
        self.options["patterns"] = dict(patterns)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_format_value(v)}"
                         for k, v in self.options.items())
        return f"{type(self).__name__}({body})"


# --------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------
