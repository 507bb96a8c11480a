"""Precompilation and executable caching in a format that never runs code
(PopTorch user guide, 4.10 "Precompilation and caching").

An executable file is a zip archive of plain parts:

    manifest.json        format, tilefx version, SHA-256 and size of every other part
    graph.mlir           the compiled graph IR (@main, @update) as text
    import.mlir          the traced IR (what `ir("import")` shows)
                         (both without the constants' `tilefx.value`s: the values
                         are in weights.safetensors, put back when loading)
    executor.json        what binds the IR to a model: parameter and buffer names,
                         inputs, outputs' structure, training or inference, step
    options.json         the Options (enums and dtypes by name)
    weights.safetensors  parameters, buffers, lifted constants and forward's tensor
                         defaults (safetensors)
    optimizer.safetensors the optimizer state

Loading parses and verifies: the manifest's format and version, every part's
size and hash, then the IR with the xDSL parser and the tensors with
safetensors. Nothing is unpickled or evaluated; a truncated or tampered
file is a `tilefx.Error` that says which part is wrong.

`compileAndExport` writes a file, `poptorch.load` makes an executor from
one (the model becomes a plain module holding the exported weights; its
Python code is not exported), `loadExecutable` gives an existing wrapper the
compiled program. The executable cache (`Options.enableExecutableCaching`,
`POPTORCH_CACHE_DIR`) stores the same files under a key that covers the
tilefx version, the options, the optimizer, the inputs' shapes and dtypes,
the model's parameters and buffers and the source of every module class in
it (what the traced IR is made from); a hit skips tracing and the passes.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import logging
import os
import struct
import tempfile
import time
import zipfile
import zlib

import numpy as np
import torch

from tilefx import limits
from tilefx.api.executable_schema import (
    HOST_OPTIONS,
    SCHEMA_VERSION,
    SKIP,
    check_executor,
    check_popart_options,
    encode,
    input_bytes,
    option_value,
)
from tilefx.dialects.const_value import attach_values, text_without_values
from tilefx.errors import Error

log = logging.getLogger("tilefx.export")

FORMAT = "tilefx-executable"
FORMAT_VERSION = SCHEMA_VERSION  # the file format is its schema's (api/executable_schema.py)
PARTS = ("graph.mlir", "import.mlir", "executor.json", "options.json", "weights.safetensors",
         "optimizer.safetensors")
MANIFEST = "manifest.json"
# the key prefix of forward's tensor defaults in weights.safetensors (inputs
# of the recorded call when a loaded executor's call leaves them out)
DEFAULT_PREFIX = "default/"
JSON_PARTS = ("executor.json", "options.json")


def _version() -> str:
    import tilefx

    return tilefx.__version__


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- options as JSON -------------------------------------------------------------

_GROUPS = ("Precision", "Training", "Jit", "Distributed")


def option_items(group) -> dict:
    return {k: v for k, v in group.__dict__.items() if not k.startswith("_")}


def options_to_json(opts) -> dict:
    """The compile-time options as JSON (the host's settings, HOST_OPTIONS,
    stay on the host)."""
    out = {k: encode(v) for k, v in option_items(opts).items() if k not in HOST_OPTIONS}
    for g in _GROUPS:
        out[g] = {k: encode(v) for k, v in option_items(getattr(opts, g)).items()}
    out["_Popart"] = encode(dict(opts._Popart.options))
    return out


def options_from_json(data: dict):
    """A new Options with the stored values: only options a fresh Options has,
    each of its declared kind and within the bounds its setter enforces
    (objects compiled into the IR, such as the execution strategy, are not
    restored); a host setting (a path on this machine) in the file is an
    error, never applied."""
    from tilefx.api.options import Options

    opts = Options()

    def assign(target, values, where: str):
        if not isinstance(values, dict):
            raise Error(f"options.json: {where or 'the options'} must be an object")
        fresh = option_items(target)
        for k, raw in values.items():
            if k in _GROUPS or k == "_Popart":
                continue
            if k in HOST_OPTIONS:
                raise Error(f"options.json: {where}{k} is a setting of the loading host (a path or how it "
                            "reports), which is never taken from a file")
            if k not in fresh:
                raise Error(f"options.json: unknown option {where}{k}")
            v = option_value(k, raw, fresh[k], where)
            if v is SKIP:
                continue
            object.__setattr__(target, k, v)

    assign(opts, data, "")
    for g in _GROUPS:
        assign(getattr(opts, g), data.get(g, {}), g + ".")
    if opts.Distributed.process_id >= opts.Distributed.num_processes:
        raise Error("options.json: Distributed.process_id must be smaller than Distributed.num_processes")
    opts._Popart.options.update(check_popart_options(data.get("_Popart", {})))
    return opts


# -- writing -----------------------------------------------------------------------

def _input_torch_dtypes(ex) -> list[torch.dtype]:
    """The torch dtypes of the program's inputs: those it was compiled for,
    or those the file it was loaded from recorded (none for older files)."""
    if ex._call is not None:
        return [d for _, d in ex._compiled_inputs]
    return ex.__dict__.get("_loaded_input_dtypes") or []


def _tensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    from safetensors.numpy import save

    return save({k: np.ascontiguousarray(v) for k, v in tensors.items()})


def tensors_from(data: bytes, part: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        return load(data)
    except Exception as e:  # safetensors reports its own format errors
        raise Error(f"{part} is not a valid safetensors file: {e}") from None


def pack(ex) -> bytes:
    """The executable file of a compiled executor, as bytes."""
    p = ex._program
    t = p.traced
    spec = None
    if t.out_spec is not None:
        spec = torch.utils._pytree.treespec_dumps(t.out_spec)
    meta = {
        "training": ex._training, "params": t.params, "buffers": t.buffers,
        "num_inputs": t.num_inputs, "num_outputs": t.num_outputs, "loss_index": t.loss_index,
        "anchor_outputs": t.anchor_outputs,
        "consts": sorted(t.consts), "out_spec": spec,
        "input_shapes": [list(s) for s in p.input_shapes],
        "input_dtypes": [str(np.dtype(d)) for d in p.input_dtypes],
        # torch's names, which tell bfloat16 (numpy's float32 above) apart
        "input_torch_dtypes": [str(d).removeprefix("torch.") for d in _input_torch_dtypes(ex)],
        "step": int(ex._step), "model": type(ex.model).__name__,
        "exported_model": bool(getattr(ex, "_export_model", True)),
    }
    if ex._call is not None:  # how the call bound its arguments, for poptorch.load's executor
        from tilefx.lowering.call_spec import call_to_json

        call = call_to_json(ex._call, ex.model.forward)
        if call is not None:
            meta["call"] = call
    if getattr(ex, "_export_rng", False):  # save(save_rng_state=True): plain ints, as numpy gives them
        meta["rng_states"] = [g.bit_generator.state for g in ex._replica_rngs]
    params, buffers = ex._host_weights()
    groups = ex._groups
    if groups.grouped:  # replica-grouped weights: their grouping, and their values as the host holds them
        from tilefx.api.replica_grouping import grouping_to_json

        meta["replica_grouping"] = grouping_to_json(groups)
        if not ex.options.offline_ipu_target:  # (offline: read from the model, already the host's layout)
            params = {n: groups.to_host(n, v) if n in groups.names else v for n, v in params.items()}
    weights = {f"param/{n}": v for n, v in params.items()}
    weights.update({f"buffer/{n}": np.asarray(v) for n, v in buffers.items()})
    weights.update({f"const/{n}": v for n, v in t.consts.items()})
    if "call" in meta:  # forward's tensor defaults, which a loaded call binds as inputs
        from tilefx.lowering.call_spec import tensor_defaults

        weights.update({f"{DEFAULT_PREFIX}{n}": v.detach().cpu().float().numpy()
                        if v.dtype == torch.bfloat16 else v.detach().cpu().numpy()
                        for n, v in tensor_defaults(ex.model.forward).items()})
    parts = {
        # the constants' values are in weights.safetensors: the IR texts go without them
        "graph.mlir": text_without_values(p.module).encode(),
        "import.mlir": text_without_values(p.import_module).encode(),
        "executor.json": json.dumps(meta, indent=1).encode(),
        "options.json": json.dumps(options_to_json(ex.options), indent=1).encode(),
        "weights.safetensors": _tensors_bytes(weights),
        "optimizer.safetensors": _tensors_bytes(dict(ex._opt_state)),
    }
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "tilefx_version": _version(),
                "parts": {n: {"sha256": _sha(b), "size": len(b)} for n, b in parts.items()}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=1))
        for n, b in parts.items():
            z.writestr(n, b)
    return buf.getvalue()


# the file a directory given as the executable's path holds
DIRECTORY_FILE = "model.poptorch"


def write(ex, filename: str) -> str:
    """Write the executable to `filename` (a directory, or a path ending in a
    separator, gets `model.poptorch` inside, as PopTorch's
    compileAndExport(dir) writes one file there); returns the file's path."""
    data = pack(ex)
    if os.path.isdir(filename) or filename.endswith(("/", os.sep)):
        filename = os.path.join(filename, DIRECTORY_FILE)
    directory = os.path.dirname(os.path.abspath(filename))
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before its name is
        os.replace(tmp, filename)  # readers never see a half-written file
        tmp = None
        _fsync_directory(directory)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise Error(f"cannot write the executable to {filename}: {e.strerror or e}") from None
    return filename


def _fsync_directory(directory: str) -> None:
    """The rename itself on disk (POSIX: a directory's entries are synced
    through the directory); not every file system can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- reading -----------------------------------------------------------------------

_MANIFEST_KEYS = {"format", "format_version", "tilefx_version", "parts"}
# the errors zipfile and its decompressors raise for a malformed archive
# (an encrypted entry is a RuntimeError, an unknown compression method a
# NotImplementedError)
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError, NotImplementedError,
               RuntimeError, zlib.error, struct.error, OverflowError)


def _check_sizes(z: zipfile.ZipFile, filename: str) -> dict[str, zipfile.ZipInfo]:
    """The archive's entries, checked before any is read: only the known
    parts, each once, the JSON ones small, the whole within the
    executable caps (limits.py) and not a compression bomb."""
    infos: dict[str, zipfile.ZipInfo] = {}
    for info in z.infolist():
        if info.filename in infos:
            raise Error(f"{filename}: the part {info.filename} appears twice")
        infos[info.filename] = info
    if MANIFEST not in infos:
        raise Error(f"{filename}: not a tilefx executable (no {MANIFEST})")
    extra = set(infos) - set(PARTS) - {MANIFEST}
    if extra:
        raise Error(f"{filename}: unexpected parts {sorted(extra)[:5]}")
    for n in PARTS:
        if n not in infos:
            raise Error(f"{filename}: part {n} is missing")
    for n in (MANIFEST, *JSON_PARTS):
        limits.EXECUTABLE_JSON_BYTES.check(infos[n].file_size, f"{filename}: {n}")
    total = sum(i.file_size for i in infos.values())
    limits.EXECUTABLE_BYTES.check(total, filename)
    on_disk = max(os.path.getsize(filename), 1)
    if total > limits.RATIO_FREE_BYTES:
        limits.EXECUTABLE_RATIO.check(total // on_disk, filename)
    return infos


def _check_manifest(manifest: dict, filename: str) -> dict:
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise Error(f"{filename}: not a tilefx executable of format version {FORMAT_VERSION} "
                    f"(format {str(manifest.get('format'))[:40]!r} version "
                    f"{str(manifest.get('format_version'))[:40]!r})")
    if manifest.get("tilefx_version") != _version():
        raise Error(f"{filename}: exported by tilefx {str(manifest.get('tilefx_version'))[:40]}, this is tilefx "
                    f"{_version()}: the versions must match exactly")
    if set(manifest) != _MANIFEST_KEYS:
        raise Error(f"{filename}: the manifest must hold exactly {', '.join(sorted(_MANIFEST_KEYS))}")
    listed = manifest["parts"]
    if not isinstance(listed, dict) or set(listed) != set(PARTS):
        raise Error(f"{filename}: the manifest must list the parts {', '.join(PARTS)}")
    for n, want in listed.items():
        if not isinstance(want, dict) or set(want) != {"sha256", "size"} or \
                not isinstance(want["sha256"], str) or len(want["sha256"]) != 64 or \
                isinstance(want["size"], bool) or not isinstance(want["size"], int):
            raise Error(f"{filename}: the manifest's entry of {n} must be {{\"sha256\": hex, \"size\": int}}")
    return listed


def read(filename: str) -> dict:
    """The verified parts of an executable file: bytes by name, plus the
    parsed manifest, executor and options JSON. Sizes are checked before
    anything is read, each field against the schema after."""
    if not isinstance(filename, (str, os.PathLike)):
        raise Error(f"expected a file name, got {type(filename).__name__}")
    filename = os.fspath(filename)
    if os.path.isdir(filename) and os.path.isfile(os.path.join(filename, DIRECTORY_FILE)):
        filename = os.path.join(filename, DIRECTORY_FILE)  # the directory write() wrote into
    if not os.path.isfile(filename):
        raise Error(f"{filename}: no such executable file")
    try:
        with zipfile.ZipFile(filename) as z:
            infos = _check_sizes(z, filename)
            manifest = _json(z.read(MANIFEST), filename, MANIFEST)
            listed = _check_manifest(manifest, filename)
            parts = {}
            for n in PARTS:
                size, want = infos[n].file_size, listed[n]
                if size != want["size"]:
                    raise Error(f"{filename}: part {n} has {size} bytes, the manifest says {want['size']}")
                data = z.read(n)
                if _sha(data) != want["sha256"]:
                    raise Error(f"{filename}: part {n} is corrupted: its SHA-256 differs from the manifest's")
                parts[n] = data
    except Error:
        raise
    except _ZIP_ERRORS as e:
        raise Error(f"{filename}: not a tilefx executable, or truncated ({type(e).__name__}: {e})") from None
    for n in ("graph.mlir", "import.mlir"):
        try:
            parts[n].decode()
        except UnicodeDecodeError as e:
            raise Error(f"{filename}: {n} is not UTF-8 text ({e})") from None
    parts["manifest"] = manifest
    parts["executor"] = check_executor(_json(parts["executor.json"], filename, "executor.json"), filename)
    limits.TENSOR_BYTES.check(input_bytes(parts["executor"]), f"{filename}: the recorded inputs")
    parts["options"] = _json(parts["options.json"], filename, "options.json")
    return parts


def _json(data: bytes, filename: str, part: str):
    value = limits.load_json(data, f"{filename}: {part}")
    if not isinstance(value, dict):
        raise Error(f"{filename}: {part} must hold a JSON object")
    return value


def _parse_ir(text: bytes, filename: str, part: str):
    from xdsl.parser import Parser

    from tilefx.passes.pipelines import graph_context

    from tilefx.dialects.source import check_constant_bytes

    check_constant_bytes(text.decode(), f"{filename}:{part}")  # (read() checked it is UTF-8)
    try:
        module = Parser(graph_context(), text.decode(), f"{filename}:{part}").parse_module()
        module.verify()
    except Exception as e:
        raise Error(f"{filename}: {part} is not valid tilefx IR: {e}") from None
    return module


def install(ex, parts: dict, filename: str, weights_from_file: bool) -> None:
    """Make the file's program `ex`'s program (no tracing, no passes)."""
    from tilefx.lowering.from_torch import TracedGraph

    start = time.perf_counter()
    meta = parts["executor"]
    if bool(meta.get("training")) != ex._training:
        kind = "a training" if meta.get("training") else "an inference"
        raise Error(f"{filename}: holds {kind} executable; wrap the model with the matching "
                    f"{'trainingModel' if meta.get('training') else 'inferenceModel'}")
    module = _parse_ir(parts["graph.mlir"], filename, "graph.mlir")
    tensors = tensors_from(parts["weights.safetensors"], "weights.safetensors")
    state = tensors_from(parts["optimizer.safetensors"], "optimizer.safetensors")
    consts = {n: tensors[f"const/{n}"] for n in meta.get("consts", []) if f"const/{n}" in tensors}
    attach_values(module, consts)  # the IR carries its constants, as a compiled one does
    import_module = _IRText(parts["import.mlir"].decode(), consts)  # shown by ir("import"), never run
    traced = TracedGraph(import_module, list(meta["params"]), list(meta["buffers"]), int(meta["num_inputs"]),
                         int(meta["num_outputs"]), meta.get("loss_index"), consts,
                         out_spec=_out_spec(meta.get("out_spec"), filename),
                         anchor_outputs=int(meta.get("anchor_outputs", 0)))
    named_p = dict(ex.model.named_parameters(remove_duplicate=False))
    named_b = dict(ex.model.named_buffers(remove_duplicate=False))
    from tilefx.api.replica_grouping import ReplicaGroups, restore_grouping

    # (first: a weight grouped another way also has another shape on the host)
    restore_grouping(meta.get("replica_grouping"), named_p, filename, ex.options.replication_factor)
    ex._groups = ReplicaGroups.of(ex.model, ex.options.replication_factor)
    for kind, names, have, prefix in (("parameter", traced.params, named_p, "param/"),
                                      ("buffer", traced.buffers, named_b, "buffer/")):
        for n in names:
            if n not in have:
                raise Error(f"{filename}: the executable needs the {kind} {n!r}, which the model does not "
                            "have: it was exported from a different model")
            saved, own = tensors.get(prefix + n), have[n]
            shape = tuple(own.shape) or (1,)  # (the file keeps a 0-d tensor as one element)
            if saved is not None and (tuple(saved.shape) not in (tuple(own.shape), shape)
                                      or saved.dtype != _np_dtype(own)):
                raise Error(f"{filename}: the executable's {kind} {n!r} is {tuple(saved.shape)} {saved.dtype}, "
                            f"the model's {tuple(own.shape)} {_np_dtype(own)}: it was exported from a "
                            "different model")
    if weights_from_file:
        with torch.no_grad():
            for n in traced.params:
                named_p[n].copy_(torch.from_numpy(tensors[f"param/{n}"]))
            for n in traced.buffers:
                named_b[n].copy_(torch.from_numpy(tensors[f"buffer/{n}"]))
    ex._install(traced, import_module, module, [tuple(s) for s in meta["input_shapes"]],
                [np.dtype(d) for d in meta["input_dtypes"]], start)
    ex._loaded_input_dtypes = _torch_dtypes(meta.get("input_torch_dtypes"), len(ex._program.input_shapes),
                                            filename)
    if meta.get("call") is not None:
        _bind_recorded_call(ex, meta["call"], filename,
                            {n[len(DEFAULT_PREFIX):]: v for n, v in tensors.items() if n.startswith(DEFAULT_PREFIX)})
    if weights_from_file:
        for n, v in state.items():
            if n in ex._opt_state:
                ex._opt_state[n] = v.astype(ex._opt_state[n].dtype, copy=True)
        ex._step = int(meta.get("step", 0))


def _out_spec(spec: str | None, filename: str):
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


def _np_dtype(t: torch.Tensor) -> np.dtype:
    """The dtype a tensor is saved in (bfloat16 as float32, which numpy lacks)."""
    return np.dtype(np.float32) if t.dtype == torch.bfloat16 else torch.empty(0, dtype=t.dtype).numpy().dtype


def _torch_dtypes(names, count: int, filename: str) -> list[torch.dtype] | None:
    """The inputs' torch dtypes an executable file recorded (None for files
    that record none)."""
    if not names:
        return None
    dtypes = [getattr(torch, n, None) if isinstance(n, str) else None for n in names]
    if len(dtypes) != count or not all(isinstance(d, torch.dtype) for d in dtypes):
        raise Error(f"{filename}: input_torch_dtypes must name one torch dtype per input ({count})")
    return dtypes


def _bind_recorded_call(ex, data, filename: str, defaults: dict[str, np.ndarray]) -> None:
    """The call the file recorded becomes the one later calls must match, as
    for an executor that compiled it: a loaded model (which has no Python
    code) takes the original forward's signature, so keywords, nested inputs
    and defaults bind as they did; a model given `loadExecutable` (or a cache
    hit) binds with its own forward and must make the same structure."""
    from tilefx.lowering.call_spec import call_from_json

    call, sig = call_from_json(data, filename, defaults)
    if isinstance(ex.model, LoadedModel) and sig is not None:
        ex.model.take_signature(sig)
    if call.num_tensors != len(ex._program.input_shapes):
        raise Error(f"{filename}: the recorded call has {call.num_tensors} tensor(s), the program "
                    f"{len(ex._program.input_shapes)} input(s)")
    ex._recorded_call = call


def restore_rng(ex, meta: dict, filename: str) -> None:
    """Continue the random streams a `save(save_rng_state=True)` file recorded
    (one per replica), into the generator objects the program already holds."""
    states = meta.get("rng_states")
    if states is None:
        return
    if not isinstance(states, list) or len(states) != len(ex._replica_rngs):
        raise Error(f"{filename}: rng_states must list one generator state per replica "
                    f"({len(ex._replica_rngs)})")
    for g, st in zip(ex._replica_rngs, states):
        try:
            g.bit_generator.state = st
        except (TypeError, ValueError, KeyError) as e:
            raise Error(f"{filename}: rng_states is not a valid generator state: {e}") from None


class _IRText(str):
    """The traced IR of a loaded executable: only ever printed (`ir("import")`),
    so it is kept as the verified text instead of being parsed again. The file
    stores it without the constants' values; `str()` puts them back (parsing
    the text once, when it is first shown)."""

    def __new__(cls, text: str, consts: dict | None = None):
        self = super().__new__(cls, text)
        self._consts, self._shown = consts or {}, None
        return self

    def __str__(self) -> str:
        if self._shown is None:
            if self._consts:
                module = _parse_ir(self[:].encode(), "<executable>", "import.mlir")
                attach_values(module, self._consts)
                self._shown = str(module)
            else:
                self._shown = self[:]
        return self._shown

    def clone(self):
        return self


class LoadedModel(torch.nn.Module):
    """The model of an executor made by `poptorch.load`: the exported
    parameters and buffers under their names (the Python code of the
    original model is not in the file, so it cannot run on the CPU)."""

    def __init__(self, name: str, params: dict[str, np.ndarray], buffers: dict[str, np.ndarray]):
        super().__init__()
        self.exported_name = name
        for names, make in ((params, lambda v: torch.nn.Parameter(torch.from_numpy(v.copy()))),
                            (buffers, lambda v: torch.from_numpy(v.copy()))):
            for qual, value in names.items():
                *path, leaf = qual.split(".")
                mod = self
                for part in path:
                    if not hasattr(mod, part):
                        mod.add_module(part, torch.nn.Module())
                    mod = getattr(mod, part)
                if isinstance(make(value), torch.nn.Parameter):
                    mod.register_parameter(leaf, make(value))
                else:
                    mod.register_buffer(leaf, make(value))

    def forward(self, *args):
        raise Error(f"this {self.exported_name} was loaded from an executable file: run it through the "
                    "executor poptorch.load returned")

    def take_signature(self, sig) -> None:
        """Bind calls with the exported model's forward signature (a function
        of this instance: `call_spec.bind_call` reads its `__signature__`)."""
        def forward(*args, **kwargs):
            return LoadedModel.forward(self)

        forward.__signature__ = sig
        self.forward = forward


def load_executable(ex, filename: str) -> None:
    """`PoplarExecutor.loadExecutable(filename)`: the wrapped model keeps its own
    weights; the program (and the optimizer state) come from the file."""
    parts = read(filename)
    install(ex, parts, filename, weights_from_file=False)
    state = tensors_from(parts["optimizer.safetensors"], "optimizer.safetensors")
    for n, v in state.items():
        if n in ex._opt_state:
            ex._opt_state[n] = v.astype(ex._opt_state[n].dtype, copy=True)
    ex._step = int(parts["executor"].get("step", 0))
    if ex.options.random_seed == options_from_json(parts["options"]).random_seed:
        restore_rng(ex, parts["executor"], filename)


def _check_export_args(what: str, filename, **flags) -> None:
    if not isinstance(filename, (str, os.PathLike)) or not str(filename):
        raise Error(f"{what}: filename must be a non-empty string, got {filename!r}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise Error(f"{what}: {name} must be a bool, got {value!r}")


def _write_compiled(ex, what: str, filename, export_model: bool, rng: bool) -> None:
    if ex._program.traced.cache_states is not None:
        raise Error(f"{what}: the call passes or the model returns transformers caches (a "
                    "`past_key_values` / `cache` object), whose Python objects the executable file does not "
                    "keep: pass use_cache=False (and no cache) to export the model")
    ex._export_model, ex._export_rng = export_model, rng
    try:
        write(ex, str(filename))
    finally:
        ex._export_rng = False  # only this file: the executable cache never records a stream


def compile_and_export(ex, filename: str, args, kwargs, export_model: bool = True) -> None:
    """`PoplarExecutor.compileAndExport(filename, *args, export_model=True)`."""
    _check_export_args("compileAndExport", filename, export_model=export_model)
    if ex._program is None:
        ex.compile(*args, **kwargs)
    _write_compiled(ex, "compileAndExport", filename, export_model, rng=False)


def save(ex, filename: str, export_model: bool = True, save_rng_state: bool = True) -> None:
    """`PoplarExecutor.save(filename, export_model=True, save_rng_state=True)`:
    a model already compiled (by a call or compile()), written as it is now."""
    _check_export_args("save", filename, export_model=export_model, save_rng_state=save_rng_state)
    if ex._program is None:
        raise Error("save: the model has not been compiled yet: call it or compile() it first "
                    "(compileAndExport compiles and saves in one step)")
    _write_compiled(ex, "save", filename, export_model, rng=save_rng_state)


# -- the executable cache's key (the cache itself: api/executable_cache.py) ---------

def cache_key(ex, inputs) -> str:
    """Everything the compiled program depends on, hashed."""
    h = hashlib.sha256()

    def feed(*items):
        for it in items:
            h.update(str(it).encode())
            h.update(b"\0")

    feed(FORMAT, FORMAT_VERSION, _version(), ex._training)
    feed(json.dumps(options_to_json(ex.options), sort_keys=True))
    if ex._training and ex._optimizer is not None:
        from tilefx.api.optim import optimizer_config

        feed(json.dumps(optimizer_config(ex._optimizer, ex._param_names())[0], sort_keys=True, default=str))
    for x in inputs:
        feed(tuple(x.shape), x.dtype)
    m = ex.model
    if m.training == ex._training:  # traced with its submodules' own modes (executor._compile_in_session)
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
