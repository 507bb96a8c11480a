"""trainingModel / inferenceModel / PoplarExecutor / compile.

A PoplarExecutor is PopTorch's wrapper over the runner's executor
(runner/runner.py `Runner`): it traces the model at its first call
(micro-batch shaped), compiles it with the driver and runs the host loop for
every call, from the CompileConfig and HostSettings its Options give
(api/compile_config.py `surface_config`). What it adds is PopTorch's: the
wrapper that is also the model, the checks and errors of its call path,
weight sync between wrappers of one model, attach/detach, destroy and
revival, PopTorch's hooks, anchors, replica grouping of weights, processes
and executable files (api/compiling.py, api/executable.py, api/readouts.py).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

from tilefx.api.compile_config import surface_config
from tilefx.api.compiling import PopTorchCompiling
from tilefx.api.enums import ConnectionType, OutputMode
from tilefx.api.executable import PopTorchFiles
from tilefx.api.options import Options, OptionsAssertionError
from tilefx.api.readouts import MachineReadouts
from tilefx.api.replica_grouping import check_unchanged, settings_count
from tilefx.errors import Error
from tilefx.lowering.optimizers import SGD, warn_if_subclassed
from tilefx.runner.module_snapshot import ModuleSnapshot
from tilefx.runner.replica_groups import NO_GROUPS
from tilefx.runner.runner import Runner
from tilefx.runner.serialized import serialized as _serialized

log = logging.getLogger("tilefx")


def _generate(self, *args, **kwargs):
    """The model's `generate()`, each of its model calls on the simulated IPU
    (api/generation.py)."""
    from tilefx.api.generation import generate

    self._check_alive()
    if self._training:
        raise Error("generate() runs the model for inference: call it on poptorch.inferenceModel(model) "
                    "(it shares the trained weights with this training model)")
    d, r, gsize, _ = self._factors()
    options = self._options
    return generate(self, lambda module: PoplarExecutor(module, options, training=False), d * (r // gsize) == 1,
                    *args, **kwargs)


def _no_backward(*_args, **_kwargs):
    raise Error("backward() cannot be called explicitly on outputs of a PopTorch model. If you're "
                "using a trainingModel, the backwards pass is performed automatically when invoking "
                "the model. If you're using an inferenceModel, you should use a trainingModel instead.")


def _guard_backward(out) -> None:
    """Outputs are plain tensors without a graph, so a CPU training loop ported as is
    (`loss.backward(); optimizer.step()`) would fail in torch with "element 0 of tensors
    does not require grad": each output tensor's `backward` raises PopTorch's own
    explanation instead (as PopTorch does)."""
    if type(out) is torch.Tensor:
        out.backward = _no_backward
    elif isinstance(out, (tuple, list)):
        for o in out:
            _guard_backward(o)
    elif isinstance(out, dict):
        for o in out.values():
            _guard_backward(o)


# the attributes torch.nn.Module keeps in an instance (shared with the wrapped model)
_MODULE_STATE = frozenset(torch.nn.Module().__dict__)


class PoplarExecutor(PopTorchCompiling, PopTorchFiles, MachineReadouts, Runner):
    """A model wrapped for the simulated IPU (PopTorch user guide, 4.2.3 "poptorch.PoplarExecutor").

    The executor is the model, as in PopTorch: an instance of a class made at
    wrap time that derives from PoplarExecutor and from the model's class,
    holding a shallow copy of the model's state ("PopTorch makes a shallow
    copy of the model": parameters, buffers and submodules are the model's
    own, primitive attributes such as `training` are not kept in sync). So
    `executor.fc.weight`, `named_parameters()`, `state_dict()`, indexing and
    iterating a Sequential, `train()`/`eval()`, `repr` and
    `isinstance(executor, type(model))` behave as on the model, while the
    executor's own methods (`__call__`, `compile`, `copyWeightsToHost`, ...)
    come first."""

    def __new__(cls, model=None, *args, **kwargs):
        if isinstance(model, PoplarExecutor):
            model = model._user_model
        if isinstance(model, torch.nn.Module) and not issubclass(cls, type(model)):
            mcls = type(model)
            own = {"__module__": mcls.__module__, "__qualname__": mcls.__qualname__, "__doc__": mcls.__doc__}
            if callable(getattr(mcls, "generate", None)):  # a Hugging Face generation model
                own["generate"] = _generate
            cls = type(mcls.__name__, (cls, mcls), own)
        return object.__new__(cls)

    def __setattr__(self, name: str, value) -> None:
        # the executor's own (private) state stays out of torch.nn.Module's
        # bookkeeping: `_user_model` is not a submodule of the copy
        if name.startswith("_") and name not in _MODULE_STATE or \
                not isinstance(self, torch.nn.Module):
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def __init__(self, model: torch.nn.Module, options: Options | None = None,
                 training: bool = False, optimizer: torch.optim.Optimizer | None = None):
        if isinstance(model, PoplarExecutor):
            model = model._user_model  # wrapping a wrapper wraps its model (PopTorch)
        if not isinstance(model, torch.nn.Module):
            raise Error(f"expected a torch.nn.Module, got {type(model).__name__}")
        if options is not None and not isinstance(options, Options):
            raise Error(f"options must be a poptorch.Options, got {type(options).__name__} "
                        "(build one with poptorch.Options() and its setters)")
        if optimizer is not None:
            _check_optimizer(model, optimizer)
        self.__dict__.update({k: v for k, v in model.__dict__.items() if not k.startswith("_tilefx")})
        self.__dict__["training"] = training  # the executor's mode; the model's flag is its own
        self._user_model = model
        if options is not None:  # PopTorch freezes the user's options and keeps a copy
            options._freeze()
        self._options = options.clone() if options is not None else Options()
        if self._options.defaultOutputMode():  # the copy says what Default means for this model
            self._options.outputMode(OutputMode.Final if training else OutputMode.All)
        self._options._freeze()
        if training and not any(p.requires_grad for p in model.parameters()):
            raise Error("trainingModel: the model has no parameters to train (use inferenceModel)")
        if training and optimizer is None:
            optimizer = SGD(model.parameters(), lr=0.01)
        if optimizer is not None:  # as PopTorch, when the model is wrapped
            warn_if_subclassed(optimizer)
        if not training and self._options.Training.gradient_accumulation != 1:
            pipelined = type(self._options._execution_strategy).__name__ == "PipelinedExecution"
            raise Error("You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as "
                        "its default value (1) when running a poptorch.inferenceModel()."
                        + (" Use poptorch.Options().deviceIterations to process a sufficient number of "
                           "batches each run for pipelined execution instead." if pipelined else "")
                        + f" (gradientAccumulation is {self._options.Training.gradient_accumulation})")
        # what the model compiles with (its optimizer's configuration added then)
        # and what the host loop reads: api/compile_config.py
        config, host = surface_config(self._options, training)
        Runner.__init__(self, model, config, host, optimizer)

    # -- PopTorch API ----------------------------------------------------
    @property
    def options(self) -> Options:
        return self._options

    @_serialized
    def compile(self, *args, **kwargs) -> None:
        """Compile for these inputs without running (after destroy(): again)."""
        if self._destroyed:
            self._revive()
        Runner.compile(self, *args, **kwargs)

    @_serialized
    def __call__(self, *args, **kwargs):
        if self._destroyed:
            self._revive()
        if self._options.offline_ipu_target:
            # PopTorch raises an AssertionError with these first words
            raise OptionsAssertionError(
                "Trying to run a model on an offline device: this model was compiled for an "
                "offline IPU target (useOfflineIpuTarget): it can be compiled and saved, not run")
        if self._options.connection_type is ConnectionType.Never:  # (PopTorch's words)
            raise OptionsAssertionError(
                "Trying to run a model on an offline device (ConnectionType.Never): use "
                "model.compile(inputs) instead of model(inputs)")
        out = self._run_call(args, kwargs)
        _guard_backward(out)
        return out

    def _check_groups(self, snap: ModuleSnapshot) -> None:
        if self._groups_checked != (snap, settings_count()):
            check_unchanged(self._groups, self._user_model)
            self._groups_checked = (snap, settings_count())

    def _relax_optimizer_checks(self) -> bool:
        return bool(self._options.relax_optimizer_attributes_checks)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """The wrapped model's `load_state_dict`, then its weights copied to
        the device, as PopTorch's executor does (a compiled executor would
        otherwise keep computing with the weights it had)."""
        self._check_alive()
        result = self._user_model.load_state_dict(state_dict, strict=strict, assign=assign)
        if self._program is not None:
            self.copyWeightsToDevice()
        return result

    def __repr__(self) -> str:
        from tilefx.api.annotations import module_repr

        return module_repr(self)

    def __reduce_ex__(self, protocol):
        """torch.save / pickle of a wrapped model save the model, with the
        weights the device holds ("saved or inspected as a PyTorch model",
        PopTorch user guide, Introduction): the wrapper's class is made at
        wrap time and cannot be found by name when loading."""
        import operator

        if self._program is not None and self._training:
            self._write_back()
        # itemgetter(0)((model,)) is the model: loading needs only the standard library
        return operator.itemgetter(0), ((self._user_model,),)

    def destroy(self) -> None:
        """Release the (simulated) device and the compiled program (a training
        model first writes its weights back). Calling the wrapper (or
        `compile`) again compiles it again for the new call's inputs, as
        PopTorch's "call destroy() on the current one and try again"."""
        if self._program is not None and self._training:
            self._write_back()
        self._program = None
        self._weight_tensors = {}
        self._one_call_for = None
        self._destroyed = True

    def _resolve_mean_reduction(self) -> None:
        """The wrapper's options name the mean reduction strategy the model
        compiles with (PopTorch's rule): Running for a training model whose
        optimizer accumulates in float16 (but combined SGD, which cannot),
        else Post unless set."""
        from tilefx.api.enums import MeanReductionStrategy

        t = self._options.Training
        opt = self._optimizer
        half = self._training and opt is not None and getattr(opt, "accum_type", None) in (
            torch.float16, torch.half) and not getattr(opt, "use_combined_accum", False)
        strategy = MeanReductionStrategy.Running if half else \
            t.mean_reduction_strategy or MeanReductionStrategy.Post
        if strategy != t.mean_reduction_strategy:
            t._unfreeze()
            t.setMeanAccumulationAndReplicationReductionStrategy(strategy)
            t._freeze()

    def _revive(self) -> None:
        """Start over after destroy(): the next compile sees only the module's
        current weights and buffers (the device's state went with destroy;
        a training model starts a new optimizer state). A training model whose
        module another live training model wraps meanwhile stays an error."""
        if self._training and not self._host.offline:
            if _live_training_wrapper(self._user_model):
                raise Error("Model has already been wrapped in 'poptorch.trainingModel'. Call "
                            "model.destroy() on the model to unwrap before wrapping again.")
            _TRAINING_WRAPPERS[self._user_model] = weakref.ref(self)
        self._call, self._weights, self._aliased, self._weight_tensors = None, {}, {}, {}
        self._recorded_call = None
        self._device_buffers, self._opt_state, self._step, self._host_version = {}, {}, 0, -1
        self._named, self._host_seen, self._groups_checked = None, (), ()
        self._fast_call, self._one_call_for, self._one_call = None, None, False
        self._groups, self._attached, self._has_run = NO_GROUPS, False, False
        self._destroyed = False


def without_optimizer(ex: PoplarExecutor) -> None:
    """Forget `ex`'s optimizer: for an executor made from an executable
    file, whose compiled optimizer configuration is in its IR
    (`setOptimizer` gives it one again)."""
    ex._optimizer = None


def _check_optimizer(model: torch.nn.Module, optimizer: Any) -> None:
    """The optimizer must be a torch optimizer over this model's parameters."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    own = {id(p) for p in model.parameters()}
    foreign = sum(id(p) not in own for g in optimizer.param_groups for p in g["params"])
    if foreign:
        raise Error(f"the optimizer holds {foreign} parameter(s) that are not parameters of this "
                    "model: build it over model.parameters()")


_TRAINING_WRAPPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trainingModel(model, options=None, optimizer=None) -> PoplarExecutor:
    """Wrap `model` for training on the simulated IPU (PopTorch user guide, 4.2.1 "poptorch.trainingModel").
    A module
    that another live training model still wraps (not destroyed, still referenced)
    is PopTorch's error: two training wrappers would each keep their own optimizer
    state for the same weights. Wrappers for an offline target never train, so
    they do not count (sizing a model several ways compiles several)."""
    user = model._user_model if isinstance(model, PoplarExecutor) else model
    offline = options is not None and isinstance(options, Options) and options.offline_ipu_target
    if isinstance(user, torch.nn.Module) and not offline and _live_training_wrapper(user):
        raise Error("Model has already been wrapped in 'poptorch.trainingModel'. Call model.destroy() "
                    "on the model to unwrap before wrapping again.")
    ex = PoplarExecutor(model, options, training=True, optimizer=optimizer)
    if not ex._options.offline_ipu_target:
        _TRAINING_WRAPPERS[user] = weakref.ref(ex)
    return ex


def _live_training_wrapper(user: torch.nn.Module) -> bool:
    """Whether a training wrapper of `user` is alive: not destroyed and still
    reachable (a dropped wrapper kept only by reference cycles is collected first,
    so re-running `t = trainingModel(m)` in a notebook is not an error)."""
    ref = _TRAINING_WRAPPERS.get(user)
    if ref is None or ref() is None or ref()._destroyed:
        return False
    import gc

    gc.collect()
    previous = ref()
    return previous is not None and not previous._destroyed


def inferenceModel(model, options=None) -> PoplarExecutor:
    """Wrap `model` for inference on the simulated IPU (PopTorch user guide, 4.2.2
    "poptorch.inferenceModel"). Given a
    training executor, the new one shares its model (weights stay in sync) and,
    without `options`, copies its options with gradient accumulation 1."""
    if isinstance(model, PoplarExecutor):
        if options is None:
            options = model.options.clone()
            options.Training.gradientAccumulation(1)
        model = model.model
    return PoplarExecutor(model, options, training=False)


def compile(model, *example_inputs, options=None, optimizer=None, training=False) -> PoplarExecutor:
    """Compile `model` for `example_inputs` now; the result runs and shows its IR."""
    ex = PoplarExecutor(model, options, training=training, optimizer=optimizer)
    ex.compile(*example_inputs)
    return ex
