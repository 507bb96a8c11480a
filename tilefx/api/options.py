"""``poptorch.Options`` and its option groups.

The user-facing surface follows PopTorch: camelCase setters that validate
their argument, store it in a plain attribute and return ``self`` so calls
chain (``opts.deviceIterations(4).replicationFactor(2)``), with the groups
``opts.Precision``, ``opts.Training``, ``opts.TensorLocations``, ``opts.Jit``,
``opts.Distributed`` and ``opts._Popart``.

Values are read back through snake_case attributes (``opts.device_iterations``,
``opts.Training.gradient_accumulation`` ...): those are what the rest of
tilefx consumes.

Differences from PopTorch, on purpose:

* ``loadFromFile`` never runs Python: each line is parsed with a lark grammar
  that accepts only option calls whose arguments are literals, enum members,
  torch dtypes and whitelisted constructors (``TensorLocationSettings`` and
  the execution strategies registered in ``STRATEGY_FACTORIES``).
* Setters validate types and ranges eagerly (PopTorch defers most checks to
  its C++ backend).  Bad values raise ``OptionsError``, which is both a
  ``tilefx`` ``Error`` (``poptorch.Error``) and a ``ValueError``; where
  PopTorch itself asserts, ``OptionsAssertionError`` (an ``Error`` and an
  ``AssertionError``) is raised instead.

The option groups (and the validation every option class shares) are in
``tilefx.api.option_groups``; every name is re-exported here.
"""

from __future__ import annotations

import copy
import enum
import logging
import numbers
import os
import re
from collections.abc import Mapping
from typing import Any, Optional

import torch

from tilefx.api.enums import (
    CommGroupType,
    ConnectionType,
    OutputMode,
    SyncPattern,
)
from tilefx.api.option_groups import (  # the groups and the shared machinery, re-exported
    FROZEN_MESSAGE,
    ConfigFileError,
    FrozenOptionsError,
    OptionsAssertionError,
    STRATEGY_FACTORIES,
    OptionsError,
    TensorLocationSettings,
    _assert,
    _check_bool,
    _check_enum,
    _check_int,
    _check_str,
    _DistributedOptions,
    _format_value,
    _is_stage_or_phase,
    _JitOptions,
    _OptionsBase,
    _PopartOptions,
    _PrecisionOptions,
    _setter,
    _TensorLocationOptions,
    _TrainingOptions,
    check_ipus,
    check_repeats,
)
from tilefx.dialects.ipu import is_proportion
from tilefx import limits
from tilefx.errors import Error

__all__ = [
    "Options",
    "TensorLocationSettings",
    "OptionsError",
    "OptionsAssertionError",
    "ConfigFileError",
    "FrozenOptionsError",
    "STRATEGY_FACTORIES",
    "FROZEN_MESSAGE",
    "DEFAULT_OPTIONS_ENV_VARS",
    "CACHE_DIR_ENV_VARS",
]

logger = logging.getLogger("tilefx.options")

#: Environment variables holding a JSON object of default option calls,
#: applied (in this order) by every new ``Options``.
DEFAULT_OPTIONS_ENV_VARS = ("POPTORCH_DEFAULT_OPTIONS", "TILEFX_DEFAULT_OPTIONS")

#: Environment variables that enable executable caching at construction.
CACHE_DIR_ENV_VARS = ("POPTORCH_CACHE_DIR", "TILEFX_CACHE_DIR")



_IPU_KEY = re.compile(r"IPU(\d+)\Z")

_DEFAULT_SOURCE_LOCATION_EXCLUDES = [
    "install/poptorch", "site-packages/torch", "site-packages/poptorch",
    "site-packages/tilefx"
]


class Options(_OptionsBase):
    """Everything that controls how a model is compiled and executed.

    >>> opts = poptorch.Options()
    >>> opts.deviceIterations(10).replicationFactor(2)
    >>> opts.Training.gradientAccumulation(4)

    A new object starts from the defaults, then enables executable caching
    if ``POPTORCH_CACHE_DIR`` (or ``TILEFX_CACHE_DIR``) is set, then applies
    the JSON object in ``POPTORCH_DEFAULT_OPTIONS`` / ``TILEFX_DEFAULT_OPTIONS``
    (``{"deviceIterations": 4, "Training.gradientAccumulation": 2}``; a list
    value is the positional arguments, strings such as ``"OutputMode.All"``
    or ``"torch.half"`` name enum members and dtypes).

    Model wrappers and the DataLoader freeze the object they receive;
    ``clone()`` returns an unfrozen deep copy.
    """

    #: The option groups reachable from an Options object (property name ->
    #: group class); config files and JSON defaults may go through them.
    _GROUP_CLASSES: dict[str, type] = {}  # filled after the class body

    def __init__(self) -> None:
        super().__init__()
        self._jit = _JitOptions()
        self._popart = _PopartOptions()
        self._precision = _PrecisionOptions()
        self._training = _TrainingOptions()
        self._distributed = _DistributedOptions()
        self._tensor_locations = _TensorLocationOptions()
        self._source_location_excludes = list(
            _DEFAULT_SOURCE_LOCATION_EXCLUDES)
        self._module_namescope_enabled = True

        # Batching.
        self.device_iterations: int = 1
        self.replication_factor: int = 1
        self.input_group_size: int = 1
        self.input_group_type: CommGroupType = CommGroupType.Consecutive
        # Outputs.
        self.output_mode: OutputMode = OutputMode.Default
        self.output_return_period: int = 1
        self.anchored_tensors: dict[str, dict[str, Any]] = {}
        # Execution.
        self.execution_strategy: Any = None
        self.available_memory_proportion: dict[str, float] = {}
        self.auto_round_num_ipus: bool = False
        self.broadcast_buffers: bool = True
        self.random_seed: Optional[int] = None
        self.synthetic_data: bool = False
        self.stable_norm: bool = False
        self.updatable_named_buffers: list[str] = []
        # Device selection.
        self.use_ipu_model: Optional[bool] = None
        self.ipu_id: Optional[int] = None
        self.offline_ipu_target: bool = False
        self.ipu_version: Optional[int] = None
        self.connection_type: ConnectionType = ConnectionType.Always
        self.sync_pattern: SyncPattern = SyncPattern.Full
        # Diagnostics and files.
        self.log_cycle_count: bool = False
        self.log_dir: str = "."
        self.max_repeat_logs: Optional[int] = 4
        self.model_name: Optional[str] = None
        self.profile_dir: Optional[str] = None
        self.machine: Any = "mk2"
        self.executable_cache_dir: Optional[str] = None
        self.relax_optimizer_attributes_checks: bool = False
        self.show_compilation_progress_bar: bool = True

        for var in CACHE_DIR_ENV_VARS:
            path = os.environ.get(var, "")
            if path:
                logger.info("%s is set: setting cache path to %s", var, path)
                self.enableExecutableCaching(path)
        for var in DEFAULT_OPTIONS_ENV_VARS:
            text = os.environ.get(var, "")
            if text.strip():
                self._apply_json_defaults(var, text)

    # -- groups -------------------------------------------------------------
    @property
    def Precision(self) -> _PrecisionOptions:
        """Half-precision and casting options."""
        return self._precision

    @property
    def Training(self) -> _TrainingOptions:
        """Training options."""
        return self._training

    @property
    def TensorLocations(self) -> _TensorLocationOptions:
        """Tensor location options."""
        return self._tensor_locations

    @property
    def Jit(self) -> _JitOptions:
        """JIT options (accepted for compatibility)."""
        return self._jit

    @property
    def Distributed(self) -> _DistributedOptions:
        """Distributed execution options."""
        return self._distributed

    @property
    def _Popart(self) -> _PopartOptions:
        """Raw backend options (advanced users only)."""
        return self._popart

    # -- batching -----------------------------------------------------------
    @_setter
    def deviceIterations(self, device_iterations: int):
        """Number of iterations the device runs over the data before
        returning to the host (default 1)."""
        self.device_iterations = check_repeats("deviceIterations",
                                               device_iterations)

    @_setter
    def replicationFactor(self, replication_factor: int):
        """Number of model replicas (default 1)."""
        self.replication_factor = check_ipus("replicationFactor",
                                             replication_factor)

    @_setter
    def inputReplicaGrouping(
            self, input_group_size: int,
            input_group_type: CommGroupType = CommGroupType.Consecutive):
        """Let groups of ``input_group_size`` replicas share one input.

        The replicas of a group (``Consecutive`` or ``Orthogonal``, as for
        weight replica grouping) receive the same slice of each input, so
        only ``replicationFactor / input_group_size`` distinct slices are
        read per step.  ``NoGrouping`` gives every replica its own slice (a
        group size of 1); ``All`` is not valid for inputs.
        """
        size = check_ipus("inputReplicaGrouping input_group_size",
                          input_group_size)
        _check_enum("inputReplicaGrouping input_group_type", input_group_type,
                    CommGroupType)
        if input_group_type == CommGroupType.All:
            raise OptionsError("CommGroupType.All is not a valid input group "
                               "type: use Consecutive, Orthogonal or "
                               "NoGrouping")
        if input_group_type == CommGroupType.NoGrouping:
            size = 1
        self.input_group_size = size
        self.input_group_type = input_group_type

    # -- outputs ------------------------------------------------------------
    @_setter
    def outputMode(self, output_mode: OutputMode,
                   output_return_period: Optional[int] = None):
        """Which results to return to the host: ``All``, ``EveryN`` (every
        ``output_return_period`` iterations), ``Final``, ``Sum`` or
        ``Default`` (``All`` for inference, ``Final`` for training)."""
        _check_enum("outputMode", output_mode, OutputMode,
                    OptionsAssertionError)
        if output_mode == OutputMode.EveryN:
            if (output_return_period is None
                    or isinstance(output_return_period, bool)
                    or not isinstance(output_return_period, numbers.Integral)
                    or output_return_period <= 0):
                raise OptionsAssertionError(
                    "EveryN anchor must have output_return_period set to "
                    f"valid positive integer, got {output_return_period!r}")
            period = int(output_return_period)
        else:
            if output_return_period:
                logger.info("output_return_period ignored with output_mode "
                            "set to %s", output_mode)
            period = 1
        self.output_mode = output_mode
        self.output_return_period = period

    @_setter
    def anchorMode(self, anchor_mode: OutputMode,
                   anchor_return_period: Optional[int] = None):
        """The older PopTorch's name of ``outputMode`` (``AnchorMode`` is
        ``OutputMode``), kept so code written for it runs; warns as PopTorch
        did."""
        logger.warning("Options.anchorMode is deprecated: use Options.outputMode")
        self.outputMode(anchor_mode, anchor_return_period)

    def defaultOutputMode(self) -> bool:
        """True while ``outputMode`` is still ``OutputMode.Default``."""
        return self.output_mode == OutputMode.Default

    @_setter
    def anchorTensor(self, short_name: str, long_name: str,
                     output_mode: Optional[OutputMode] = None,
                     output_return_period: Optional[int] = 1):
        """Anchor the tensor ``long_name`` so it can be read back after a run
        under ``short_name``.  ``output_mode`` None uses the model's
        output mode; ``output_return_period`` only matters for ``EveryN``."""
        _check_str("anchorTensor short_name", short_name)
        _check_str("anchorTensor long_name", long_name)
        if output_mode is not None:
            _check_enum("anchorTensor output_mode", output_mode, OutputMode)
        if output_mode == OutputMode.EveryN:
            output_return_period = _check_int(
                "anchorTensor output_return_period", output_return_period, 1)
        else:
            output_return_period = 1
        anchored = dict(self.anchored_tensors)
        anchored[short_name] = {
            "long_name": long_name,
            "output_mode": output_mode,
            "output_return_period": output_return_period,
        }
        self.anchored_tensors = anchored

    # -- execution ----------------------------------------------------------
    @_setter
    def setExecutionStrategy(self, strategy: Any):
        """Set the multi-IPU execution strategy (``PipelinedExecution``,
        ``ShardedExecution``, ``SerialPhasedExecution`` or
        ``ParallelPhasedExecution`` instance).  None (default) means the
        executor's default (pipelined, ``AutoStage.SameAsIpu``)."""
        if isinstance(strategy, enum.Enum):  # AutoStage.AutoIncrement and friends
            raise OptionsError(
                "setExecutionStrategy expects an execution strategy instance, got "
                f"{type(strategy).__name__}.{strategy.name}: an AutoStage goes inside the strategy, "
                f"for example poptorch.PipelinedExecution(poptorch.{type(strategy).__name__}.{strategy.name})")
        if strategy is None or isinstance(strategy, type) or \
                type(strategy).__module__ == "builtins" or _is_stage_or_phase(strategy):
            raise OptionsError(
                "setExecutionStrategy expects an execution strategy instance "
                f"(for example poptorch.ShardedExecution()), got {strategy!r}")
        self.execution_strategy = strategy

    @property
    def _execution_strategy(self) -> Any:
        """The strategy in effect (PopTorch's attribute): the one set, else
        PopTorch's default, PipelinedExecution(AutoStage.SameAsIpu)."""
        if self.execution_strategy is not None:
            return self.execution_strategy
        from tilefx.api.strategies import PipelinedExecution  # the strategies build on these options

        return PipelinedExecution()

    @_setter
    def setAvailableMemoryProportion(
            self, available_memory_proportion: dict[str, float]):
        """Temporary memory available to matmuls/convolutions, per IPU:
        ``{"IPU0": 0.3, "IPU1": 0.5}``; each value in (0, 1]."""
        if not isinstance(available_memory_proportion, Mapping):
            raise OptionsError(
                "setAvailableMemoryProportion expects a dict such as "
                f"{{\"IPU0\": 0.5}}, got {available_memory_proportion!r}")
        result = {}
        for key, value in available_memory_proportion.items():
            match = _IPU_KEY.match(key) if isinstance(key, str) else None
            if match is None:
                raise OptionsError(
                    "Available memory proportions are expected to be in a "
                    "dictionary of {\"IPU0\": 0.5} where the 0 in IPU is the "
                    f"index of the IPU. Invalid key: {key!r}")
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise OptionsError(
                    f"Available memory proportion for {key} must be a number "
                    f"in (0, 1], got {value!r}")
            value = float(value)
            if not is_proportion(value):
                raise OptionsError(
                    f"Available memory proportion for {key} must be in "
                    f"(0, 1], got {value}")
            if value < 0.05:
                logger.warning(
                    "Available memory proportion %s for %s is below 0.05: "
                    "this is discouraged", value, key)
            result[f"IPU{int(match.group(1))}"] = value
        self.available_memory_proportion = result

    @_setter
    def autoRoundNumIPUs(self, auto_round_num_ipus: bool = True):
        """Round the number of IPUs up to one PopTorch can reserve (a power
        of two, or a multiple of 64) instead of failing."""
        self.auto_round_num_ipus = _check_bool("autoRoundNumIPUs",
                                               auto_round_num_ipus)

    @_setter
    def broadcastBuffers(self, broadcast_buffers: bool = True):
        """Broadcast buffers to all replicas (default True)."""
        self.broadcast_buffers = _check_bool("broadcastBuffers",
                                             broadcast_buffers)

    @_setter
    def randomSeed(self, random_seed: int):
        """Seed the IPU random number generator (also seeds torch, as
        PopTorch does)."""
        if isinstance(random_seed, bool) or not isinstance(
                random_seed, numbers.Integral):
            raise OptionsAssertionError(
                f"randomSeed expects an int, got {random_seed!r}")
        random_seed = _check_int("randomSeed", random_seed, 0, 2**64 - 1)
        torch.manual_seed(random_seed)
        self.random_seed = random_seed

    @_setter
    def enableSyntheticData(self, enabled: bool):
        """Generate input data on the device instead of reading the host."""
        self.synthetic_data = _check_bool("enableSyntheticData", enabled)

    @_setter
    def enableStableNorm(self, enabled: bool):
        """Use the slower, more accurate norm implementations."""
        self.stable_norm = _check_bool("enableStableNorm", enabled)

    @_setter
    def updatableNamedBuffers(self, buffers: list[str]):
        """Names of the model buffers ``buffersFromHost()`` may update."""
        if isinstance(buffers, str) or not isinstance(buffers,
                                                      (list, tuple, set)):
            raise OptionsError("updatableNamedBuffers expects a list of "
                               f"buffer names, got {buffers!r}")
        for name in buffers:
            _check_str("updatableNamedBuffers entry", name)
        self.updatable_named_buffers = list(buffers)

    # -- device selection ---------------------------------------------------
    @_setter
    def useIpuModel(self, use_model: bool):
        """Use the IPU Model (True) or IPU hardware (False).  tilefx always
        simulates; the choice is recorded (it selects the simulated
        device's behaviour where they differ)."""
        self.use_ipu_model = _check_bool("useIpuModel", use_model)

    @_setter
    def useIpuId(self, ipu_id: int):
        """Use the (simulated) device with this id."""
        _assert(isinstance(ipu_id, int) and not isinstance(ipu_id, bool),
                f"useIpuId expects an int, got {ipu_id!r}")
        self.ipu_id = _check_int("useIpuId", ipu_id, 0)

    @_setter
    def useOfflineIpuTarget(self, ipu_version: int = 2):
        """Compile for an offline target of this IPU version (PopTorch's 1: Mk1,
        2: Mk2, 21: tilefx's Bow preset), which selects the simulated machine
        (a `setMachine` of the same version is kept); the result can be
        exported but not run.  Implies ``ConnectionType.Never``."""
        from tilefx.backend.machine import IPU_VERSIONS, machine

        version = _check_int("useOfflineIpuTarget ipu_version", ipu_version, 1)
        if version not in IPU_VERSIONS:
            raise OptionsError(f"useOfflineIpuTarget: unknown IPU version {version}: expected one of "
                               + ", ".join(f"{v} ({n})" for v, n in sorted(IPU_VERSIONS.items())))
        if machine(self.machine).ipu_version != version:
            self.machine = IPU_VERSIONS[version]
        self.ipu_version = version
        self.offline_ipu_target = True
        self.connection_type = ConnectionType.Never

    @_setter
    def connectionType(self, connection_type: ConnectionType):
        """When to attach to the device: ``Always``, ``OnDemand``, ``Never``."""
        _check_enum("connectionType", connection_type, ConnectionType,
                    OptionsAssertionError)
        self.connection_type = connection_type

    @_setter
    def syncPattern(self, sync_pattern: SyncPattern):
        """IPU/host synchronisation: ``Full``, ``SinglePipeline`` or
        ``ReplicaAndLadder``."""
        _check_enum("syncPattern", sync_pattern, SyncPattern,
                    OptionsAssertionError)
        self.sync_pattern = sync_pattern

    # -- diagnostics and files ---------------------------------------------
    @_setter
    def logCycleCount(self, log_cycle_count: bool):
        """Record the number of (simulated) cycles of each run."""
        self.log_cycle_count = _check_bool("logCycleCount", log_cycle_count)

    @_setter
    def logDir(self, log_dir: str):
        """Directory for log files (default: the current directory)."""
        self.log_dir = _check_str("logDir", log_dir)

    @_setter
    def maxRepeatLogs(self, number_repeated: Optional[int]):
        """Log at most this many repeats of a message (None: no limit)."""
        if number_repeated is not None:
            number_repeated = _check_int("maxRepeatLogs", number_repeated, 1)
        self.max_repeat_logs = number_repeated

    @_setter
    def modelName(self, name: str):
        """Model name, used for the profiling sub-directory."""
        self.model_name = _check_str("modelName", name)

    @_setter
    def setMachine(self, machine: Any):
        """tilefx: the simulated IPU, "mk1", "mk2" (default), "bow" or a
        `tilefx.backend.machine.Machine` with your own figures."""
        from tilefx.backend.machine import PRESETS, Machine

        if not isinstance(machine, Machine) and str(machine).lower() not in PRESETS:
            raise OptionsError(f"setMachine: expected one of {sorted(PRESETS)} or a Machine, "
                               f"got {machine!r}")
        self.machine = machine if isinstance(machine, Machine) else str(machine).lower()

    @_setter
    def enableProfiling(self, profile_dir: Optional[str] = None):
        """Write profiling reports to ``profile_dir`` (default ``"."``)."""
        if profile_dir is None:
            profile_dir = "."
        profile_dir = _check_str("enableProfiling", profile_dir)
        if not profile_dir:
            raise OptionsError("enableProfiling needs a non-empty directory")
        if os.path.exists(profile_dir) and not os.path.isdir(profile_dir):
            raise OptionsError(f"enableProfiling: {profile_dir!r} exists and is not a directory")
        self.profile_dir = profile_dir

    @_setter
    def enableExecutableCaching(self, path: Optional[str]):
        """Cache compiled executables in the directory ``path``; None
        disables caching."""
        if path is not None:
            path = _check_str("enableExecutableCaching", path)
            if not path:
                raise OptionsError(
                    "enableExecutableCaching needs a non-empty path (use None "
                    "to disable caching)")
        self.executable_cache_dir = path

    @_setter
    def relaxOptimizerAttributesChecks(self, relax: bool = True):
        """Report unexpected optimizer attributes as debug messages instead
        of warnings."""
        self.relax_optimizer_attributes_checks = _check_bool(
            "relaxOptimizerAttributesChecks", relax)

    @_setter
    def showCompilationProgressBar(self, show: bool = True):
        """Show a progress bar while compiling (default True)."""
        self.show_compilation_progress_bar = _check_bool(
            "showCompilationProgressBar", show)

    @_setter
    def sourceLocationExcludes(self, excludes: list[str]):
        """Replace the list of path fragments skipped when attributing IR to
        source lines."""
        if isinstance(excludes, str) or not isinstance(excludes,
                                                       (list, tuple)):
            raise OptionsError("sourceLocationExcludes expects a list of str")
        self._source_location_excludes = [
            _check_str("sourceLocationExcludes entry", e) for e in excludes
        ]

    @_setter
    def appendToLocationExcludes(self, *excludes: str):
        """Append path fragments to the source-location exclusions."""
        self._source_location_excludes = (
            self._source_location_excludes +
            [_check_str("appendToLocationExcludes entry", e)
             for e in excludes])

    @_setter
    def disableModuleNamescope(self):
        """Do not prefix op names with the module path."""
        self._module_namescope_enabled = False

    # -- whole object -------------------------------------------------------
    def loadFromFile(self, filepath: str) -> "Options":
        """Apply the option calls in a config file, one per line, written
        as in Python without the ``options.`` prefix::

            deviceIterations(1)
            setExecutionStrategy(poptorch.ShardedExecution())
            Training.gradientAccumulation(4)  # comments are allowed

        Unlike PopTorch, nothing is executed: lines are parsed and only
        option setters with literal, enum, dtype and whitelisted-constructor
        arguments are accepted; anything else raises ``ConfigFileError``
        (a ``poptorch.Error``) naming the file, line and column.  The file
        is applied all-or-nothing.
        """
        self._check_not_frozen()
        filename = os.fspath(filepath)
        from tilefx.api.options_file import check_text_size

        with open(filename, "rb") as f:
            check_text_size(os.fstat(f.fileno()).st_size, filename)  # before reading it
            data = f.read(limits.OPTIONS_TEXT_BYTES.value() + 1)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:  # a binary or corrupt file: say where, as for a bad line
            lineno = data.count(b"\n", 0, e.start) + 1
            column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            line = data.split(b"\n")[lineno - 1].decode("utf-8", "backslashreplace")
            raise ConfigFileError(f"not UTF-8 text (byte 0x{data[e.start]:02x})", filename, lineno,
                                  column, line, "UnicodeDecodeError") from None
        from tilefx.api.options_file import _apply_commands, _parse_config

        commands = _parse_config(text, filename, type(self))
        # Dry run on a copy first so that a failing setter leaves self intact.
        _apply_commands(self.clone(), commands)
        _apply_commands(self, commands)
        return self

    def toDict(self) -> dict[str, Any]:
        """Every option value: the general ones by attribute name and each
        group as a nested dict under its property name."""
        out = {}
        for key, value in self._public_items():
            # The strategy object is shared, not copied.
            out[key] = (value if key == "execution_strategy" else
                        copy.deepcopy(value))
        for name in ("Precision", "Training", "Jit", "Distributed"):
            out[name] = getattr(self, name).toDict()
        out["TensorLocations"] = {
            k: (v.toDict() if isinstance(v, TensorLocationSettings) else v)
            for k, v in self.TensorLocations._public_items()
        }
        out["_Popart"] = copy.deepcopy(self._popart.options)
        return out

    def clone(self) -> "Options":
        """An unfrozen deep copy of these options."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        body = [f"{k}={_format_value(v)}" for k, v in self._public_items()]
        for name in ("Precision", "Training", "TensorLocations", "Jit",
                     "Distributed", "_Popart"):
            body.append(f"{name}={getattr(self, name)!r}")
        return f"{type(self).__name__}({', '.join(body)})"

    # -- JSON defaults --------------------------------------------------------
    def _apply_json_defaults(self, var: str, text: str) -> None:
        try:
            data = limits.load_json(text, var, limits.OPTIONS_TEXT_BYTES)
        except Error as e:
            raise Error(e.message, type="options") from None
        if not isinstance(data, dict):
            raise Error(f"{var} must hold a JSON object such as "
                        "{\"deviceIterations\": 4}, got "
                        f"{type(data).__name__}", type="options")
        from tilefx.api.options_file import _json_value, _resolve_group, _resolve_setter, _ResolveError

        for key, value in data.items():
            path = key.split(".")
            if not all(p.isidentifier() for p in path):
                raise Error(f"{var}: invalid option name {key!r}",
                            type="options")
            try:
                cls = Options
                for group in path[:-1]:
                    cls = _resolve_group(cls, group)
                _resolve_setter(cls, path[-1])
            except _ResolveError as e:
                raise Error(f"{var}: {key!r}: {e}", type="options") from None
            args = ([_json_value(v) for v in value] if isinstance(value, list)
                    else [_json_value(value)])
            target: Any = self
            for group in path[:-1]:
                target = getattr(target, group)
            try:
                getattr(target, path[-1])(*args)
            except (ValueError, TypeError, AssertionError, Error) as e:
                raise Error(f"{var}: {key!r}: {e}", type="options") from e


Options._GROUP_CLASSES = {
    "Precision": _PrecisionOptions,
    "Training": _TrainingOptions,
    "TensorLocations": _TensorLocationOptions,
    "Jit": _JitOptions,
    "Distributed": _DistributedOptions,
    "_Popart": _PopartOptions,
    "_popart": _PopartOptions,
}
