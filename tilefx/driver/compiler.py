"""`compile(module, config) -> Program`: the compiler core every surface
calls. From a frontend's graph IR (`func.func @main` with its arguments'
roles) and a `CompileConfig`: the graph passes (`passes/pipelines.py`),
each built from the config with its options as fields (`autocast_pass`,
`available_memory_pass`, `partials_type_pass`, ...), the compiled `@main` and `@update` (`backend/executor.py`), and the machine
model's schedule and profile (`backend/schedule.py`, `backend/profile.py`,
with the out-of-memory check). Nothing here imports torch: the torch
frontend's verifier rules and ATen kernels reach the program through the
plugin registry (`tilefx/runtime.py`) the caller installs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, i64

from tilefx.backend import schedule as schedules
from tilefx.backend.executor import CompiledFunction
from tilefx.backend.locations import ON_CHIP, Locations
from tilefx.backend.machine import machine as machine_named
from tilefx.backend.profile import Profile, build_profile
from tilefx.backend.schedule import Schedule
from tilefx.dialects.ipu import StageOp
from tilefx.dialects.irutil import arg_roles, find_func, from_py, result_roles, to_py
from tilefx.dialects.names import GROUP_KEY, OPTIMIZER_KEY, PARAM_KEY, STAGES_KEY, STRATEGY_KEY
from tilefx.driver.config import CompileConfig
from tilefx.driver.program import Program, role_list
from tilefx.errors import Error
from tilefx.passes import pipelines
from tilefx.passes.assign_stages import AssignStagesPass, ipu_count_error
from tilefx.passes.auto_stage import AutoStagePass
from tilefx.passes.autocast import AutocastPass
from tilefx.passes.available_memory import AvailableMemoryPass
from tilefx.passes.partials_type import PartialsTypePass
from tilefx.passes.loss_scaling import LossScalingPass


def compile(module: ModuleOp, config: CompileConfig, rng: np.random.Generator | None = None,
            after_passes: Callable[[ModuleOp], None] | None = None, check_types: bool = False) -> Program:
    """The program of a frontend's module (changed in place: the options
    written in, then the graph passes). `after_passes(module)` is called
    between the passes and the program (a surface's logs and checks);
    `rng` seeds the random ops (else `config.seed`); `check_types`: @main
    checks its arguments' shapes and types at each call (the tools)."""
    prepare(module, config)
    run_graph_passes(module, config)
    if after_passes is not None:
        after_passes(module)
    return build(module, config, rng, check_types)


def prepare(module: ModuleOp, config: CompileConfig) -> None:
    """Write into the traced module the two parts of the config that are IR,
    not pass options, as a compiler engineer writes them for `tilefx-opt`:

    - the optimizer (`ipu.optimizer`) and each weight's parameter group
      (training): what `@update` is built from. It stays in the module
      because the program carries it: an executable file stores the module,
      and a new optimizer (`setOptimizer`, `build_update`) rebuilds `@update`
      from the one written there;
    - the execution strategy (`ipu.strategy`): the stage assignment
      `ipu-assign-stages` reads, which `ipu-auto-stage` rewrites with the
      stages it chose and the schedule reads back (`schedule_of`)."""
    if config.training and config.optimizer is not None:
        module.attributes[OPTIMIZER_KEY] = from_py(dict(config.optimizer))
        main_fn = find_func(module, "main")
        attrs = [dict(a.data) for a in main_fn.arg_attrs.data]
        for a in attrs:
            if PARAM_KEY in a:
                a[GROUP_KEY] = IntegerAttr(config.optimizer_groups.get(a[PARAM_KEY].data, 0), i64)
        main_fn.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
    module.attributes[STRATEGY_KEY] = from_py(dict(config.strategy))


def run_graph_passes(module: ModuleOp, config: CompileConfig) -> None:
    """The graph passes of `passes/pipelines.py`, each built from the config."""
    als = config.training and config.automatic_loss_scaling
    scaled = config.training and (als or config.loss_scaled)
    pipelines.run_graph_passes(
        module, training=config.training, autocast=autocast_pass(config),
        assign=AssignStagesPass(gradient_accumulation=config.gradient_accumulation if config.training else 1,
                                device_iterations=config.device_iterations,
                                auto_round_num_ipus=config.auto_round_num_ipus,
                                check_ipu_count=config.reserve_ipus),
        loss_scaling=LossScalingPass(automatic=als) if scaled else None,
        auto_recomputation=config.auto_recomputation, host_io=config.host_io,
        available_memory=available_memory_pass(config), partials_type=partials_type_pass(config),
        auto_stage=auto_stage_pass(config))


def auto_stage_pass(config: CompileConfig) -> AutoStagePass:
    """`ipu-auto-stage` costing the config's micro-batches on its machine,
    with its available memory proportions, the optimizer state where it lives
    and the other tensors' locations (run where the strategy asks for
    automatic stages; the strategy names the IPUs and the schedule)."""
    memory = available_memory_pass(config)
    replicas = config.replication_factor * config.processes
    where = config.locations.optimizer
    state = {}
    if config.optimizer_location_set:
        state = {"state_on_chip": where.on_chip, "state_min_elements_off_chip": where.min_elements_off_chip,
                 "state_min_elements_sharded": where.min_elements_sharded,
                 "state_shards": replicas if where.sharded else 1}
    # weights, activations and accumulators (the optimizer state is the state_* options)
    placed = replace(config.locations, optimizer=ON_CHIP)
    return AutoStagePass(
        micro_batches=config.gradient_accumulation if config.training else config.device_iterations,
        machine=machine_named(config.machine).name,
        auto_recomputation=-1 if config.auto_recomputation is None else config.auto_recomputation,
        host_io=config.host_io, default_proportion=memory.default_proportion, per_ipu=memory.per_ipu,
        ipus=memory.ipus, locations=placed, replicas=replicas if placed != Locations() else 1, **state)


def partials_type_pass(config: CompileConfig) -> PartialsTypePass | None:
    """`ipu-partials-type` for half partials (the matmul rate and partials
    memory the machine model costs); None: float partials, the default."""
    return PartialsTypePass(type="half") if config.half_partials else None


def available_memory_pass(config: CompileConfig) -> AvailableMemoryPass:
    """`ipu-available-memory` with the config's per-IPU proportions."""
    return AvailableMemoryPass.of_proportions(config.available_memory_proportion)


def autocast_pass(config: CompileConfig) -> AutocastPass | None:
    """`ipu-autocast` with the config's precision policy: the policy where
    autocast is on (PopTorch's default unless given), and FloatDowncastToHalf
    (float32 cast down where float16 inputs meet it) with no policy where only
    that is asked for; None: neither."""
    if config.autocast:
        return AutocastPass.of_policy(config.autocast_policy, downcast=config.downcast_half)
    if config.downcast_half:
        return AutocastPass.of_policy({}, downcast=True)
    return None


def build(module: ModuleOp, config: CompileConfig, rng: np.random.Generator | None = None,
          check_types: bool = False) -> Program:
    """The program of a module the graph passes ran on (compiled, or read
    from an executable file): the IPU count checked, `@main` and `@update`
    compiled, then the machine model, whose out-of-memory check fails a
    program that does not fit before anything runs."""
    check_ipu_count(module, config)
    main_fn = find_func(module, "main")
    if rng is None:
        rng = np.random.default_rng(config.seed)
    program = Program(
        module=module,
        main=CompiledFunction(main_fn, rng, stochastic_rounding=config.stochastic_rounding,
                              half_partials=config.half_partials, check_types=check_types),
        update=None, main_args=role_list(arg_roles(main_fn)), main_results=role_list(result_roles(main_fn)),
        config=config)
    if config.training:
        build_update(program, config.optimizer)
    program.schedule = schedule_of(module, config)
    program.profile = profile_of(module, config, program.schedule)
    return program


def build_update(program: Program, optimizer: Mapping[str, Any] | None) -> None:
    """Compile `@update` with `optimizer`'s configuration written in (None:
    the one the module holds)."""
    if optimizer is not None:
        program.module.attributes[OPTIMIZER_KEY] = from_py(dict(optimizer))
    upd = find_func(program.module, "update")
    program.update = CompiledFunction(upd)
    program.update_args = role_list(arg_roles(upd))
    program.update_results = role_list(result_roles(upd))


def check_ipu_count(module: ModuleOp, config: CompileConfig) -> None:
    """Replicas multiply the IPUs: where IPUs are reserved, the total must be
    a count PopTorch can reserve (a power of 2 or a multiple of 64)."""
    if not config.reserve_ipus:
        return
    ipus = to_py(module.attributes[STAGES_KEY])["num_ipus"]
    total = ipus * config.replication_factor
    message = ipu_count_error(total, f"{ipus} IPU(s) per replica x replicationFactor("
                                     f"{config.replication_factor}) = {total} IPUs: ")
    if message is not None and not config.auto_round_num_ipus:
        raise Error(message)


def schedule_of(module: ModuleOp, config: CompileConfig) -> Schedule:
    """Which IPU runs which stage and micro-batch when, by the strategy
    ipu-assign-stages recorded (`ipu.stages`, `ipu.strategy`)."""
    info = to_py(module.attributes[STAGES_KEY])
    stage_ipu, stage_phase, stage_dir = {}, {}, {}
    for op in find_func(module, "main").body.block.ops:
        if isinstance(op, StageOp):
            stage_ipu[op.stage.value.data] = op.ipu.value.data
            stage_phase[op.stage.value.data] = op.phase.value.data
            stage_dir[op.stage.value.data] = op.direction.data
    kind, num_fwd = info["kind"], info["forward_stages"]
    M, repeats = (config.gradient_accumulation, config.device_iterations) if config.training else \
        (config.device_iterations, 1)
    if kind in ("pipelined", "single"):
        return schedules.pipelined(stage_ipu, num_fwd, M, config.training, repeats,
                                   to_py(module.attributes[STRATEGY_KEY]).get("schedule", "FillDrain"))
    if kind == "sharded":
        return schedules.sharded(stage_ipu, num_fwd, M, config.training, repeats)
    return schedules.phased(stage_ipu, stage_phase, num_fwd, M, config.training, repeats,
                            parallel=kind == "parallel_phased", liveness=config.liveness, stage_dir=stage_dir)


def profile_of(module: ModuleOp, config: CompileConfig, schedule: Schedule | None = None,
               check_memory: bool = True) -> Profile:
    """The machine model's profile of a module the graph passes ran on:
    cycles, timeline and each tile's memory (`check_memory`: a program that
    does not fit is an Error)."""
    if schedule is None:
        schedule = schedule_of(module, config)
    return build_profile(
        module, find_func(module, "main"), find_func(module, "update") if config.training else None, schedule,
        machine_named(config.machine), training=config.training, device_iterations=config.device_iterations,
        locations=config.locations, accumulate=config.accumulate, replicas=config.replication_factor,
        processes=config.processes, process_id=config.process_id, host_io=config.host_io,
        decompose_grad_sum=config.decompose_grad_sum, check_memory=check_memory)


__all__ = ["compile", "prepare", "run_graph_passes", "autocast_pass", "auto_stage_pass", "available_memory_pass",
           "partials_type_pass", "build", "build_update", "check_ipu_count", "schedule_of", "profile_of"]
