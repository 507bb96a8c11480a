"""What PopTorch adds to the runner's compile path (runner/compiling.py):
its pre- and post-compile hooks, updatable buffers, mean reduction strategy
and tensor locations checked before tracing, the tensors anchored by name,
the replica grouping of weights, the progress bar its options show, the
options it logs, and the replicas of a training model in several
processes, which meet when it compiles. A mixin of PoplarExecutor
(api/executor.py)."""

from __future__ import annotations

import logging

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tilefx.api.anchors import Anchors
from tilefx.api.replica_grouping import groups_of
from tilefx.errors import Error
from tilefx.runner import compile_log
from tilefx.runner.compile_log import execution_mode, value_text
from tilefx.runner.logs import CompileProgress
from tilefx.runner.replica_groups import ReplicaGroups

log = logging.getLogger("tilefx")
options_log = logging.getLogger("tilefx.compile")  # the compilation's DEBUG facts (runner/compile_log.py)


class PopTorchCompiling:
    """PoplarExecutor's side of the compile path."""

    def _before_compile(self) -> None:
        from tilefx.api.compat import run_pre_compile_hooks

        run_pre_compile_hooks()  # registerPreCompileHook
        self._check_updatable_buffers()
        self._resolve_mean_reduction()
        _warn_unmodelled_locations(self._options.TensorLocations)

    def _tilefx_anchor_plan(self) -> Anchors | None:
        """Options.anchorTensor's anchors for this executor (named apart from
        the model's own attributes, which the executor shares)."""
        untrained = self._params_outside_optimizer() if self._training and self._optimizer is not None else []
        return Anchors.of(self._options, self._user_model, self._training, untrained)

    def _replica_groups(self) -> ReplicaGroups:
        return groups_of(self._user_model, self._config.replication_factor)

    def _progress(self, name: str) -> CompileProgress:
        """The compilation's progress bar and INFO line (Options.showCompilationProgressBar),
        its phases in PopTorch's profiling channels, its post-compile hooks (registerPostCompileHook)."""
        from tilefx.api import profiling
        from tilefx.api.compat import run_post_compile_hooks

        return CompileProgress(name, bool(getattr(self._options, "show_compilation_progress_bar", True)),
                               profiling.record, run_post_compile_hooks)

    def _log_compiled(self, module: ModuleOp) -> None:
        log_options(self._options, module)
        compile_log.log_placements(module)

    def _joins_processes(self) -> bool:
        """A training model of several processes (an offline target never runs)."""
        return self._training and self._processes() > 1 and not self._host.offline

    def _rendezvous(self) -> None:
        from tilefx.api import distributed

        distributed.rendezvous(self._options)

    def _join_processes(self, input_shapes: list[tuple], input_dtypes: list[np.dtype]) -> None:
        """Check the processes compiled the same thing, then start them all from
        process 0's weights, buffers and optimizer state (docs/distributed.md)."""
        from tilefx.api import distributed

        if self._groups.grouped:
            self._program = None
            raise Error("replica grouping of weights (replicaGrouping) is not supported across processes: "
                        f"{', '.join(self._groups.names)} are grouped")
        try:
            self._dist = distributed.join_training_model(self._options, input_shapes, input_dtypes, self._weights,
                                                         self._device_buffers, self._opt_state, self._opt_cfg)
        except Error:
            self._program = None  # not compiled: never run alone, without the others
            raise
        self._write_back()


# PopART's SyntheticDataMode: Off, Zeros, RandomNormal (tilefx's synthetic
# inputs are random normal, runner/runner.py _synthetic_inputs)
_SYNTHETIC_RANDOM_NORMAL = 2


def log_options(options, module) -> None:
    """The options as the compilation applied them: each PopTorch option
    ("poptorch.Options set device_iterations to value 2"), each PopART
    option given through `Options._Popart.set` (dictionaries entry by entry,
    lists and sets value by value, as PopTorch's setters log them), then the
    PopART settings the execution strategy decides ("enablePipelining set to
    value 1": pipelined over more than one IPU)."""
    if not options_log.isEnabledFor(logging.DEBUG):
        return
    from tilefx.dialects.irutil import to_py
    from tilefx.dialects.names import STAGES_KEY

    mode = execution_mode(module)
    for key, value in options._public_items():
        if key == "execution_strategy":
            options_log.debug("poptorch.Options set execution_mode to value %d", mode[0])
        elif key == "synthetic_data":
            if value:
                options_log.debug("poptorch.Options set syntheticDataMode to value %d", _SYNTHETIC_RANDOM_NORMAL)
        elif value is not None and isinstance(value, (bool, int, float, str)) or hasattr(value, "value"):
            options_log.debug("poptorch.Options set %s to value %s", key, value_text(value))
    for key, value in options._popart.options.items():
        if isinstance(value, dict):
            for k, v in value.items():
                options_log.debug("poptorch.Options set %s[%s] to %s", key, k, value_text(v))
        elif isinstance(value, (list, tuple, set, frozenset)):
            for v in (sorted(value) if isinstance(value, (set, frozenset)) else value):
                options_log.debug("poptorch.Options added %s to %s", value_text(v), key)
        else:
            options_log.debug("poptorch.Options set %s to value %s", key, value_text(value))
    num_ipus = to_py(module.attributes[STAGES_KEY]).get("num_ipus", 1) if STAGES_KEY in module.attributes else 1
    pipelining = mode[1] == "Pipelined" and num_ipus > 1
    options_log.debug("enablePipelining set to value %d", int(pipelining))


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
