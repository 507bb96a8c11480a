"""PopTorch's `Options` as the compiler driver's `CompileConfig`: the one
place the PopTorch surface says what a compilation reads from its options
(the executor adds what its optimizer says); and the Options of an executor
given a `CompileConfig` to run (another surface's: PopART's sessions), held
to it field by field."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import torch

from tilefx.api.enums import HalfFloatCastingBehavior, OutputMode, ReductionType
from tilefx.api.options import Options
from tilefx.driver import DEFAULT_STRATEGY, CompileConfig
from tilefx.errors import Error


def compile_config(options: Options, training: bool, optimizer: Mapping[str, Any] | None = None,
                   optimizer_groups: Mapping[str, int] | None = None, loss_scaled: bool = False) -> CompileConfig:
    """The CompileConfig of a model compiled under `options`. `optimizer`:
    its configuration (lowering/optimizers.py `optimizer_config`, with `grad_scale`)
    and `optimizer_groups` each weight's parameter group; `loss_scaled`: a
    loss scale other than 1 (or a variable one) applies."""
    o = options
    strategy = o.execution_strategy
    precision = o.Precision
    policy = None
    if precision.autocast_policy is not None and precision.autocast_enabled:
        if not hasattr(precision.autocast_policy, "op_sets"):
            raise Error(f"autocastPolicy expects a poptorch.Policy, got {precision.autocast_policy!r}")
        policy = {k: list(v) for k, v in precision.autocast_policy.op_sets().items()}
    liveness = getattr(strategy, "liveness", None)
    return CompileConfig(
        training=training,
        machine=o.machine,
        strategy=strategy.to_config() if strategy is not None else DEFAULT_STRATEGY,
        liveness=liveness.name if liveness is not None else "AlwaysLive",
        available_memory_proportion={k: float(v) for k, v in (o.available_memory_proportion or {}).items()},
        autocast=bool(precision.autocast_enabled),
        autocast_policy=policy,
        downcast_half=precision.half_float_casting == HalfFloatCastingBehavior.FloatDowncastToHalf,
        half_partials=precision.partials_type == torch.float16,
        stochastic_rounding=bool(precision.stochastic_rounding),
        optimizer=optimizer,
        optimizer_groups=optimizer_groups or {},
        automatic_loss_scaling=training and bool(o.Training.automatic_loss_scaling),
        loss_scaled=loss_scaled,
        device_iterations=o.device_iterations,
        replication_factor=o.replication_factor,
        gradient_accumulation=o.Training.gradient_accumulation if training else 1,
        processes=o.Distributed.numProcesses,
        process_id=o.Distributed.processId,
        # PopTorch's count rule holds where IPUs are reserved: not for an offline
        # target nor the IPU Model, which acquire no devices (PopTorch checks the
        # count when it attaches to hardware; its own test of the rule is hardware-only)
        reserve_ipus=not (o.offline_ipu_target or o.use_ipu_model),
        auto_round_num_ipus=bool(o.auto_round_num_ipus),
        locations=o.TensorLocations.resolved(),
        optimizer_location_set=o.TensorLocations.optimizer is not None,
        host_io=not o.synthetic_data,
        decompose_grad_sum=bool(o._Popart.options.get("decomposeGradSum", False)),
        auto_recomputation=_int_option(o._Popart.options.get("autoRecomputation")),
        seed=o.random_seed)


# what a CompileConfig says that Options cannot: the executor compiles with
# the config's own (the strategy as the `ipu.strategy` attribute, its liveness)
_CONFIG_ONLY = ("strategy", "liveness")


def options_for_config(config: CompileConfig, mean_reduction: bool = False, cache_dir: str | None = None) -> Options:
    """The Options of an executor that compiles with `config` and runs its
    host loop: the factors, the machine, the seed and the precision the
    config says, every output of every micro-batch returned (OutputMode.All);
    `mean_reduction`: a training step's gradients averaged over its
    micro-batches and replicas, else summed; `cache_dir`: the executable
    cache's directory (None: no cache). A config these options would read
    otherwise (a field the host loop cannot honour) is an Error naming it."""
    o = Options()
    o.deviceIterations(config.device_iterations)
    o.replicationFactor(config.replication_factor)
    o.outputMode(OutputMode.All)
    o.setMachine(config.machine)
    if config.training:
        o.Training.gradientAccumulation(config.gradient_accumulation)
        o.Training.accumulationAndReplicationReductionType(ReductionType.Mean if mean_reduction
                                                           else ReductionType.Sum)
    if config.stochastic_rounding:
        o.Precision.enableStochasticRounding(True)
    if config.half_partials:
        o.Precision.setPartialsType(torch.float16)
    if config.seed is not None:
        o.randomSeed(config.seed)
    if config.decompose_grad_sum:
        o._Popart.set("decomposeGradSum", True)
    if config.auto_recomputation is not None:
        o._Popart.set("autoRecomputation", config.auto_recomputation)
    if cache_dir is not None:
        o.enableExecutableCaching(cache_dir)
    read = compile_config(o, config.training, config.optimizer, config.optimizer_groups, config.loss_scaled)
    differ = [f.name for f in dataclasses.fields(CompileConfig)
              if f.name not in _CONFIG_ONLY and getattr(read, f.name) != getattr(config, f.name)]
    if differ:
        raise Error(f"the PopTorch executor cannot run this CompileConfig: its {', '.join(differ)} "
                    "would be read otherwise by the host loop")
    return o


def _int_option(value):
    """A PopART enum option set as an int or an int enum (`_Popart.set`'s
    values are the enum's ints) as a plain int; anything else as it is, for
    CompileConfig to refuse by name."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
