"""PopTorch's `Options` as the compiler driver's `CompileConfig` and the
runner's `HostSettings`: the one place the PopTorch surface says what a
compilation and its host loop read from its options (the executor adds what
its optimizer says)."""

from __future__ import annotations

import os
from typing import Any, Mapping

import torch

from tilefx.api.enums import CommGroupType, HalfFloatCastingBehavior, OutputMode, ReductionType
from tilefx.api.options import Options
from tilefx.driver import DEFAULT_STRATEGY, CompileConfig
from tilefx.errors import Error
from tilefx.runner.settings import HostSettings

# OutputMode as the runner names it (Default is resolved by the model's kind)
OUTPUT_MODE_NAMES = {OutputMode.All: "all", OutputMode.Final: "final", OutputMode.Sum: "sum",
                 OutputMode.EveryN: "every_n"}


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


def surface_config(options: Options, training: bool, optimizer: Mapping[str, Any] | None = None,
                   optimizer_groups: Mapping[str, int] | None = None,
                   loss_scaled: bool = False) -> tuple[CompileConfig, HostSettings]:
    """What a model wrapped with `options` compiles with (`compile_config`)
    and what its host loop reads (`host_settings`)."""
    return (compile_config(options, training, optimizer, optimizer_groups, loss_scaled),
            host_settings(options, training))


def host_settings(options: Options, training: bool) -> HostSettings:
    """The runner's HostSettings of a model wrapped with `options`: the output
    mode (Default: Final for training, All for inference), the reduction,
    the replicas' buffers and inputs, the offline target, automatic loss
    scaling's period, the executable cache (or POPTORCH_CACHE_DIR) and the
    report's directory and name."""
    o = options
    mode = o.output_mode
    if mode == OutputMode.Default:
        mode = OutputMode.Final if training else OutputMode.All
    return HostSettings(
        output_mode=OUTPUT_MODE_NAMES[mode],
        output_return_period=int(o.output_return_period),
        mean_reduction=o.Training.reduction_type == ReductionType.Mean,
        broadcast_buffers=bool(o.broadcast_buffers),
        input_group_size=int(o.input_group_size),
        input_group_orthogonal=o.input_group_type == CommGroupType.Orthogonal,
        offline=bool(o.offline_ipu_target),
        loss_scaling_period=max(_als_period(o), 1),
        cache_dir=o.executable_cache_dir or os.environ.get("POPTORCH_CACHE_DIR") or None,
        profile_dir=o.profile_dir or None,
        name=o.model_name or None)


def _als_period(o: Options) -> int:
    period = o._Popart.options.get("automaticLossScalingSettings.updatePeriod", 1)
    try:
        return int(period)
    except (TypeError, ValueError):
        raise Error("Options._Popart automaticLossScalingSettings.updatePeriod must be an int, "
                    f"got {period!r}") from None


def _int_option(value):
    """A PopART enum option set as an int or an int enum (`_Popart.set`'s
    values are the enum's ints) as a plain int; anything else as it is, for
    CompileConfig to refuse by name."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
