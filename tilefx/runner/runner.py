"""The executor beneath both surfaces: `Runner` holds a model's compiled
program and runs it call after call, as PopTorch's PoplarExecutor
(api/executor.py, a Runner that is also the model) and PopART's sessions
(popart/session.py) both do. It is configured by the driver's
`CompileConfig` (what the model compiles with: the factors, the strategy,
the precision, the seed) and `HostSettings` (what the host loop reads
beyond it), and reads nothing of a surface's options:

    for each device iteration d:
        for each accumulation step g:
            for each replica r:  @main on micro-batch [d, g, r]   (accumulates)
        sum the replicas' accumulators; @update                   (one weight update)

Host tensors are read as [deviceIterations, gradientAccumulation, replicas,
micro-batch, ...] flattened into dim 0 (PopTorch user guide, "Efficient data
batching"), and outputs are returned in the same order, reduced as the
output mode says. The mixins: the compile path (compiling.py), the call's
host loop (running.py), the weight update (weight_update.py), the outputs
(outputs.py), the executable file (executable.py). What a surface adds, it
adds by overriding the methods each mixin lists at its end (PopTorch's:
api/compiling.py, api/executable.py, api/executor.py)."""

from __future__ import annotations

import logging
import weakref

import numpy as np
import torch

from tilefx.backend.machine import machine
from tilefx.backend.profile import Profile
from tilefx.backend.random_streams import RandomStreams
from tilefx.backend.schedule import Schedule
from tilefx.driver import CompileConfig, Program
from tilefx.errors import Error, error_also
from tilefx.lowering import aten_kernels
from tilefx.lowering.call_spec import CallSpec, bind_call, reordered_like, restore_caches
from tilefx.lowering.from_torch import np_dtype_of
from tilefx.lowering.optimizers import optimizer_config
from tilefx.runner import compile_log
from tilefx.runner.compiling import CompilePath, check_not_meta
from tilefx.runner.executable import ExecutableFiles
from tilefx.runner.host_arrays import same_memory, to_np, viewable
from tilefx.runner.module_snapshot import ModuleSnapshot, snapshot_of
from tilefx.runner.outputs import Outputs, plan_of
from tilefx.runner.replica_groups import NO_GROUPS
from tilefx.runner.running import CallPath, HostVersion
from tilefx.runner.serialized import serialized
from tilefx.runner.settings import HostSettings
from tilefx.runner.weight_update import WeightUpdates

log = logging.getLogger("tilefx")

# the output modes of one micro-batch whose call returns its one result (_run_one)
_ONE_CALL_OUTPUT_MODES = ("all", "final")

# PopTorch's words (its NO_EXECUTABLE_ERR)
NOT_COMPILED = "Model has not been compiled or has been destroyed."


class Runner(CompilePath, CallPath, WeightUpdates, Outputs, ExecutableFiles):
    """A model's compiled program, run call after call (see the module docstring)."""

    # called with the traced module (and its copy as the trace left it) in
    # place of the graph passes and the program: tilefx.plan costs it itself
    _before_passes = None

    def __init__(self, model: torch.nn.Module, config: CompileConfig, host: HostSettings,
                 optimizer: torch.optim.Optimizer | None = None):
        """`model` compiled with `config` (its optimizer's configuration, when
        training, added from `optimizer` at the first call) and run with `host`."""
        if not isinstance(config, CompileConfig):
            raise Error(f"Runner expects a tilefx.driver.CompileConfig, got {type(config).__name__}")
        if not isinstance(host, HostSettings):
            raise Error(f"Runner expects a tilefx.runner.settings.HostSettings, got {type(host).__name__}")
        aten_kernels.install()  # the program is verified by torch's rules and runs ATen's kernels
        self._user_model = model
        self._training = config.training
        self._config, self._host = config, host
        self._optimizer = optimizer
        self._program: Program | None = None
        self._call: CallSpec | None = None  # how the compiled call bound its arguments
        self._recorded_call: CallSpec | None = None  # the call an executable file recorded
        # the tensors anchored by name (PopTorch's Options.anchorTensor, api/anchors.py; a
        # name no model attribute has: PoplarExecutor starts with a copy of the model's attributes)
        self._tilefx_anchors = None
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
        self._groups = NO_GROUPS  # weights grouped across replicas (set when compiling)
        self._device_buffers: dict[str, np.ndarray] = {}
        self._opt_state: dict[str, np.ndarray] = {}
        self._step = 0
        self._host_version = -1
        self._named: ModuleSnapshot | None = None
        self._host_seen: tuple = ()  # (snapshot, HostVersion.counter) at the last sync check
        self._groups_checked: tuple = ()  # (snapshot, grouping settings) at the last check
        self._fast_call: tuple | None = None  # (forward function, argument count): see _remember_call
        self._one_call_for: Program | None = None  # the program _one_call was decided for
        self._one_call = False
        self._destroyed = False
        self._attached = False  # set by the first call and attachToDevice, cleared by detachFromDevice
        self._has_run = False  # cycleCount and getTimestamps need a run
        # the random ops' streams, one per replica of this process (PopART's sessions
        # and the executable file read and reseed them)
        self.random_streams = RandomStreams(config.seed, config.process_id * config.replication_factor,
                                            config.replication_factor)
        self._dist = None  # the other processes of a distributed training model (api/distributed.py)

    @property
    def model(self) -> torch.nn.Module:
        return self._user_model

    @property
    def executable_cache_dir(self) -> str | None:
        """The executable cache's directory (None: no cache)."""
        return self._host.cache_dir

    # -- what the compiled program tells ------------------------------------

    def ir(self, level: str = "graph", locations: bool = False) -> str:
        """The IR text: "import" (straight from the trace), "graph" (after the graph
        passes) or "device" (lowered to the tile dialect, with mappings and costs);
        `locations=True` prints each op's source location (`loc("model.py":12:0)`)."""
        if self._program is None:
            raise Error("the model is not compiled yet: call it or compile() first")
        if locations and level in ("import", "graph"):
            import io

            from xdsl.printer import Printer

            out = io.StringIO()
            module = self._program.import_module if level == "import" else self._program.module
            if isinstance(module, str):  # loaded from an executable file: text only
                return str(module)
            Printer(stream=out, print_debuginfo=True).print_op(module)
            return out.getvalue()
        if level == "import":
            return str(self._program.import_module)
        if level == "graph":
            return str(self._program.module)
        if level == "device":
            from tilefx.lowering.to_device import lower_to_device  # the tile dialect: only for this view

            device = self._program.module.clone()
            c = self._program.config
            lower_to_device(device, machine(c.machine), replicas=c.replication_factor * c.processes,
                            locations=c.locations, training=self._training, accumulate=c.accumulate,
                            strategy=self._schedule.strategy, liveness=self._schedule.liveness)
            return str(device)
        raise Error(f"unknown IR level {level!r}: expected 'import', 'graph' or 'device'")

    @property
    def compile_seconds(self) -> float:
        return self._program.compile_seconds if self._program else 0.0

    @property
    def profile(self) -> Profile:
        """The machine model's view of this program: cycles, timeline, memory."""
        if self._program is None:
            raise Error("the model is not compiled yet: call it or compile() first")
        return self._profile

    @property
    def schedule(self) -> Schedule:
        """Which IPU runs which stage and micro-batch when (see backend/schedule.py)."""
        if self._program is None:
            raise Error("the model is not compiled yet: call it or compile() first")
        return self._schedule

    # -- the call ----------------------------------------------------------

    def isCompiled(self) -> bool:
        return self._program is not None

    @serialized
    def compile(self, *args, **kwargs) -> None:
        """Compile for these inputs without running."""
        call, inputs = self._flatten_inputs(args, kwargs)
        self._compile(inputs, call)

    @serialized
    def __call__(self, *args, **kwargs):
        return self._run_call(args, kwargs)

    def _run_call(self, args: tuple, kwargs: dict):
        """One call: its inputs bound (or checked as the last call's), the
        program compiled at the first, the weights synced with the model's
        tensors, the host loop, the outputs. Each function this path calls
        runs on caches the last call's kernels evicted (a few us each,
        against ~0.2 us hot): the checks are written out here rather than in
        small helpers."""
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
            check_not_meta([(f"input {n}", x) for n, x in zip(call.tensor_names(), inputs)])
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
        if self._call is not None:
            self._check_groups(snap)
        # only an executor's write-back moves the counter: unchanged, no tensor can be newer
        if self._host_seen != (snap, HostVersion.counter):
            if HostVersion.latest(self._host_tensors()) > self._host_version:
                self.copyWeightsToDevice()
            self._host_seen = (self._snapshot(), HostVersion.counter)
        if not self._attached:
            self._attached = True  # a detached model attaches again when called (PopTorch)
        if self._one_call_for is not self._program:  # decided once per program (options are frozen)
            self._one_call_for, self._one_call = self._program, self._one_micro_batch()
        anchored = self.__dict__.get("_tilefx_anchors")
        if anchored is not None and self._one_call:  # (_run takes them per device iteration)
            self._anchor_weights("value")
        if not self._program.config.host_io:  # host I/O disabled: the device makes its inputs
            inputs = self._synthetic_inputs(inputs)
        if self._one_call:
            out = self._run_one(inputs)
        else:
            out = self._run(inputs)
        if anchored is not None and self._training and self._one_call:
            self._anchor_weights("updated")
        if not self._program.config.host_io:  # ... and streams nothing back
            out = torch.utils._pytree.tree_map(
                lambda t: torch.zeros_like(t) if isinstance(t, torch.Tensor) else t, out)
        if not self._has_run:
            self._has_run = True
        if self._training:
            # the module tree is the one checked above: the program ran, not the module
            self._write_back(snap)
        if self._program.traced.cache_states is not None:  # (a call passing caches is never fast)
            out = restore_caches(out, call.caches if inputs_bound else [], self._program.traced.cache_states)
        return out

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

    def _synthetic_inputs(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Options.enableSyntheticData: "data generated from a random normal
        distribution on the IPU. Host I/O is disabled": inputs of the shapes
        and dtypes passed, random normal (floating point) or zeros (integers,
        booleans), from a stream seeded by randomSeed; the caller's tensors
        are neither read nor written."""
        g = self.__dict__.get("_synthetic_rng")
        if g is None:
            g = self._synthetic_rng = torch.Generator().manual_seed(self._program.config.seed or 0)
        return [torch.randn(x.shape, generator=g).to(x.dtype) if x.is_floating_point()
                else torch.zeros_like(x) for x in inputs]

    def _one_micro_batch(self) -> bool:
        """Whether a call is one micro-batch on one replica (`_run_one`): no
        device iterations, replicas, gradient accumulation or replica groups,
        and every output mode that returns that one micro-batch's outputs."""
        c, host = self._program.config, self._host
        return c.device_iterations == c.replication_factor == c.micro_batches == 1 and self._dist is None and \
            plan_of(self._program).one_replica and not self._groups.grouped and host.broadcast_buffers and \
            host.output_mode in _ONE_CALL_OUTPUT_MODES

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
        the module tree changed: runner/module_snapshot.py)."""
        self._named = snapshot_of(self._user_model, self._named)
        return self._named

    @serialized
    def copyWeightsToDevice(self) -> None:
        """Read the torch module's parameters and buffers into the executor.

        An executor compiled for an offline IPU target never runs, so it copies
        nothing: the model's own tensors stay the only copy (one for all
        replicas), read only when the executable is exported. Before the
        first compile there is no device copy: PopTorch's error."""
        self._check_compiled()
        named_p = dict(self._user_model.named_parameters(remove_duplicate=False))
        named_b = dict(self._user_model.named_buffers(remove_duplicate=False))
        if self._program is not None and not self._host.offline:
            log.debug("Writing weights from host to IPU memory.")  # PopTorch's words
            self._check_weights_fit(self._snapshot())
            check_not_meta([(n, named_p[n]) for n in self._program.traced.params] +
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
        self._host_version = HostVersion.latest(self._host_tensors())

    def _check_weights_fit(self, snap: ModuleSnapshot) -> None:
        """After the module tree changed: every parameter and buffer the
        program was compiled for is still there, of the same shape and dtype
        (`resize_token_embeddings`, a layer replaced by a wider one, `half()`
        would otherwise leave the program computing with the old weights)."""
        if self._program is None or self._host.offline:
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

    @serialized
    def copyWeightsToHost(self) -> None:
        """Write the executor's weights and buffers into the torch module
        (before the first compile: PopTorch's error, there is nothing to copy)."""
        self._check_compiled()
        if self._program is not None:  # (an executor only generate() ran has no weights of its own)
            log.debug("Writing weights from IPU to host.")
            self._write_back()

    @serialized
    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Use new optimizer hyper-parameters from the next call on.

        After compile, the variable attributes (lr, the ones given explicitly
        or marked variable) take effect at the next call without recompiling;
        changing a constant one is an error naming it."""
        from tilefx.lowering.optimizers import (attach, check_unchanged_constants, hyper_values, take_pending_state,
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
        check_unchanged_constants(compiled, new_cfg, self._opt_groups, new_groups, optimizer,
                                  self.__dict__.get("_grad_dtype"))
        if "_opt_known" in self.__dict__:
            warn_unexpected_attributes(optimizer, self._opt_known, self._opt_warned,
                                       self._relax_optimizer_checks())
        self._optimizer = optimizer
        new_cfg["grad_scale"] = compiled.get("grad_scale", 1.0)
        self._hypers.update({k: v for k, v in hyper_values(new_cfg).items() if k in self._hypers})
        self._optimizer_logged = compile_log.log_optimizer(
            self._optimizer, {**new_cfg, "variable": compiled.get("variable", [])}, new_groups, self._grad_dtype,
            self.__dict__.get("_optimizer_logged"))
        attach(optimizer, self)
        self._reset_device_params()
        pending = take_pending_state(optimizer)
        if pending is not None:
            log.debug("Writing optimiser state tensors from host to IPU memory.")
            self._load_poptorch_state(pending)

    def _factors(self) -> tuple[int, int, int, int]:
        """Device iterations, replicas, replicas per input slice, micro-batches per weight update."""
        c = self._config
        return c.device_iterations, c.replication_factor, self._host.input_group_size, c.gradient_accumulation

    def _processes(self) -> int:
        """The processes the model's replicas run in."""
        return self._config.processes

    def _flatten_inputs(self, args, kwargs) -> tuple[CallSpec, list[torch.Tensor]]:
        """The call bound to forward's signature and its tensor leaves
        (PopTorch's input conventions, see lowering/call_spec.py)."""
        if self._recorded_call is not None and self._call is None:
            return self._bind_loaded(args, kwargs)
        call, inputs = bind_call(self._user_model.forward, args, kwargs)
        if self._call is not None and call.spec != self._call.spec:  # dictionaries in another order?
            again = bind_call(self._user_model.forward, *reordered_like(self._call, args, kwargs))
            if again[0].spec == self._call.spec:
                return again
        return call, inputs

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
                # an Error (the guide's `except poptorch.Error`) that is also the
                # AssertionError PopTorch raised for it
                raise error_also(AssertionError)(
                    f"Invalid batch dimension: input {names[i] if names else i} has batch size "
                    f"{1 if x.dim() == 0 else x.shape[0]}, which is not a multiple of "
                    f"deviceIterations({d}) * replicationFactor({r}) / inputReplicaGroupSize({gsize}) "
                    f"* gradientAccumulation({g}) = {n}. Give each call a multiple of {n} samples: "
                    f"poptorch.DataLoader(opts, ...) batches by these options")
            mb = x.shape[0] // n
        return mb or 0

    def _host_weights(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The parameters and buffers an export writes: the executor's own, or,
        for an offline executor (which keeps no copies), read from the model now."""
        if not self._host.offline:
            return self._weights, self._device_buffers
        named_p = dict(self._user_model.named_parameters(remove_duplicate=False))
        named_b = dict(self._user_model.named_buffers(remove_duplicate=False))
        t = self._program.traced
        pairs = [(n, named_p[n]) for n in t.params] + [(n, named_b[n]) for n in t.buffers]
        if t.meta_tensors or any(v.device.type == "meta" for _, v in pairs):
            raise Error("cannot export this executable: the model's tensors are on the meta device "
                        "(built for sizing only), so there are no weights to write; materialise the "
                        "model and compile again to export it")
        return ({n: to_np(named_p[n]) for n in t.params}, {n: to_np(named_b[n]) for n in t.buffers})

    def _param_names(self) -> dict[int, str]:
        """Each parameter tensor by the name the trace gives it (tied weights: the traced one)."""
        traced = getattr(self, "_traced_params", set())
        names: dict[int, str] = {}
        for n, p in self._user_model.named_parameters(remove_duplicate=False):
            if id(p) not in names or n in traced:
                names[id(p)] = n
        return names

    def _host_tensors(self, named_p: dict | None = None, named_b: dict | None = None) -> list[torch.Tensor]:
        if self._program is None:
            return []
        if named_p is None:  # walking the modules costs ~1 ms a call on a BERT: a snapshot
            snap = self._snapshot()
            named_p, named_b = snap.named_p, snap.named_b
        return [named_p[n] for n in self._program.traced.params] + \
            [named_b[n] for n in self._program.traced.buffers]

    def _check_alive(self) -> None:
        if self._destroyed:
            raise Error("this model was destroyed: call it (or compile()) to compile it again")

    def _check_compiled(self) -> None:
        """A method that needs the program (copying weights) called before the first compile."""
        if self._program is None:
            raise Error(NOT_COMPILED)

    # -- what a surface adds (PopTorch's: api/executor.py) -------------------

    def _check_groups(self, snap: ModuleSnapshot) -> None:
        """The grouping of weights across replicas still the one compiled
        (PopTorch's replicaGrouping), checked at each call after the first."""

    def _relax_optimizer_checks(self) -> bool:
        """Whether an optimizer attribute the optimizer type does not know is
        only a warning (PopTorch's Options.relaxOptimizerAttributesChecks)."""
        return False


def _np_dtype_or_none(dtype: torch.dtype):
    """The numpy dtype an executor holds a torch dtype in (None: none)."""
    try:
        return np_dtype_of(dtype)
    except Error:
        return None


def _flat_inputs(*inputs):
    """The signature of a call passing an executable's tensors flat."""
