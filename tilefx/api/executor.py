"""trainingModel / inferenceModel / PoplarExecutor / compile.

A PoplarExecutor traces the model at its first call (micro-batch shaped),
runs the graph passes, compiles `@main` (and `@update` when training) with
the numpy executor, and then runs PopTorch's host loop for every call:

    for each device iteration d:
        for each accumulation step g:
            for each replica r:  @main on micro-batch [d, g, r]   (accumulates)
        sum the replicas' accumulators; @update                   (one weight update)

Host tensors are read as [deviceIterations, gradientAccumulation, replicas,
micro-batch, ...] flattened into dim 0 (REFERENCE.md section 2), and
outputs are returned in the same order, reduced as the output mode says.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
import weakref
from typing import Any

import numpy as np
import torch
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.utils.exceptions import VerifyException

from tilefx.api.logs import CompileProgress
from tilefx.api.anchors import Anchors
from tilefx.api.host_arrays import (copied, copy_into, fresh_outputs, held_alone, input_np, same_memory, to_np,
                                   viewable, weight_tensor)
from tilefx.api.outputs import Outputs
from tilefx.api.serialized import serialized as _serialized
from tilefx.api.program import Program, role_list
from tilefx.api.readouts import MachineReadouts
from tilefx.api.weight_update import WeightUpdates
from tilefx.api.enums import CommGroupType, ConnectionType, HalfFloatCastingBehavior, OutputMode
from tilefx.errors import Error
from tilefx.gcpause import gc_paused
from tilefx.api.options import Options, OptionsAssertionError
from tilefx.api.optim import SGD, optimizer_config
from tilefx.api.module_snapshot import ModuleSnapshot, snapshot_of
from tilefx.api.replica_grouping import NO_GROUPS, ReplicaGroups, settings_count
from tilefx.backend.executor import CompiledFunction, arg_roles, result_roles
from tilefx.lowering.call_spec import CallSpec, bind_call, check_dense, restore_caches
from tilefx.lowering.from_torch import TracedGraph, np_dtype_of, trace
from tilefx.lowering.no_compiler import without_compiler
from tilefx.lowering.tracing_state import GradientOutputs
from tilefx.passes.pipelines import run_graph_passes
from tilefx.backend import schedule
from tilefx.backend.machine import machine
from tilefx.backend.profile import Profile, build_profile
from tilefx.backend.schedule import Schedule
from tilefx.dialects.ipu import StageOp
from tilefx.passes.assign_stages import AssignStagesPass, ipu_count_error
from tilefx.passes.loss_scaling import LossScalingPass
from tilefx.dialects.irutil import find_func, from_py, to_py
from tilefx.dialects.names import ALS_TRACKED_KEY, AUTOCAST_POLICY_KEY, GROUP_KEY, HALF_FLOAT_CASTING_KEY, MEMORY_PROPORTION_KEY, OPTIMIZER_KEY, PARAM_KEY, STAGES_KEY, STRATEGY_KEY


log = logging.getLogger("tilefx")


# the output modes of one micro-batch whose call returns its one result (_run_one)
_ONE_CALL_OUTPUT_MODES = (OutputMode.Default, OutputMode.All, OutputMode.Final)


class _HostVersion:
    """Counts writes of executors into the torch parameters and buffers, so
    every other executor sharing a tensor reloads it before its next run
    (the implicit weight sync between a training and an inference model)."""

    counter = 0

    @classmethod
    def latest(cls, tensors) -> int:
        return max((getattr(t, "_tilefx_written", 0) for t in tensors), default=0)

    @classmethod
    def mark(cls, tensors) -> int:
        cls.counter += 1
        for t in tensors:
            t._tilefx_written = cls.counter
        return cls.counter


def _generate(self, *args, **kwargs):
    """The model's `generate()`, each of its model calls on the simulated IPU
    (api/generation.py)."""
    from tilefx.api.generation import generate

    return generate(self, *args, **kwargs)


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


class PoplarExecutor(MachineReadouts, WeightUpdates, Outputs):
    """A model wrapped for the simulated IPU (seeds/000 4.2.3).

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
        self._options = options if options is not None else Options()
        self._options._freeze()
        self._training = training
        if training and not any(p.requires_grad for p in model.parameters()):
            raise Error("trainingModel: the model has no parameters to train (use inferenceModel)")
        if training and optimizer is None:
            optimizer = SGD(model.parameters(), lr=0.01)
        self._optimizer = optimizer
        self._program: Program | None = None
        self._call: CallSpec | None = None  # how the compiled call bound its arguments
        self._recorded_call: CallSpec | None = None  # the call an executable file recorded
        # Options.anchorTensor's anchors (api/anchors.py; a name no model attribute has:
        # the executor starts with a copy of the model's attributes)
        self._tilefx_anchors: Anchors | None = None
        self._weights: dict[str, np.ndarray] = {}
        # weights that are their parameter's memory: name -> (a weak reference
        # to the array, the parameter, its data pointer and shape then). The
        # write-back tells by identity that such a weight needs no copy, where
        # comparing the memory (same_memory) cost ~8 us a weight on cold
        # caches. (Weak: a reference held here would make the update copy
        # the weight instead of writing it in place, held_alone.)
        self._aliased: dict[str, tuple] = {}
        # a weight's tensor for main (_run_one): name -> (the array it views, the tensor)
        self._weight_tensors: dict[str, tuple[np.ndarray, torch.Tensor]] = {}
        self._groups = NO_GROUPS  # weights with a replicaGrouping (set when compiling)
        self._device_buffers: dict[str, np.ndarray] = {}
        self._opt_state: dict[str, np.ndarray] = {}
        self._step = 0
        self._host_version = -1
        self._named: ModuleSnapshot | None = None
        self._host_seen: tuple = ()  # (snapshot, _HostVersion.counter) at the last sync check
        self._groups_checked: tuple = ()  # (snapshot, replicaGrouping calls) at the last check
        self._fast_call: tuple | None = None  # (forward function, argument count): see _remember_call
        self._one_call_for: Program | None = None  # the program _one_call was decided for
        self._one_call = False
        self._destroyed = False
        self._attached = False  # set by the first call and attachToDevice, cleared by detachFromDevice
        self._has_run = False  # cycleCount and getTimestamps need a run
        self._seed_random(self._options.random_seed)
        self._dist = None  # the other processes of a distributed training model (api/distributed.py)
        if not training and self._options.Training.gradient_accumulation != 1:
            raise Error("inferenceModel: gradientAccumulation must be 1 for inference models "
                        f"(got {self._options.Training.gradient_accumulation})")

    # -- PopTorch API ----------------------------------------------------
    @property
    def options(self) -> Options:
        return self._options

    @property
    def model(self) -> torch.nn.Module:
        return self._user_model

    def isCompiled(self) -> bool:
        return self._program is not None

    @_serialized
    def compile(self, *args, **kwargs) -> None:
        """Compile for these inputs without running."""
        if self._destroyed:
            self._revive()
        call, inputs = self._flatten_inputs(args, kwargs)
        self._compile(inputs, call)

    @_serialized
    def __call__(self, *args, **kwargs):
        # Each function this path calls runs on caches the last call's
        # kernels evicted (a few us each, against ~0.2 us hot): the checks are
        # written out here rather than in small helpers.
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
        # A call made like the last checked one (the same forward, only plain
        # CPU tensors passed positionally, no keywords; _remember_call): binding
        # it to the signature would give the same structure and these tensors
        # in order, so only their shapes and dtypes are checked here.
        inputs = None
        inputs_bound = False
        fast = self._fast_call
        if fast is not None and not kwargs and len(args) == fast[1] and \
                getattr(self._user_model.forward, "__func__", None) is fast[0]:
            inputs = list(args)
            for x, (shape, dtype) in zip(args, self._compiled_inputs):
                if type(x) is not torch.Tensor or x.shape != shape or x.dtype != dtype or not x.is_cpu:
                    inputs = None  # the full path says what is wrong, or handles it
                    break
        if inputs is None:
            call, inputs = self._flatten_inputs(args, kwargs)
            _check_not_meta([(f"input {n}", x) for n, x in zip(call.tensor_names(), inputs)])
            if self._program is None:
                self._compile(inputs, call)
            elif self._call is not None:
                self._call.check_same(call, inputs, self._compiled_inputs)
            else:  # loaded from an executable file: its shapes and dtypes (_bind_loaded: structure)
                self._check_loaded_inputs(inputs)
            self._remember_call(args, kwargs, inputs)
            inputs_bound = True
        snap = self._named
        if snap is None or snap.model is not self._user_model or not snap.valid():
            snap = self._snapshot()
            self._check_weights_fit(snap)
        if self._training and snap is not self.__dict__.get("_aliased_in"):
            self._unalias_replaced(snap)
        if self._call is not None and self._groups_checked != (snap, settings_count()):
            self._groups.check_unchanged(self._user_model)
            self._groups_checked = (snap, settings_count())
        # only an executor's write-back moves the counter: unchanged, no tensor can be newer
        if self._host_seen != (snap, _HostVersion.counter):
            if _HostVersion.latest(self._host_tensors()) > self._host_version:
                self.copyWeightsToDevice()
            self._host_seen = (self._snapshot(), _HostVersion.counter)
        if not self._attached:
            self._attached = True  # a detached model attaches again when called (PopTorch)
        if self._one_call_for is not self._program:  # decided once per program (options are frozen)
            self._one_call_for, self._one_call = self._program, self._one_micro_batch()
        anchored = self.__dict__.get("_tilefx_anchors")
        if anchored is not None and self._one_call:  # (_run takes them per device iteration)
            self._anchor_weights("value")
        if self._options.synthetic_data:  # host I/O disabled: the device makes its inputs
            inputs = self._synthetic_inputs(inputs)
        if self._one_call:
            out = self._run_one(inputs)
        else:
            out = self._run(inputs)
        if anchored is not None and self._training and self._one_call:
            self._anchor_weights("updated")
        if self._options.synthetic_data:  # ... and streams nothing back
            out = torch.utils._pytree.tree_map(
                lambda t: torch.zeros_like(t) if isinstance(t, torch.Tensor) else t, out)
        if not self._has_run:
            self._has_run = True
        if self._training:
            # the module tree is the one checked above: the program ran, not the module
            self._write_back(snap)
        if self._program.traced.cache_states is not None:  # (a call passing caches is never fast)
            out = restore_caches(out, call.caches if inputs_bound else [], self._program.traced.cache_states)
        _guard_backward(out)
        return out

    def _synthetic_inputs(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Options.enableSyntheticData: "data generated from a random normal
        distribution on the IPU. Host I/O is disabled": inputs of the shapes
        and dtypes passed, random normal (floating point) or zeros (integers,
        booleans), from a stream seeded by randomSeed; the caller's tensors
        are neither read nor written."""
        g = self.__dict__.get("_synthetic_rng")
        if g is None:
            g = self._synthetic_rng = torch.Generator().manual_seed(self._options.random_seed or 0)
        return [torch.randn(x.shape, generator=g).to(x.dtype) if x.is_floating_point()
                else torch.zeros_like(x) for x in inputs]

    def _check_loaded_inputs(self, inputs: list[torch.Tensor]) -> None:
        """A call of an executable loaded from a file (which keeps no call
        signature) passes tensors of the shapes and dtypes it was compiled
        for: the micro-batch's, times the options' batch factor in the
        first dimension."""
        p = self._program
        if len(inputs) != len(p.input_shapes):
            raise Error(f"this executable was compiled for {len(p.input_shapes)} input tensor(s), "
                        f"the call passes {len(inputs)}")
        d, r, gsize, g = self._factors()
        n = d * (r // gsize) * g
        # the torch dtypes the file recorded: numpy holds bfloat16 as float32
        exact = self.__dict__.get("_loaded_input_dtypes") or [None] * len(inputs)
        for i, (x, shape, dtype, torch_dtype) in enumerate(zip(inputs, p.input_shapes, p.input_dtypes, exact)):
            shape = tuple(shape)
            want = (shape[0] * n, *shape[1:]) if shape else ()
            if torch_dtype is not None and x.dtype != torch_dtype:
                raise Error(f"input {i} is {x.dtype}; this executable was compiled for {torch_dtype}")
            if tuple(x.shape) != want or np_dtype_of(x.dtype) != np.dtype(dtype):
                raise Error(f"input {i} is {tuple(x.shape)} {x.dtype}; this executable was compiled for "
                            f"{want} {np.dtype(dtype)} (a micro-batch of {shape} times deviceIterations "
                            f"* replicationFactor / inputReplicaGroupSize * gradientAccumulation = {n})")

    def _one_micro_batch(self) -> bool:
        """Whether a call is one micro-batch on one replica (`_run_one`): no
        device iterations, replicas, gradient accumulation or replica groups,
        and every output mode that returns that one micro-batch's outputs."""
        o = self._options
        return o.device_iterations == o.replication_factor == 1 and self._dist is None and \
            (not self._training or o.Training.gradient_accumulation == 1) and \
            self._program.one_replica and not self._groups.grouped and o.broadcast_buffers and \
            o.output_mode in _ONE_CALL_OUTPUT_MODES

    def _remember_call(self, args: tuple, kwargs: dict, inputs: list[torch.Tensor]) -> None:
        """Let later calls like this one (positional plain tensors, each one
        input in order) skip the binding (__call__ checks their shapes and
        dtypes only)."""
        fn = getattr(self._user_model.forward, "__func__", None)
        plain = not kwargs and len(inputs) == len(args) and self._call is not None and \
            all(type(a) is torch.Tensor and a is x and a.device.type == "cpu"
                for a, x in zip(args, inputs))
        self._fast_call = (fn, len(args)) if plain and fn is not None else None

    def _unalias_replaced(self, snap: ModuleSnapshot) -> None:
        """A weight that is the memory of a parameter the user has since
        replaced in the module (copyWeightsToDevice) becomes the executor's
        own copy before the next update, which would otherwise write into the
        detached tensor; the write-back then fills the new parameter."""
        if self._program is not None:
            for n in self._program.traced.params:
                w, p = self._weights.get(n), snap.named_p.get(n)
                if isinstance(w, np.ndarray) and w.base is not None \
                        and not isinstance(w.base, np.ndarray) and (p is None or not same_memory(p, w)):
                    self._weights[n] = w.copy()
        self._aliased_in = snap

    def _snapshot(self) -> ModuleSnapshot:
        """The model's parameters and buffers by name (walked again only when
        the module tree changed: api/module_snapshot.py)."""
        self._named = snapshot_of(self._user_model, self._named)
        return self._named

    def compileAndExport(self, filename: str, *args, export_model: bool = True, **kwargs) -> None:
        """Compile for these inputs and write the executable to `filename` (a
        file that never runs code when loaded: see tilefx/api/export.py)."""
        from tilefx.api import export

        self._check_alive()
        export.compile_and_export(self, filename, args, kwargs, export_model)

    def save(self, filename: str, export_model: bool = True, save_rng_state: bool = True) -> None:
        """Write the compiled model to `filename` (PopTorch's `save`): the
        executable file of compileAndExport, with the trained weights and
        optimizer state, and with `save_rng_state` the random generators' state
        so `poptorch.load` continues the random stream where it stopped."""
        from tilefx.api import export

        self._check_alive()
        export.save(self, filename, export_model, save_rng_state)

    def loadExecutable(self, filename: str) -> None:
        """Use the program of an exported executable instead of compiling."""
        from tilefx.api import export

        self._check_alive()
        export.load_executable(self, filename)

    @_serialized
    def copyWeightsToDevice(self) -> None:
        """Read the torch module's parameters and buffers into the executor.

        An executor compiled for an offline IPU target never runs, so it copies
        nothing: the model's own tensors stay the only copy (one for all
        replicas), read only when the executable is exported. Before the
        first compile there is no device copy: PopTorch's error."""
        self._check_compiled()
        named_p = dict(self._user_model.named_parameters(remove_duplicate=False))
        named_b = dict(self._user_model.named_buffers(remove_duplicate=False))
        if self._program is not None and not self._options.offline_ipu_target:
            self._check_weights_fit(self._snapshot())
            _check_not_meta([(n, named_p[n]) for n in self._program.traced.params] +
                            [(n, named_b[n]) for n in self._program.traced.buffers])
            for n in self._program.traced.params:
                if self._training and n not in self._groups.names and viewable(named_p[n]):
                    # the executor's weight is the parameter's own memory: the
                    # in-place optimizer updates write the host model's weights,
                    # and the write-back after each step has nothing to copy
                    t = named_p[n]
                    self._weights[n] = t.detach().numpy()
                    self._aliased[n] = (weakref.ref(self._weights[n]), t, t.data_ptr(), t.shape)
                else:
                    self._aliased.pop(n, None)
                    self._weights[n] = self._groups.to_device(n, to_np(named_p[n]))
            for n in self._program.traced.buffers:
                self._device_buffers[n] = to_np(named_b[n])
            if self._dist is not None:  # the processes compare their weights at the next call
                self._dist.weights_reloaded = True
        self._host_version = _HostVersion.latest(self._host_tensors())

    def _check_weights_fit(self, snap: ModuleSnapshot) -> None:
        """After the module tree changed: every parameter and buffer the
        program was compiled for is still there, of the same shape and dtype
        (`resize_token_embeddings`, a layer replaced by a wider one, `half()`
        would otherwise leave the program computing with the old weights)."""
        if self._program is None or self._options.offline_ipu_target:
            return
        traced = self._program.traced
        for kind, names, have, held in (("parameter", traced.params, snap.named_p, self._weights),
                                        ("buffer", traced.buffers, snap.named_b, self._device_buffers)):
            for n in names:
                t, old = have.get(n), held.get(n)
                if t is None:
                    raise Error(f"the model no longer has the {kind} {n!r} it was compiled with: "
                                "wrap the changed model again (or destroy() this one first)")
                if old is None or n in self._groups.names:
                    continue
                shape, held_shape = tuple(t.shape), np.shape(old)
                # (a buffer may be held with a leading replica dimension)
                fits = held_shape == shape or kind == "buffer" and held_shape[1:] == shape
                if not fits or _np_dtype_or_none(t.dtype) != np.asarray(old).dtype:
                    raise Error(f"the model's {kind} {n!r} is now {tuple(t.shape)} {t.dtype}; it was "
                                f"compiled for {np.shape(old)} {np.asarray(old).dtype}: wrap the changed "
                                "model again (or destroy() this one first)")

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """The wrapped model's `load_state_dict`, then its weights copied to
        the device, as PopTorch's executor does (a compiled executor would
        otherwise keep computing with the weights it had)."""
        self._check_alive()
        result = self._user_model.load_state_dict(state_dict, strict=strict, assign=assign)
        if self._program is not None:
            self.copyWeightsToDevice()
        return result

    @_serialized
    def copyWeightsToHost(self) -> None:
        """Write the executor's weights and buffers into the torch module
        (before the first compile: PopTorch's error, there is nothing to copy)."""
        self._check_compiled()
        if self._program is not None:  # (an executor only generate() ran has no weights of its own)
            self._write_back()

    def _seed_random(self, seed: int | None) -> None:
        """The random streams of the random ops: one per replica (replica 0's is
        also the executor's own), all from `seed` (None: from the OS)."""
        self._rng = np.random.default_rng(seed)
        # by the replica's global index: process p's replicas follow those of processes 0 .. p-1
        entropy = seed if seed is not None else np.random.SeedSequence().entropy
        first = self._options.Distributed.process_id * self._options.replication_factor
        self._replica_rngs = [self._rng if r == 0 else np.random.default_rng([entropy, r])
                              for r in range(first, first + self._options.replication_factor)]

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

    @_serialized
    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Use new optimizer hyper-parameters from the next call on.

        After compile, the variable attributes (lr, the ones given explicitly
        or marked variable) take effect at the next call without recompiling;
        changing a constant one is an error naming it."""
        from tilefx.api.optim import (attach, check_unchanged_constants, hyper_values, take_pending_state,
                                      warn_unexpected_attributes)

        if not self._training:
            raise Error("setOptimizer: only training models have an optimizer")
        new_cfg, new_groups = optimizer_config(optimizer, self._param_names())
        compiled = getattr(self, "_opt_cfg", None) if self._program is not None else None
        if compiled is None:
            old_kind = optimizer_config(self._optimizer, self._param_names())[0]["type"]
            if old_kind != new_cfg["type"]:
                raise Error(f"setOptimizer: cannot change the optimizer type from {old_kind} "
                            f"to {new_cfg['type']}")
            self._optimizer = optimizer
            return
        check_unchanged_constants(compiled, new_cfg, self._opt_groups, new_groups, optimizer)
        if "_opt_known" in self.__dict__:
            warn_unexpected_attributes(optimizer, self._opt_known, self._opt_warned)
        self._optimizer = optimizer
        new_cfg["grad_scale"] = compiled.get("grad_scale", 1.0)
        self._hypers.update({k: v for k, v in hyper_values(new_cfg).items() if k in self._hypers})
        attach(optimizer, self)
        pending = take_pending_state(optimizer)
        if pending is not None:
            self._load_optimizer_state(pending)


    def _factors(self) -> tuple[int, int, int, int]:
        o = self._options
        return (o.device_iterations, o.replication_factor, o.input_group_size,
                o.Training.gradient_accumulation if self._training else 1)

    def _flatten_inputs(self, args, kwargs) -> tuple[CallSpec, list[torch.Tensor]]:
        """The call bound to forward's signature and its tensor leaves
        (PopTorch's input conventions, see lowering/call_spec.py)."""
        if self._recorded_call is not None and self._call is None:
            return self._bind_loaded(args, kwargs)
        return bind_call(self._user_model.forward, args, kwargs)

    def _bind_loaded(self, args, kwargs) -> tuple[CallSpec, list[torch.Tensor]]:
        """A call of an executable loaded from a file that recorded its call:
        bound as that call was (the same structure and non-tensor values),
        or, as for files that record none, its tensors passed flat in order."""
        flat = not kwargs and len(args) == self._recorded_call.num_tensors and \
            all(isinstance(a, torch.Tensor) for a in args)
        try:
            call, inputs = bind_call(self._user_model.forward, args, kwargs)
            self._recorded_call.check_same(call, inputs, None)
            return call, inputs
        except Error:
            if not flat:
                raise
        return bind_call(_flat_inputs, args, {})

    def _micro_batch(self, inputs, names: list[str] | None = None) -> int:
        d, r, gsize, g = self._factors()
        if r % gsize:  # (the options are set in any order: checked once they are all known)
            raise Error(f"The input group size ({gsize}) must divide the replication factor ({r}) "
                        "(Options.inputReplicaGrouping)")
        n = d * (r // gsize) * g
        mb = None
        for i, x in enumerate(inputs):
            if x.dim() == 0 and n == 1:
                continue  # a 0-d tensor is one batch of one (PopTorch)
            if x.dim() == 0 or x.shape[0] % n:
                raise AssertionError(
                    f"Invalid batch dimension: input {names[i] if names else i} has batch size "
                    f"{1 if x.dim() == 0 else x.shape[0]}, which is not a multiple of "
                    f"deviceIterations({d}) * replicationFactor({r}) / inputReplicaGroupSize({gsize}) "
                    f"* gradientAccumulation({g}) = {n}")
            mb = x.shape[0] // n
        return mb or 0

    # -- compilation -----------------------------------------------------
    def _param_names(self) -> dict[int, str]:
        """Each parameter tensor by the name the trace gives it (tied weights: the traced one)."""
        traced = getattr(self, "_traced_params", set())
        names: dict[int, str] = {}
        for n, p in self._user_model.named_parameters(remove_duplicate=False):
            if id(p) not in names or n in traced:
                names[id(p)] = n
        return names

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

        start = time.perf_counter()
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
            progress.close()
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
        strategy = self._options.execution_strategy
        config = strategy.to_config() if strategy is not None else \
            {"kind": "pipelined", "stages": [], "auto_stage": "same_as_ipu"}
        if "auto" in config:  # ipu-auto-stage costs the ops on this machine, the state where it lives
            config["auto"]["machine"] = machine(self._options.machine).name
            loc = self._options.TensorLocations.optimizer
            if loc is not None:
                where = loc.resolved()
                config["auto"].update({"state_on_chip": where.on_chip,
                                       "state_min_elements_off_chip": where.min_elements_off_chip,
                                       "state_min_elements_sharded": where.min_elements_sharded})
                if where.sharded:
                    config["auto"]["state_shards"] = self._factors()[1] * self._options.Distributed.numProcesses
            placed = self._options.TensorLocations.resolved().config()
            if placed:  # weights, activations, accumulators off chip or sharded
                config["auto"].update({"locations": placed,
                                       "replicas": self._factors()[1] * self._options.Distributed.numProcesses})
        module.attributes[STRATEGY_KEY] = from_py(config)
        if self._options.available_memory_proportion:
            module.attributes[MEMORY_PROPORTION_KEY] = from_py(
                {k: float(v) for k, v in self._options.available_memory_proportion.items()})
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
            auto_round_num_ipus=bool(self._options.auto_round_num_ipus)),
            loss_scaling=LossScalingPass(automatic=als) if scaled else None)
        progress.mark("ran the graph passes", 30)
        self._install(traced, import_module, module,
                      [(x.shape[0] // n,) + tuple(x.shape[1:]) if x.dim() else () for x in inputs],
                      [np_dtype_of(x.dtype) for x in inputs], start)
        progress.mark("built the program and the machine model", 30)
        executable_cache.store_cached(self, inputs)
        progress.close()

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

    def _make_profile(self, program: Program) -> Profile:
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
            decompose_grad_sum=bool(self._options._Popart.options.get("decomposeGradSum", False)))


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

    def _check_ipu_count(self, module: ModuleOp) -> None:
        """Replicas multiply the IPUs: the total must be one PopTorch can reserve too."""
        ipus = to_py(module.attributes[STAGES_KEY])["num_ipus"]
        total = ipus * self._options.replication_factor
        message = ipu_count_error(total, f"{ipus} IPU(s) per replica x replicationFactor("
                                         f"{self._options.replication_factor}) = {total} IPUs: ")
        if message is not None and not self._options.auto_round_num_ipus:
            raise Error(message)

    def _upcast_inputs(self, inputs: list[torch.Tensor]) -> frozenset[int]:
        """fp16 inputs of a model with fp32 weights: traced as fp32 inside the graph
        (PyTorch's promotion, HalfUpcastToFloat, the default); with
        FloatDowncastToHalf ipu-autocast undoes these casts and casts the weights
        down instead."""
        half = frozenset(i for i, x in enumerate(inputs) if x.dtype == torch.float16)
        floats = {p.dtype for p in self._user_model.parameters() if p.is_floating_point()}
        if self._options.Precision.half_float_casting == HalfFloatCastingBehavior.FloatDowncastToHalf:
            # "PopTorch ... will cast all inputs to float16" (seeds/002): an fp32
            # input meeting an fp16 one is cast down as an fp32 weight is
            floats |= {x.dtype for x in inputs}
        if not half or torch.float32 not in floats:
            return frozenset()
        return half


    def _replica_input(self, r: int, r_in: int) -> int:
        _, R, gsize, _ = self._factors()
        if gsize == 1:
            return r
        if self._options.input_group_type == CommGroupType.Orthogonal:
            return r % r_in
        return r // gsize

    def _run(self, inputs: list[torch.Tensor]):
        """A call in general: iterations, accumulation, replicas (`__call__`
        sends one micro-batch on one replica to `_run_one`)."""
        p = self._program
        D, R, gsize, G = self._factors()
        r_in = R // gsize
        xs = [input_np(x).reshape((D, G, r_in) + shape) for x, shape in zip(inputs, p.input_shapes)]
        # broadcastBuffers (default): every replica starts from the host's buffers;
        # broadcastBuffers(False): each replica keeps its own from call to call
        own = getattr(self, "_replica_buffers", None)
        if self._dist is not None:  # the other processes are at the same step, with the same values
            self._dist.check_in_step(self._step, self._hypers, self.loss_scale, self._weights)
        if self._options.broadcast_buffers or own is None or len(own) != R:
            buffers = [dict(self._device_buffers) for _ in range(R)]
        else:
            buffers = [dict(b) for b in own]
        trained = p.trained
        mutated: dict[int, np.ndarray] = {}
        outputs: list[list[list[list[np.ndarray]]]] = []
        out_index = p.out_index
        fresh: set[int] = set()  # ids of output arrays only the caller will hold
        held = self.__dict__.get("_tilefx_anchors")  # weights anchored by name / UpdatedVar___
        taken = {kind: [] for kind in held.weight_kinds()} if held is not None else {}
        read = lambda name, r: self._groups.weight(self._weights, name, r)  # noqa: E731
        for d in range(D):
            if "value" in taken:
                taken["value"].append(held.take_weights("value", read, R))
            accs = [self._zeroed_accumulators(r, trained) for r in range(R)]
            als_counts = (self._als_upper, self._als_lower)
            per_g = []
            for g in range(G):
                per_r = []
                for r in range(R):
                    ri = self._replica_input(r, r_in)
                    args = []
                    for kind, key in p.main_args:
                        if kind == "param":
                            args.append(self._groups.weight(self._weights, key, r))
                        elif kind == "buffer":
                            args.append(buffers[r][key])
                        elif kind == "input":
                            args.append(xs[key][d, g, ri])
                        elif kind == "const":
                            args.append(self._consts[key])
                        elif kind == "hyper":
                            args.append(np.asarray(self.loss_scale, dtype=np.float32))
                        else:
                            args.append(accs[r][key])
                    p.main.rng = self._replica_rngs[r % len(self._replica_rngs)]
                    res = p.main(*args, donated=held_alone(args, p.main_donatable))
                    for (kind, key), v in zip(p.main_results, res):
                        if kind == "buffer":
                            buffers[r][key] = v
                        elif kind == "mutated_input":  # written back to the caller's tensor below
                            mutated.setdefault(key, to_np(inputs[key]).reshape(xs[key].shape))[d, g, ri] = v
                        elif kind == "accum":
                            accs[r][key] = v
                        elif kind == "als_upper":
                            self._als_upper += int(v)
                            self._als_lower += self._als_tracked - int(v)
                    per_r.append([res[i] for i in out_index])
                    fresh.update(fresh_outputs(args, res, p.main_results, p.main.constant_ids))
                    del args, res  # the weights are the executor's alone again (held_alone)
                per_g.append(per_r)
            outputs.append(per_g)
            if self._training and p.update is not None:
                if self._dist is None:
                    total = self._groups.reduce(accs, trained)  # within a group for grouped weights
                else:  # with the other processes' replicas, added in the same order
                    total = self._dist.ordered_sum(accs, f"the gradient sum of weight update {self._step + 1}")
                    if self._als_tracked:
                        up, low = self._dist.sum_counts(
                            [self._als_upper - als_counts[0], self._als_lower - als_counts[1]],
                            f"the loss scaling statistics of weight update {self._step + 1}")
                        self._als_upper, self._als_lower = als_counts[0] + up, als_counts[1] + low
                self._update(total)
            if "updated" in taken and self._training:
                taken["updated"].append(held.take_weights("updated", read, R))
        for kind, per_iteration in taken.items():
            if per_iteration:
                held.set_weights_per_iteration(kind, per_iteration, G, R, self._user_model)
        for key, value in mutated.items():  # in-place / out= writes to user inputs (as PopTorch)
            with torch.no_grad():
                inputs[key].copy_(torch.from_numpy(value.reshape(inputs[key].shape)))
        self._device_buffers = buffers[0]  # the host sees replica 0's buffers
        if self._dist is not None and self._options.broadcast_buffers and \
                any(kind == "buffer" for kind, _ in p.main_results):  # the global replica 0's
            self._device_buffers = self._dist.broadcast_arrays(self._device_buffers,
                                                               "the broadcast of process 0's buffers")
        self._replica_buffers = buffers
        return self._collect(outputs, p.out_ids, fresh)

    def _run_one(self, inputs: list[torch.Tensor]):
        """`_run` for one micro-batch on one replica, the common case: the
        same steps without the loops over iterations, accumulation and
        replicas. Each line of Python here runs once per call, after the
        program's kernels have left the caches cold: the general loops cost
        ~0.2 ms a call on the MLP (benchmarks/RESULTS.md, session 6)."""
        p = self._program
        trained = p.trained
        accs = self._zeroed_accumulators(0, trained) if trained else None
        weights = self._weights
        buffers = self._device_buffers
        # In an inference program, an argument only ATen's direct steps read
        # goes in as a tensor (p.lean_args): the input itself, a weight's
        # tensor kept from call to call while the array is the same. One
        # conversion instead of one per reading step. (Not in training: an
        # update may write a weight in place only while nothing else holds
        # it, held_alone.)
        held = self._weight_tensors
        args = []
        for kind, key, as_tensor in p.lean_args:
            if kind == "param":
                w = weights[key]
                if as_tensor:
                    h = held.get(key)
                    if h is None or h[0] is not w:  # (each flags test was ~1.5 us cold)
                        h = held[key] = (w, weight_tensor(w))
                    w = h[1]
                args.append(w)
            elif kind == "input":
                t = inputs[key]
                args.append((t.detach() if t.requires_grad else t) if as_tensor and t.layout is torch.strided
                            else input_np(t))
            elif kind == "buffer":
                args.append(buffers[key])
            elif kind == "const":
                args.append(self._consts[key])
            elif kind == "hyper":
                args.append(np.asarray(self.loss_scale, dtype=np.float32))
            else:
                args.append(accs[key])
        main = p.main
        main.rng = self._replica_rngs[0]
        w = None  # the last weight is args' alone (held_alone counts)
        # (nothing donated: the accumulators of one micro-batch are the read-only
        # zeros of _zeroed_accumulators, which held_alone never gives up)
        res = main(*args, tensors=p.outputs_only)
        if p.outputs_only and p.one_plain_output:
            # an inference model returning one tensor, most often an ATen step's
            # own (main's tensors): fresh_outputs' test for it, without its lists
            v = res[0]
            if type(v) is torch.Tensor and v._base is None and v.is_contiguous():
                for a in args:
                    if a is v:
                        return copied(v)
                return v
        fresh = fresh_outputs(args, res, p.main_results, main.constant_ids)
        if p.outputs_only:
            outputs = res
        else:
            outputs = []
            buffers = dict(buffers)
            for (kind, key), v in zip(p.main_results, res):
                if kind == "output":
                    outputs.append(v)
                elif kind == "buffer":
                    buffers[key] = v
                else:  # accum (Program.one_replica)
                    accs[key] = v
            self._device_buffers = buffers
            self._replica_buffers = [buffers]
        del args, res  # the weights are the executor's alone again (held_alone)
        if self._training and p.update is not None:
            self._update(accs if accs is not None else {})
        from_numpy = torch.from_numpy
        results = [(v if type(v) is torch.Tensor else from_numpy(v)) if id(v) in fresh else copied(v)
                   for v in outputs]
        if p.one_plain_output:
            return results[0]
        return tuple(results) if p.tuple_output else self._structured(results, p.out_ids)


    def _write_back(self, snap: ModuleSnapshot | None = None) -> None:
        """Write the executor's weights and buffers into the torch module.
        `snap`: the module's snapshot, when the caller has just checked it."""
        if snap is None:
            snap = self._snapshot()
        named_p, named_b = snap.named_p, snap.named_b
        # a training executor's weights are mostly the parameters' own memory
        # (copyWeightsToDevice): only what did not update in place is copied
        grouped = self._groups.names
        aliased = self._aliased
        for n, w in self._weights.items():
            t = named_p[n]
            if n in grouped:  # VariableRetrievalMode: one value per group or per replica
                w = self._groups.to_host(n, w)
                if tuple(t.shape) != w.shape:
                    t.data = torch.from_numpy(np.array(w))
                    continue
            a = aliased.get(n)
            if a is not None and a[0]() is w and a[1] is t and t.data_ptr() == a[2] and t.shape == a[3] \
                    and t.is_contiguous():
                continue  # updated in place, in the parameter's own memory
            if not same_memory(t, w):  # an update that did not run in place
                copy_into(t, w)
        for n, b in self._device_buffers.items():
            copy_into(named_b[n], np.asarray(b))
        self._host_version = _HostVersion.mark(self._host_tensors(named_p, named_b))
        self._host_seen = (snap, _HostVersion.counter)

    def _host_tensors(self, named_p: dict | None = None, named_b: dict | None = None) -> list[torch.Tensor]:
        if self._program is None:
            return []
        if named_p is None:  # walking the modules costs ~1 ms a call on a BERT: a snapshot
            snap = self._snapshot()
            named_p, named_b = snap.named_p, snap.named_b
        return [named_p[n] for n in self._program.traced.params] + \
            [named_b[n] for n in self._program.traced.buffers]

    def _revive(self) -> None:
        """Start over after destroy(): the next compile sees only the module's
        current weights and buffers (the device's state went with destroy;
        a training model starts a new optimizer state). A training model whose
        module another live training model wraps meanwhile stays an error."""
        if self._training and not self._options.offline_ipu_target:
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

    def _check_alive(self) -> None:
        if self._destroyed:
            raise Error("this model was destroyed: call it (or compile()) to compile it again")


def _check_optimizer(model: torch.nn.Module, optimizer: Any) -> None:
    """The optimizer must be a torch optimizer over this model's parameters."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise Error(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    own = {id(p) for p in model.parameters()}
    foreign = sum(id(p) not in own for g in optimizer.param_groups for p in g["params"])
    if foreign:
        raise Error(f"the optimizer holds {foreign} parameter(s) that are not parameters of this "
                    "model: build it over model.parameters()")


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


def _executor_profile_dir(ex: PoplarExecutor, base: str) -> str:
    """One subdirectory per executor, named by the model and training or
    inference ("Net_training", "Net_inference"; "_2", "_3" for further
    executors of the same kind), so executors sharing a directory keep
    their reports apart."""
    name = ex._options.model_name or type(ex._user_model).__name__
    stem = f"{name}_{'training' if ex._training else 'inference'}"
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


def host_weights(ex) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The parameters and buffers an export writes: the executor's own, or,
    for an offline executor (which keeps no copies), read from the model now."""
    if not ex._options.offline_ipu_target:
        return ex._weights, ex._device_buffers
    named_p = dict(ex._user_model.named_parameters(remove_duplicate=False))
    named_b = dict(ex._user_model.named_buffers(remove_duplicate=False))
    t = ex._program.traced
    pairs = [(n, named_p[n]) for n in t.params] + [(n, named_b[n]) for n in t.buffers]
    if t.meta_tensors or any(v.device.type == "meta" for _, v in pairs):
        raise Error("cannot export this executable: the model's tensors are on the meta device "
                    "(built for sizing only), so there are no weights to write; materialise the "
                    "model and compile again to export it")
    return ({n: to_np(named_p[n]) for n in t.params}, {n: to_np(named_b[n]) for n in t.buffers})


def _is_variable(optimizer, attr: str) -> bool:
    va = getattr(optimizer, "variable_attrs", None)
    return va is not None and not va.isConstant(attr)


def _np_dtype_or_none(dtype: torch.dtype):
    """The numpy dtype an executor holds a torch dtype in (None: none)."""
    try:
        return np_dtype_of(dtype)
    except Error:
        return None


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


def _flat_inputs(*inputs):
    """The signature of a call passing an executable's tensors flat."""


_TRAINING_WRAPPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trainingModel(model, options=None, optimizer=None) -> PoplarExecutor:
    """Wrap `model` for training on the simulated IPU (seeds/000 4.2.1). A module
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
    """Wrap `model` for inference on the simulated IPU (seeds/000 4.2.2). Given a
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
