"""The executable file (PopTorch user guide, 4.10 "Precompilation and
caching"; PopART's `compileAndExport` / `loadExecutable`) in a format that
never runs code: what any surface writes its compiled program in and reads
it back from. Imports no torch.

An executable file is a zip archive of plain parts:

    manifest.json        format, tilefx version, SHA-256 and size of every other part
    graph.mlir           the compiled graph IR (@main, @update) as text
    import.mlir          the traced IR (what `ir("import")` shows)
                         (both without the constants' `tilefx.value`s: the values
                         are in weights.safetensors, put back when loading)
    executor.json        what binds the IR to a model: parameter and buffer names,
                         inputs, outputs' structure, training or inference, step
                         (driver/executable_schema.py)
    options.json         the surface's options (PopTorch's Options, enums and
                         dtypes by name: api/export.py)
    weights.safetensors  parameters, buffers, lifted constants and forward's tensor
                         defaults (safetensors)
    optimizer.safetensors the optimizer state

Reading parses and verifies: the manifest's format and version, every part's
size and hash, the JSON parts against their schema, then (`parse_ir`) the IR
with the xDSL parser; the tensors are safetensors (driver/archive.py).
Nothing is unpickled or evaluated; a truncated or tampered file is a
`tilefx.Error` that says which part is wrong.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

from tilefx import limits
from tilefx.dialects.const_value import attach_values
from tilefx.driver.archive import ZIP_ERRORS, sha256, tilefx_version, write_atomically
from tilefx.driver.executable_schema import SCHEMA_VERSION, check_executor, input_bytes
from tilefx.errors import Error

FORMAT = "tilefx-executable"
FORMAT_VERSION = SCHEMA_VERSION  # the file format is its schema's (driver/executable_schema.py)
PARTS = ("graph.mlir", "import.mlir", "executor.json", "options.json", "weights.safetensors",
         "optimizer.safetensors")
MANIFEST = "manifest.json"
JSON_PARTS = ("executor.json", "options.json")


# -- writing -----------------------------------------------------------------------

def pack(parts: dict[str, bytes]) -> bytes:
    """The executable file of an executor's parts (PARTS: a surface's
    executor makes them), as bytes: the parts and their manifest, zipped."""
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
    anything is read, executor.json's fields against the schema after (the
    options are the surface's to check)."""
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
