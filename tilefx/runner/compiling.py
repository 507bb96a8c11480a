"""The compile path of an executor: from its first call's inputs to the
compiled program (the trace, then the compiler driver, tilefx/driver: the
graph passes, the numpy/ATen program, the machine model's schedule and
profile, from its CompileConfig), the executable cache, and the checks made
at compile time. A mixin of the executor (runner/runner.py), kept apart so
that the call path and the compile path each read as one story; what a
surface adds (PopTorch's hooks, anchors, replica grouping of weights,
processes: api/compiling.py) it adds through the methods at the end."""

from __future__ import annotations

import itertools
import json
import logging
import os
import time

import numpy as np

import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from tilefx import driver
from tilefx.dialects.irutil import to_py
from tilefx.dialects.names import ALS_TRACKED_KEY
from tilefx.driver import CompileConfig, Program
from tilefx.errors import Error
from tilefx.gcpause import gc_paused
from tilefx.lowering.call_spec import CallSpec, check_dense
from tilefx.lowering.from_torch import TracedGraph, np_dtype_of, trace
from tilefx.lowering.no_compiler import without_compiler
from tilefx.lowering.optimizers import optimizer_config
from tilefx.lowering.tracing_state import GradientOutputs
from tilefx.runner import compile_log
from tilefx.runner.logs import CompileProgress, compile_summary
from tilefx.runner.replica_groups import NO_GROUPS, ReplicaGroups
from tilefx.runner.settings import HostSettings

log = logging.getLogger("tilefx")


class CompilePath:
    """The compile path of an executor."""

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
        from tilefx.runner import executable_cache

        self._before_compile()
        start = time.perf_counter()
        self._tilefx_anchors = self._tilefx_anchor_plan()
        self._micro_batch(inputs, call.tensor_names())  # checks every input's batch dimension
        if self._joins_processes():  # meet the others first: a bad rendezvous fails before tracing
            self._rendezvous()
        self._call = call
        self._compiled_inputs = [(tuple(x.shape), x.dtype) for x in inputs]
        self._groups = self._replica_groups()
        progress = self._progress(f"{type(self._user_model).__name__} "
                                  f"({'training' if self._training else 'inference'})")
        cached, cache_key = executable_cache.load_cached(self, inputs, start)
        if cached is not None:  # a cache hit: no tracing, no passes
            self._program.compile_seconds = cached
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
        config = self._compile_config()
        if self._before_passes is not None:  # tilefx.plan: the traced module, costed many ways
            driver.prepare(module, config)
            # verified once here: the planner's copies of it are costed, not verified
            module.verify()
            progress.close()
            self._before_passes(import_module, module)
            return

        def after_passes(module: ModuleOp) -> None:
            progress.mark("ran the graph passes", 30)
            self._log_compiled(module)
            if traced.meta_tensors and not self._host.offline:
                check_not_meta(traced.meta_tensors)

        program = driver.compile(module, config, self.random_streams.own, after_passes=after_passes)
        self._install(traced, import_module, program,
                      [(x.shape[0] // n,) + tuple(x.shape[1:]) if x.dim() else () for x in inputs],
                      [np_dtype_of(x.dtype) for x in inputs], start)
        progress.mark("built the program and the machine model", 30)
        executable_cache.store_cached(self, cache_key, traced)
        progress.close(compile_summary(self._profile, module, self._factors()[1]))

    def _compile_config(self) -> CompileConfig:
        """What the driver compiles this executor's model with: the
        CompileConfig it was given, and its optimizer's configuration."""
        if not self._training:
            return self._config
        if self._optimizer is None:  # loaded from an executable file: the configuration it holds
            cfg, group_of = None, None
        else:
            cfg, group_of = optimizer_config(self._optimizer, self._param_names())
            cfg["grad_scale"] = self._grad_scale()
        scaled = self._loss_scaling() != 1.0 or _is_variable(self._optimizer, "loss_scaling")
        return self._config.replace(optimizer=cfg, optimizer_groups=group_of or {}, loss_scaled=scaled)

    def _install(self, traced: TracedGraph, import_module: ModuleOp, compiled: ModuleOp | Program,
                 input_shapes: list[tuple], input_dtypes: list[np.dtype], start: float) -> None:
        """Make the compiled graph IR this executor's program: `compiled` is
        the driver's program (after the passes), or a module the passes ran
        on (read from an executable file), built here."""
        self._traced_params = set(traced.params)
        self._fast_call = None  # a new program: the next call is checked in full
        if self._tilefx_anchors is None:  # loaded from an executable file: the options' anchors
            self._tilefx_anchors = self._tilefx_anchor_plan()
        if isinstance(compiled, Program):
            program = compiled
        else:
            if traced.meta_tensors and not self._host.offline:
                check_not_meta(traced.meta_tensors)
            # the machine model first: a program that does not fit fails before any copy
            program = driver.build(compiled, self._compile_config(), self.random_streams.own)
        module = program.module
        self._als_tracked = to_py(module.attributes[ALS_TRACKED_KEY]) if program.config.automatic_loss_scaling else 0
        self._als_factor = 1.0
        self._als_updates = 0
        self._als_upper = 0
        self._als_lower = 0
        program.traced, program.import_module = traced, import_module
        program.input_shapes, program.input_dtypes = input_shapes, input_dtypes
        if self._training:
            self._adopt_update(program)
        self._schedule = program.schedule
        self._profile = program.profile
        self._program = program
        self._attached = not self._host.offline  # PopTorch attaches when it compiles
        self.copyWeightsToDevice()
        self._consts = traced.consts
        if self._training and not self._host.offline:
            self._init_opt_state()  # offline: the state is sized by the profile, never made
        program.compile_seconds = time.perf_counter() - start
        log.debug("compiled in %.3f s: %s", program.compile_seconds, self._profile.table())
        profile_dir = _profile_dir(self._host)
        if profile_dir:
            self._profile.write(_executor_profile_dir(self, profile_dir))
        if self._joins_processes():
            self._join_processes(input_shapes, input_dtypes)

    def trace_only(self, *inputs) -> ModuleOp:
        """The graph IR the trace of these inputs makes, before any graph
        pass, with the options written in, verified: what tilefx.plan costs
        in many configurations. Nothing is compiled."""
        got = {}
        self._before_passes = lambda import_module, module: got.setdefault("module", module)
        try:
            self.compile(*inputs)
        finally:
            self._before_passes = None
        return got["module"]

    def _params_outside_optimizer(self) -> list[torch.nn.Parameter]:
        listed = {id(p) for g in self._optimizer.param_groups for p in g["params"]}
        return [p for p in self._user_model.parameters() if p.requires_grad and id(p) not in listed]

    def _check_output_mode(self) -> None:
        d, period = self._factors()[0], self._host.output_return_period
        if self._host.output_mode == "every_n" and d % period:
            raise Error(f"OutputMode.EveryN({period}) needs a period that divides deviceIterations ({d})")

    # -- what a surface adds (PopTorch's: api/compiling.py) ----------------

    def _before_compile(self) -> None:
        """Checks and settings of the surface before anything is traced."""

    def _tilefx_anchor_plan(self):
        """The tensors anchored by name for this executor (PopTorch's
        Options.anchorTensor, api/anchors.py), None: none."""
        return None

    def _replica_groups(self) -> ReplicaGroups:
        """The weights grouped across replicas (runner/replica_groups.py)."""
        return NO_GROUPS

    def _joins_processes(self) -> bool:
        """Whether the replicas run in several processes that meet when the
        model compiles (PopTorch's torch.distributed: api/compiling.py)."""
        return False

    def _progress(self, name: str) -> CompileProgress:
        """The compilation's progress bar and INFO line (runner/logs.py)."""
        return CompileProgress(name)

    def _log_compiled(self, module: ModuleOp) -> None:
        """The facts logged at DEBUG once the graph passes ran: where each op runs."""
        compile_log.log_placements(module)


def _profile_dir(host: HostSettings) -> str | None:
    """The settings' directory (Options.enableProfiling(dir)), else POPLAR_ENGINE_OPTIONS' autoReport
    settings (JSON, as the PopTorch user guide's 4.11.2 "Profiling" uses it), else TILEFX_PROFILE_DIR."""
    if host.profile_dir:
        return host.profile_dir
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
    stem = ex._host.name or ("training" if ex._training else "inference")
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


def check_not_meta(tensors: list) -> None:
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
