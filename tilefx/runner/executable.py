"""The executor's executable file (PopTorch user guide, 4.10 "Precompilation
and caching"): `loadExecutable`, what an executor writes into the file's
parts and takes back from them, the file's torch side (the inputs' torch
dtypes, the outputs' structure, the dtypes tensors are saved in), and the
executable cache's key. The file format itself (the parts, the manifest,
reading and verifying) is the driver's (driver/executable.py); a surface's
options in it, its `options.json`, the surface's (PopTorch's: api/export.py,
api/executable.py); the cache's entries runner/executable_cache.py's, its
store the driver's (driver/executable_cache.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import time

import numpy as np
import torch

from tilefx.driver import executable as file_format
from tilefx.driver.archive import tensors_from, tilefx_version
from tilefx.driver.executable import FORMAT, FORMAT_VERSION
from tilefx.dialects.const_value import attach_values, text_without_values
from tilefx.errors import Error
from tilefx.runner.replica_groups import NO_GROUPS, ReplicaGroups


# the key prefix of forward's tensor defaults in weights.safetensors (inputs
# of the recorded call when a loaded executor's call leaves them out)
DEFAULT_PREFIX = "default/"


def read(filename) -> dict:
    """The verified parts of an executable file (driver/executable.py
    `read`), the inputs' torch dtypes among what is verified."""
    parts = file_format.read(filename)
    names = parts["executor"].get("input_torch_dtypes")
    if names is not None and not all(isinstance(getattr(torch, n, None), torch.dtype) for n in names):
        raise Error(f"{os.fspath(filename)}: executor.json: input_torch_dtypes: must list torch dtype names")
    return parts


def out_spec_from(spec: str | None, filename: str):
    """The outputs' structure, from torch's pytree JSON (types by their
    registered names only: nothing is imported or evaluated)."""
    if not spec:
        return None
    try:
        return torch.utils._pytree.treespec_loads(spec)
    except (ValueError, TypeError, KeyError, NotImplementedError, AttributeError, IndexError,
            RecursionError) as e:
        raise Error(f"{filename}: executor.json: out_spec is not a valid output structure "
                    f"({type(e).__name__}: {str(e)[:200]})") from None


def saved_dtype(t: torch.Tensor) -> np.dtype:
    """The dtype a tensor is saved in (bfloat16 as float32, which numpy lacks)."""
    return np.dtype(np.float32) if t.dtype == torch.bfloat16 else torch.empty(0, dtype=t.dtype).numpy().dtype


def torch_dtypes_from(names, count: int, filename: str) -> list[torch.dtype] | None:
    """The inputs' torch dtypes an executable file recorded (None for files
    that record none)."""
    if not names:
        return None
    dtypes = [getattr(torch, n, None) if isinstance(n, str) else None for n in names]
    if len(dtypes) != count or not all(isinstance(d, torch.dtype) for d in dtypes):
        raise Error(f"{filename}: input_torch_dtypes must name one torch dtype per input ({count})")
    return dtypes


class ExecutableFiles:
    """An executor's methods that write and read executable files."""

    def loadExecutable(self, filename: str) -> None:
        """Use the program of an exported executable instead of compiling: the
        wrapped model keeps its own weights; the program (and the optimizer
        state) come from the file."""
        self._check_alive()
        parts = read(filename)
        self.install_executable(parts, filename, weights_from_file=False)
        self._load_optimizer_part(parts)
        if self._continues_rng_of(parts["options"]):
            self._restore_rng(parts["executor"], filename)

    # -- what other modules call: PopART's sessions, poptorch.load, the cache --

    def write_executable(self, filename: str) -> str:
        """Write this compiled executor's executable file to `filename` (a
        directory gets `model.poptorch` inside); returns the file's path."""
        return file_format.write(self._executable_parts(), str(filename))

    def install_executable(self, parts: dict, filename: str, weights_from_file: bool,
                           restore_rng: bool = False) -> None:
        """Make the program of a file's verified parts (`read`) this
        executor's (no tracing, no passes). `weights_from_file`: the model's
        parameters and buffers, the optimizer state and the update count
        become the file's (`poptorch.load`), else the model keeps its own
        (`loadExecutable`, a cache hit); `restore_rng`: the random streams
        continue where a `save(save_rng_state=True)` file stopped them."""
        from tilefx.lowering.from_torch import TracedGraph

        start = time.perf_counter()
        meta = parts["executor"]
        if bool(meta.get("training")) != self._training:
            kind = "a training" if meta.get("training") else "an inference"
            raise Error(f"{filename}: holds {kind} executable; wrap the model with the matching "
                        f"{'trainingModel' if meta.get('training') else 'inferenceModel'}")
        module = file_format.parse_ir(parts["graph.mlir"], filename, "graph.mlir")
        tensors = tensors_from(parts["weights.safetensors"], "weights.safetensors")
        consts = {n: tensors[f"const/{n}"] for n in meta.get("consts", []) if f"const/{n}" in tensors}
        attach_values(module, consts)  # the IR carries its constants, as a compiled one does
        import_module = file_format.IRText(parts["import.mlir"].decode(), consts)  # shown by ir("import"), never run
        traced = TracedGraph(import_module, list(meta["params"]), list(meta["buffers"]), int(meta["num_inputs"]),
                             int(meta["num_outputs"]), meta.get("loss_index"), consts,
                             out_spec=out_spec_from(meta.get("out_spec"), filename),
                             anchor_outputs=int(meta.get("anchor_outputs", 0)))
        named_p = dict(self.model.named_parameters(remove_duplicate=False))
        named_b = dict(self.model.named_buffers(remove_duplicate=False))
        # (first: a weight grouped another way also has another shape on the host)
        self._groups = self._install_grouping(meta.get("replica_grouping"), named_p, filename)
        for kind, names, have, prefix in (("parameter", traced.params, named_p, "param/"),
                                          ("buffer", traced.buffers, named_b, "buffer/")):
            for n in names:
                if n not in have:
                    raise Error(f"{filename}: the executable needs the {kind} {n!r}, which the model does not "
                                "have: it was exported from a different model")
                saved, own = tensors.get(prefix + n), have[n]
                shape = tuple(own.shape) or (1,)  # (the file keeps a 0-d tensor as one element)
                if saved is not None and (tuple(saved.shape) not in (tuple(own.shape), shape)
                                          or saved.dtype != saved_dtype(own)):
                    raise Error(f"{filename}: the executable's {kind} {n!r} is {tuple(saved.shape)} "
                                f"{saved.dtype}, the model's {tuple(own.shape)} {saved_dtype(own)}: it was "
                                "exported from a different model")
        if weights_from_file:
            with torch.no_grad():
                for n in traced.params:
                    named_p[n].copy_(torch.from_numpy(tensors[f"param/{n}"]))
                for n in traced.buffers:
                    named_b[n].copy_(torch.from_numpy(tensors[f"buffer/{n}"]))
        self._install(traced, import_module, module, [tuple(s) for s in meta["input_shapes"]],
                      [np.dtype(d) for d in meta["input_dtypes"]], start)
        self._loaded_input_dtypes = torch_dtypes_from(meta.get("input_torch_dtypes"),
                                                             len(self._program.input_shapes), filename)
        if meta.get("call") is not None:
            self._bind_recorded_call(meta["call"], filename, {n[len(DEFAULT_PREFIX):]: v for n, v in tensors.items()
                                                              if n.startswith(DEFAULT_PREFIX)})
        if weights_from_file:
            self._load_optimizer_part(parts)
        if restore_rng:
            self._restore_rng(meta, filename)

    def executable_cache_key(self, inputs) -> str:
        """Everything the compiled program depends on, hashed (the executable
        cache's key, runner/executable_cache.py)."""
        h = hashlib.sha256()

        def feed(*items):
            for it in items:
                h.update(str(it).encode())
                h.update(b"\0")

        feed(FORMAT, FORMAT_VERSION, tilefx_version(), self._training)
        feed(*self._cache_identity())
        if self._training and self._optimizer is not None:
            from tilefx.lowering.optimizers import optimizer_config

            feed(json.dumps(optimizer_config(self._optimizer, self._param_names())[0], sort_keys=True,
                            default=str))
        for x in inputs:
            feed(tuple(x.shape), x.dtype)
        m = self.model
        if m.training == self._training:  # traced with its submodules' own modes (compiling.py)
            feed(*[sub.training for sub in m.modules()])
        for n, p in m.named_parameters(remove_duplicate=False):
            feed(n, tuple(p.shape), p.dtype, p.requires_grad, getattr(p, "_tilefx_replica_grouping", None))
        for n, b in m.named_buffers(remove_duplicate=False):
            feed(n, tuple(b.shape), b.dtype)
        from tilefx.lowering.tracing_state import GradientOutputs

        feed(GradientOutputs.requested)
        for sub in m.modules():  # modules whose graph is data (an ONNX model) say what it is
            identity = getattr(sub, "tilefx_cache_identity", None)
            if callable(identity):
                feed(identity())
        for cls in sorted({type(sub) for sub in m.modules()}, key=lambda c: c.__module__ + c.__qualname__):
            feed(cls.__module__, cls.__qualname__)
            try:
                feed(inspect.getsource(cls))
            except (OSError, TypeError):
                pass  # classes without source (built in): named by module and qualname
        return h.hexdigest()

    # -- writing ---------------------------------------------------------------

    def _input_torch_dtypes(self) -> list[torch.dtype]:
        """The torch dtypes of the program's inputs: those it was compiled for,
        or those the file it was loaded from recorded (none for older files)."""
        if self._call is not None:
            return [d for _, d in self._compiled_inputs]
        return self.__dict__.get("_loaded_input_dtypes") or []

    def _executable_parts(self) -> dict[str, bytes]:
        """The parts of this compiled executor's executable file (driver/executable.py PARTS)."""
        p = self._program
        t = p.traced
        spec = None
        if t.out_spec is not None:
            spec = torch.utils._pytree.treespec_dumps(t.out_spec)
        meta = {
            "training": self._training, "params": t.params, "buffers": t.buffers,
            "num_inputs": t.num_inputs, "num_outputs": t.num_outputs, "loss_index": t.loss_index,
            "anchor_outputs": t.anchor_outputs,
            "consts": sorted(t.consts), "out_spec": spec,
            "input_shapes": [list(s) for s in p.input_shapes],
            "input_dtypes": [str(np.dtype(d)) for d in p.input_dtypes],
            # torch's names, which tell bfloat16 (numpy's float32 above) apart
            "input_torch_dtypes": [str(d).removeprefix("torch.") for d in self._input_torch_dtypes()],
            "step": int(self._step), "model": type(self.model).__name__,
            "exported_model": bool(getattr(self, "_export_model", True)),
        }
        if self._call is not None:  # how the call bound its arguments, for poptorch.load's executor
            from tilefx.lowering.call_spec import call_to_json

            call = call_to_json(self._call, self.model.forward)
            if call is not None:
                meta["call"] = call
        if getattr(self, "_export_rng", False):  # save(save_rng_state=True): plain ints, as numpy gives them
            meta["rng_states"] = self.random_streams.states()
        params, buffers = self._host_weights()
        groups = self._groups
        if groups.grouped:  # replica-grouped weights: their grouping, and their values as the host holds them
            meta["replica_grouping"] = self._grouping_json()
            if not self._host.offline:  # (offline: read from the model, already the host's layout)
                params = {n: groups.to_host(n, v) if n in groups.names else v for n, v in params.items()}
        weights = {f"param/{n}": v for n, v in params.items()}
        weights.update({f"buffer/{n}": np.asarray(v) for n, v in buffers.items()})
        weights.update({f"const/{n}": v for n, v in t.consts.items()})
        if "call" in meta:  # forward's tensor defaults, which a loaded call binds as inputs
            from tilefx.lowering.call_spec import tensor_defaults

            weights.update({f"{DEFAULT_PREFIX}{n}": v.detach().cpu().float().numpy()
                            if v.dtype == torch.bfloat16 else v.detach().cpu().numpy()
                            for n, v in tensor_defaults(self.model.forward).items()})
        from tilefx.driver.archive import tensors_bytes

        return {
            # the constants' values are in weights.safetensors: the IR texts go without them
            "graph.mlir": text_without_values(p.module).encode(),
            "import.mlir": text_without_values(p.import_module).encode(),
            "executor.json": json.dumps(meta, indent=1).encode(),
            "options.json": json.dumps(self._options_part(), indent=1).encode(),
            "weights.safetensors": tensors_bytes(weights),
            "optimizer.safetensors": tensors_bytes(dict(self._opt_state)),
        }

    # -- reading ---------------------------------------------------------------

    def _load_optimizer_part(self, parts: dict) -> None:
        """The file's optimizer state (the tensors this program keeps) and update count."""
        state = tensors_from(parts["optimizer.safetensors"], "optimizer.safetensors")
        for n, v in state.items():
            if n in self._opt_state:
                self._opt_state[n] = v.astype(self._opt_state[n].dtype, copy=True)
        self._step = int(parts["executor"].get("step", 0))

    def _bind_recorded_call(self, data, filename: str, defaults: dict[str, np.ndarray]) -> None:
        """The call the file recorded becomes the one later calls must match, as
        for an executor that compiled it: a loaded model (which has no Python
        code) takes the original forward's signature, so keywords, nested inputs
        and defaults bind as they did; a model given `loadExecutable` (or a cache
        hit) binds with its own forward and must make the same structure."""
        from tilefx.lowering.call_spec import call_from_json

        call, sig = call_from_json(data, filename, defaults)
        if sig is not None and self._takes_signature():
            self.model.take_signature(sig)
        if call.num_tensors != len(self._program.input_shapes):
            raise Error(f"{filename}: the recorded call has {call.num_tensors} tensor(s), the program "
                        f"{len(self._program.input_shapes)} input(s)")
        self._recorded_call = call

    def _restore_rng(self, meta: dict, filename: str) -> None:
        """Continue the random streams a `save(save_rng_state=True)` file recorded
        (one per replica), into the generator objects the program already holds."""
        states = meta.get("rng_states")
        if states is not None:
            self.random_streams.set_states(states, f"{filename}: rng_states")

    # -- what a surface adds (PopTorch's: api/executable.py) ----------------

    def _options_part(self) -> dict:
        """The file's options.json, the surface's options: here what the host
        loop runs with (its host's paths left out) and the random seed."""
        host = dataclasses.asdict(self._host)
        del host["cache_dir"], host["profile_dir"]
        return {"host_settings": host, "seed": self._config.seed}

    def _continues_rng_of(self, options: dict) -> bool:
        """Whether a file's random streams are this executor's to continue: it
        was written with the same random seed."""
        return options.get("seed") == self._config.seed

    def _cache_identity(self) -> list[str]:
        """What the program depends on beyond the model, the optimizer and the inputs (the cache's key)."""
        return [repr(self._config), repr(self._host.replace(cache_dir=None, profile_dir=None))]

    def _install_grouping(self, data, named_p: dict, filename: str) -> ReplicaGroups:
        """The groups of weights across replicas of a file's program (its
        `replica_grouping`, which only a surface that groups weights
        writes, with `_grouping_json`)."""
        if data:
            raise Error(f"{filename}: the executable groups weights across replicas "
                        f"({', '.join(sorted(data))}), which only PopTorch's executor runs")
        return NO_GROUPS

    def _takes_signature(self) -> bool:
        """Whether the model binds calls with the signature the file recorded
        (PopTorch's `poptorch.load` model, which has no forward of its own)."""
        return False
