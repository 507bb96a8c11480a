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
compiled program; what an executor puts into the parts and takes from them
is the executor's own (api/executable.py). The executable cache (`Options.enableExecutableCaching`,
`POPTORCH_CACHE_DIR`) stores the same files under a key that covers the
tilefx version, the options, the optimizer, the inputs' shapes and dtypes,
the model's parameters and buffers and the source of every module class in
it (what the traced IR is made from); a hit skips tracing and the passes.
"""

from __future__ import annotations

import io
import json
import logging
import os
import zipfile

import numpy as np
import torch

from tilefx import limits
from tilefx.api.archive import ZIP_ERRORS, sha256, tilefx_version, write_atomically
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
from tilefx.dialects.const_value import attach_values
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

def pack(parts: dict[str, bytes]) -> bytes:
    """The executable file of an executor's parts (PARTS: api/executable.py
    makes them), as bytes: the parts and their manifest, zipped."""
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "tilefx_version": tilefx_version(),
                "parts": {n: {"sha256": sha256(b), "size": len(b)} for n, b in parts.items()}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=1))
        for n, b in parts.items():
            z.writestr(n, b)
    return buf.getvalue()


# the file a directory given as the executable's path holds
DIRECTORY_FILE = "model.poptorch"


def write(parts: dict[str, bytes], filename: str) -> str:
    """Write the executable of `parts` to `filename` (a directory, or a path
    ending in a separator, gets `model.poptorch` inside, as PopTorch's
    compileAndExport(dir) writes one file there); returns the file's path."""
    data = pack(parts)
    if os.path.isdir(filename) or filename.endswith(("/", os.sep)):
        filename = os.path.join(filename, DIRECTORY_FILE)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(filename)), exist_ok=True)
        write_atomically(filename, data)
    except OSError as e:
        raise Error(f"cannot write the executable to {filename}: {e.strerror or e}") from None
    return filename


# -- reading -----------------------------------------------------------------------

_MANIFEST_KEYS = {"format", "format_version", "tilefx_version", "parts"}

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
    if manifest.get("tilefx_version") != tilefx_version():
        raise Error(f"{filename}: exported by tilefx {str(manifest.get('tilefx_version'))[:40]}, this is tilefx "
                    f"{tilefx_version()}: the versions must match exactly")
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
                if sha256(data) != want["sha256"]:
                    raise Error(f"{filename}: part {n} is corrupted: its SHA-256 differs from the manifest's")
                parts[n] = data
    except Error:
        raise
    except ZIP_ERRORS as e:
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


def parse_ir(text: bytes, filename: str, part: str):
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


class IRText(str):
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
                module = parse_ir(self[:].encode(), "<executable>", "import.mlir")
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


def check_export_args(what: str, filename, **flags) -> None:
    if not isinstance(filename, (str, os.PathLike)) or not str(filename):
        raise Error(f"{what}: filename must be a non-empty string, got {filename!r}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise Error(f"{what}: {name} must be a bool, got {value!r}")
