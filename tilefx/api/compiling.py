"""The compile path of a PoplarExecutor: from its first call's inputs to
the compiled program (trace, the graph passes with the options written into
the module, the numpy/ATen program, the machine model's schedule and
profile), the joining of replica processes, and the checks PopTorch makes
at compile time. A mixin of PoplarExecutor (api/executor.py), kept apart so
that the call path and the compile path each read as one story."""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from types import SimpleNamespace

import numpy as np

import torch
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.utils.exceptions import VerifyException

from tilefx.api import compile_log
from tilefx.api.logs import CompileProgress, compile_summary
from tilefx.api.anchors import Anchors
from tilefx.api.program import Program, role_list
from tilefx.api.enums import HalfFloatCastingBehavior, OutputMode
from tilefx.errors import Error
from tilefx.gcpause import gc_paused
from tilefx.api.options import Options
from tilefx.api.optim import optimizer_config
from tilefx.api.replica_grouping import ReplicaGroups
from tilefx.backend.executor import CompiledFunction
from tilefx.dialects.irutil import arg_roles, find_func, from_py, result_roles, to_py
from tilefx.lowering.call_spec import CallSpec, check_dense
from tilefx.lowering.from_torch import TracedGraph, np_dtype_of, trace
from tilefx.lowering.no_compiler import without_compiler
from tilefx.lowering.tracing_state import GradientOutputs
from tilefx.passes.pipelines import run_graph_passes
from tilefx.backend import schedule
from tilefx.backend.machine import machine
from tilefx.backend.profile import Profile, build_profile
from tilefx.backend.schedule import Schedule
from tilefx.api.module_options import set_module_options
from tilefx.dialects.ipu import StageOp
from tilefx.passes.assign_stages import AssignStagesPass, ipu_count_error
from tilefx.passes.loss_scaling import LossScalingPass
from tilefx.dialects.names import ALS_TRACKED_KEY, AUTOCAST_POLICY_KEY, GROUP_KEY, HALF_FLOAT_CASTING_KEY, OPTIMIZER_KEY, PARAM_KEY, STAGES_KEY, STRATEGY_KEY

log = logging.getLogger("tilefx")


class CompilePath:
    """The compile path of a PoplarExecutor: from its first call's inputs to"""

    def _compile(self, inputs: list[torch.Tensor], call: CallSpec) -> None:
        # one session without torch.compile for all of it: the trace, the verifier's
        # meta functions and the optimizer's param groups would each start their own
        with without_compiler(), gc_paused():
            try:
                self._compile_in_session(inputs, call)
            except VerifyException as e:
                # every aten op is checked against torch's own rules: a program that
                # fails them is tilefx's fault, never a deep traceback for the user
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise Error(f"internal error: the compiled program does not verify ({first}); this is "
                            "a tilefx bug: please report it with the model", type="internal") from None

    def _compile_in_session(self, inputs: list[torch.Tensor], call: CallSpec) -> None:
        from tilefx.api import executable_cache

        from tilefx.api.compat import run_pre_compile_hooks

        run_pre_compile_hooks()  # registerPreCompileHook
        self._check_updatable_buffers()
        start = time.perf_counter()
        self._resolve_mean_reduction()
        self._tilefx_anchors = Anchors.of(self)  # Options.anchorTensor (api/anchors.py)
        _warn_unmodelled_locations(self._options.TensorLocations)
        self._micro_batch(inputs, call.tensor_names())  # checks every input's batch dimension
        if self._joins_processes():  # meet the others first: a bad rendezvous fails before tracing
            from tilefx.api import distributed

            distributed.rendezvous(self._options)
        self._call = call
        self._compiled_inputs = [(tuple(x.shape), x.dtype) for x in inputs]
        self._groups = ReplicaGroups.of(self._user_model, self._options.replication_factor)
        progress = CompileProgress(f"{type(self._user_model).__name__} "
                                   f"({'training' if self._training else 'inference'})", self._options)
        if executable_cache.load_cached(self, inputs, start):  # a cache hit: no tracing, no passes
            progress.mark("loaded from the executable cache", 100)
            progress.close(compile_summary(self._profile, self._program.module, self._factors()[1]), cached=True)
            return
        d_, r_, g_size, g_ = self._factors()
        n = d_ * (r_ // g_size) * g_
        model = self._user_model
        # The trace runs in the wrapper's mode. A model already in it keeps its submodules'
        # own modes (a frozen BatchNorm, eval() in a model in training mode, uses its running
        # statistics as in eager); one in the other mode (an inference model compiled after
        # model.train()) is switched as a whole. Every module's mode is put back afterwards.
        modes = [(m, m.training) for m in model.modules()]
        if model.training != self._training:
            model.train(self._training)
        self._check_output_mode()
        # parameters the optimizer does not list are not trained (as with torch.optim)
        check_dense(model)
        untrained = self._params_outside_optimizer() if self._training else []
        for p_ in untrained:
            p_.requires_grad_(False)
        anchored = self._tilefx_anchors is not None and self._training and self._tilefx_anchors.gradients
        try:
            if anchored:  # anchored gradients: returned by main after the model's outputs
                GradientOutputs.requested = tuple(self._tilefx_anchors.gradients)
            with self._groups.per_replica_view(model):
                traced = trace(model, tuple(x[: x.shape[0] // n] if x.dim() else x for x in inputs),
                               self._training, upcast_inputs=self._upcast_inputs(inputs), call=call)
        except BaseException:
            progress.abort()
            raise
        finally:
            if anchored:
                GradientOutputs.requested = ()
            for m_, mode in modes:
                m_.training = mode
            for p_ in untrained:
                p_.requires_grad_(True)
        progress.mark("traced the model", 40)
        if anchored:
            traced.anchor_outputs = len(self._tilefx_anchors.gradients)
        self._traced_params = set(traced.params)
        import_module = traced.module.clone()
        module = traced.module
        if self._training:
            cfg, group_of = optimizer_config(self._optimizer, self._param_names())
            cfg["grad_scale"] = self._grad_scale()
            module.attributes[OPTIMIZER_KEY] = from_py(cfg)
            main_fn = find_func(module, "main")
            attrs = [dict(a.data) for a in main_fn.arg_attrs.data]
            for a in attrs:
                if PARAM_KEY in a:
                    a[GROUP_KEY] = IntegerAttr(group_of.get(a[PARAM_KEY].data, 0), i64)
            main_fn.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
        set_module_options(module, self._options)
        if self._before_passes is not None:  # tilefx.plan: the traced module, costed many ways
            progress.close()
            self._before_passes(import_module, module)
            return
        D, _, _, G = self._factors()
        als = self._training and bool(self._options.Training.automatic_loss_scaling)
        scaled = self._training and (als or self._loss_scaling() != 1.0 or _is_variable(
            self._optimizer, "loss_scaling"))
        precision = self._options.Precision
        downcast = precision.half_float_casting == HalfFloatCastingBehavior.FloatDowncastToHalf
        if downcast:  # ipu-autocast casts float32 down where float16 inputs meet it
            module.attributes[HALF_FLOAT_CASTING_KEY] = StringAttr("downcast")
            if not precision.autocast_enabled:
                module.attributes[AUTOCAST_POLICY_KEY] = from_py({k: [] for k in ("fp16", "fp32", "promote", "demote")})
        if precision.autocast_policy is not None and precision.autocast_enabled:
            if not hasattr(precision.autocast_policy, "op_sets"):
                raise Error(f"autocastPolicy expects a poptorch.Policy, got {precision.autocast_policy!r}")
            module.attributes[AUTOCAST_POLICY_KEY] = from_py(
                {k: list(v) for k, v in precision.autocast_policy.op_sets().items()})
        run_graph_passes(module, training=self._training, autocast=bool(precision.autocast_enabled) or downcast,
                         assign=AssignStagesPass(
            gradient_accumulation=G, device_iterations=D,
            auto_round_num_ipus=bool(self._options.auto_round_num_ipus),
            check_ipu_count=self._reserves_ipus()),
            loss_scaling=LossScalingPass(automatic=als) if scaled else None)
        progress.mark("ran the graph passes", 30)
        compile_log.log_options(self._options, module)
        compile_log.log_placements(module)
        self._install(traced, import_module, module,
                      [(x.shape[0] // n,) + tuple(x.shape[1:]) if x.dim() else () for x in inputs],
                      [np_dtype_of(x.dtype) for x in inputs], start)
        progress.mark("built the program and the machine model", 30)
        executable_cache.store_cached(self, inputs)
        progress.close(compile_summary(self._profile, module, self._factors()[1]))

    def _install(self, traced: TracedGraph, import_module: ModuleOp, module: ModuleOp,
                 input_shapes: list[tuple], input_dtypes: list[np.dtype], start: float) -> None:
        """Make the compiled graph IR this executor's program (after the passes,
        or as loaded from an executable file)."""
        self._traced_params = set(traced.params)
        self._fast_call = None  # a new program: the next call is checked in full
        if self._tilefx_anchors is None:  # loaded from an executable file: the options' anchors
            self._tilefx_anchors = Anchors.of(self)
        self._check_ipu_count(module)
        if traced.meta_tensors and not self._options.offline_ipu_target:
            _check_not_meta(traced.meta_tensors)
        als = self._training and bool(self._options.Training.automatic_loss_scaling)
        self._als_tracked = to_py(module.attributes[ALS_TRACKED_KEY]) if als else 0
        self._als_factor = 1.0
        self._als_updates = 0
        self._als_upper = 0
        self._als_lower = 0
        main_fn = find_func(module, "main")
        program = Program(
            traced=traced, import_module=import_module, module=module,
            main=CompiledFunction(main_fn, self._rng,
                                  stochastic_rounding=bool(self._options.Precision.stochastic_rounding),
                                  half_partials=self._options.Precision.partials_type == torch.float16),
            update=None,
            main_args=role_list(arg_roles(main_fn)), main_results=role_list(result_roles(main_fn)),
            input_shapes=input_shapes, input_dtypes=input_dtypes)
        if self._training:
            self._build_update(program, compile_only=True)
        # the machine model first: a program that does not fit fails before any copy
        self._schedule = self._make_schedule(module)
        self._profile = self._make_profile(program)
        self._program = program
        self._attached = not self._options.offline_ipu_target  # PopTorch attaches when it compiles
        self.copyWeightsToDevice()
        self._consts = traced.consts
        if self._training and not self._options.offline_ipu_target:
            self._init_opt_state()  # offline: the state is sized by the profile, never made
        program.compile_seconds = time.perf_counter() - start
        log.debug("compiled in %.3f s: %s", program.compile_seconds, self._profile.table())
        profile_dir = _profile_dir(self._options)
        if profile_dir:
            self._profile.write(_executor_profile_dir(self, profile_dir))
        if self._joins_processes():
            self._join_processes(input_shapes, input_dtypes)

    def _joins_processes(self) -> bool:
        """A training model of several processes (an offline target never runs)."""
        return self._training and self._options.Distributed.num_processes > 1 and \
            not self._options.offline_ipu_target

    def _join_processes(self, input_shapes: list[tuple], input_dtypes: list[np.dtype]) -> None:
        """Check the processes compiled the same thing, then start them all from
        process 0's weights, buffers and optimizer state (docs/distributed.md)."""
        from tilefx.api import distributed

        if self._groups.grouped:
            self._program = None
            raise Error("replica grouping of weights (replicaGrouping) is not supported across processes: "
                        f"{', '.join(self._groups.names)} are grouped")
        try:
            self._dist = distributed.join_training_model(self, input_shapes, input_dtypes)
        except Error:
            self._program = None  # not compiled: never run alone, without the others
            raise
        self._write_back()

    def _make_profile(self, program: Program, check_memory: bool = True) -> Profile:
        D, R, _, G = self._factors()
        update_fn = find_func(program.module, "update") if self._training else None
        return build_profile(
            program.module, find_func(program.module, "main"), update_fn, self._schedule,
            machine(self._options.machine), training=self._training, device_iterations=D,
            locations=self._options.TensorLocations.resolved(),
            accumulate=self._training and (G > 1 or R > 1), replicas=R,
            processes=self._options.Distributed.numProcesses,
            process_id=self._options.Distributed.processId,
            host_io=not self._options.synthetic_data,
            decompose_grad_sum=bool(self._options._Popart.options.get("decomposeGradSum", False)),
            check_memory=check_memory)

    def trace_only(self, *inputs) -> ModuleOp:
        """The graph IR the trace of these inputs makes, before any graph
        pass, with the options written in: what tilefx.plan costs in many
        configurations. Nothing is compiled."""
        got = {}
        self._before_passes = lambda import_module, module: got.setdefault("module", module)
        try:
            self.compile(*inputs)
        finally:
            self._before_passes = None
        return got["module"]

    def profile_module(self, module: ModuleOp, options) -> Profile:
        """The machine model's profile of a module the graph passes ran on,
        under `options` (this executor's own are left as they are): the
        planner's costing of one configuration. No out-of-memory check: the
        caller reads the peaks."""
        saved, saved_schedule = self._options, getattr(self, "_schedule", None)
        self._options = options
        try:
            self._schedule = self._make_schedule(module)
            return self._make_profile(SimpleNamespace(module=module), check_memory=False)
        finally:
            self._options, self._schedule = saved, saved_schedule

    def _make_schedule(self, module: ModuleOp) -> Schedule:
        info = to_py(module.attributes[STAGES_KEY])
        D, _, _, G = self._factors()
        stage_ipu, stage_phase, stage_dir = {}, {}, {}
        for op in find_func(module, "main").body.block.ops:
            if isinstance(op, StageOp):
                stage_ipu[op.stage.value.data] = op.ipu.value.data
                stage_phase[op.stage.value.data] = op.phase.value.data
                stage_dir[op.stage.value.data] = op.direction.data
        kind, num_fwd = info["kind"], info["forward_stages"]
        M, repeats = (G, D) if self._training else (D, 1)
        if kind in ("pipelined", "single"):
            return schedule.pipelined(stage_ipu, num_fwd, M, self._training, repeats,
                                      to_py(module.attributes[STRATEGY_KEY]).get("schedule", "FillDrain"))
        if kind == "sharded":
            return schedule.sharded(stage_ipu, num_fwd, M, self._training, repeats)
        strategy = self._options.execution_strategy
        return schedule.phased(stage_ipu, stage_phase, num_fwd, M, self._training, repeats,
                               parallel=kind == "parallel_phased",
                               liveness=strategy.liveness.name, stage_dir=stage_dir)

    def _params_outside_optimizer(self) -> list[torch.nn.Parameter]:
        listed = {id(p) for g in self._optimizer.param_groups for p in g["params"]}
        return [p for p in self._user_model.parameters() if p.requires_grad and id(p) not in listed]

    def _check_output_mode(self) -> None:
        o = self._options
        if o.output_mode == OutputMode.EveryN and o.device_iterations % o.output_return_period:
            raise Error(f"OutputMode.EveryN({o.output_return_period}) needs a period that divides "
                        f"deviceIterations ({o.device_iterations})")

    def _reserves_ipus(self) -> bool:
        """Whether the model's IPUs are reserved on the machine, where PopTorch's
        count rule (a power of 2 or a multiple of 64) holds: not for an offline
        target nor the IPU Model, which acquire no devices (PopTorch checks the
        count when it attaches to hardware; its own test of the rule is
        hardware-only)."""
        o = self._options
        return not (o.offline_ipu_target or o.use_ipu_model)

    def _check_ipu_count(self, module: ModuleOp) -> None:
        """Replicas multiply the IPUs: the total must be one PopTorch can reserve too."""
        if not self._reserves_ipus():
            return
        ipus = to_py(module.attributes[STAGES_KEY])["num_ipus"]
        total = ipus * self._options.replication_factor
        message = ipu_count_error(total, f"{ipus} IPU(s) per replica x replicationFactor("
                                         f"{self._options.replication_factor}) = {total} IPUs: ")
        if message is not None and not self._options.auto_round_num_ipus:
            raise Error(message)


def _profile_dir(options: Options) -> str | None:
    """Options.enableProfiling(dir), else POPLAR_ENGINE_OPTIONS' autoReport
    settings (JSON, as the seeds use it), else TILEFX_PROFILE_DIR."""
    if options.profile_dir:
        return options.profile_dir
    raw = os.environ.get("POPLAR_ENGINE_OPTIONS")
    if raw:
        try:
            eng = json.loads(raw)
        except json.JSONDecodeError as e:
            raise Error(f"POPLAR_ENGINE_OPTIONS is not valid JSON: {e}") from None
        if str(eng.get("autoReport.all", "")).lower() == "true" or eng.get("autoReport.directory"):
            return eng.get("autoReport.directory", "./profile")
    return os.environ.get("TILEFX_PROFILE_DIR") or None


_PROFILE_DIRS: dict[str, int] = {}  # a profile subdirectory -> the executor that writes it
_PROFILE_TOKENS = itertools.count(1)


def _executor_profile_dir(ex, base: str) -> str:
    """One subdirectory per executor, named as PopTorch names its report's:
    Options.modelName, else "training" or "inference" ("_2", "_3" for
    further executors of the same name, so executors sharing a directory
    keep their reports apart)."""
    stem = ex._options.model_name or ("training" if ex._training else "inference")
    if "_profile_token" not in ex.__dict__:  # unique while the process lives (ids are reused)
        ex._profile_token = next(_PROFILE_TOKENS)
    token = ex._profile_token
    n = 1
    while True:
        path = os.path.join(base, stem if n == 1 else f"{stem}_{n}")
        owner = _PROFILE_DIRS.setdefault(os.path.abspath(path), token)
        if owner == token:
            return path
        n += 1


def _is_variable(optimizer, attr: str) -> bool:
    va = getattr(optimizer, "variable_attrs", None)
    return va is not None and not va.isConstant(attr)


def _warn_unmodelled_locations(locations) -> None:
    """The machine model places weights, activations, accumulators and the
    optimizer state where TensorLocations says (backend/locations.py,
    backend/offload.py), except sharding of activations (PopART shards only
    variables) and of accumulators (not modelled): those are said, not
    silently dropped (the numbers never depend on them)."""
    for what in ("activation", "accumulator"):
        loc = getattr(locations, what, None)
        if loc is not None and loc.replicated_tensor_sharding:
            log.warning("TensorLocations.set%sLocation(%s): the machine model keeps %ss whole "
                        "(replicated tensor sharding is modelled for weights and the optimizer state)",
                        what.capitalize(), loc.toDict(), what)


def _check_not_meta(tensors: list) -> None:
    """Tensors on the meta device have shapes but no values: such a model can
    be compiled for sizing (offline) but not run. `tensors`: names, or (name,
    tensor) pairs of which the meta ones count."""
    names = [t if isinstance(t, str) else t[0] for t in tensors
             if isinstance(t, str) or t[1].device.type == "meta"]
    if names:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise Error(f"{len(names)} tensor(s) on the meta device ({shown}): they have shapes but no "
                    "values, so the model can only be sized: compile it with "
                    "Options.useOfflineIpuTarget(), or materialise it first "
                    "(model.to_empty(device='cpu') and initialise the weights)")
