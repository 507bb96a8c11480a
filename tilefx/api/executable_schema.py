"""What an executable file (and an executable cache entry) may contain: the
schema of its JSON parts, checked field by field before any of it is used
(docs/security.md).

An executable is data from someone else, not configuration: its options
are the compile-time ones its program was made with, each of a declared
type and within the bounds the option's setter enforces; settings of the
loading host (where logs, profiles and caches go: anything naming a path
on this machine) are never written to a file and a file that holds one is
refused. Every field of `executor.json` has a type and bounds, and a field
the schema does not know is an error, as is a schema version other than
this one's.
"""

from __future__ import annotations

import enum
import math
import numbers

import numpy as np
import torch

from tilefx.api import enums
from tilefx.api.option_groups import check_ipus, check_repeats
from tilefx.errors import Error

# the version of what the JSON parts may hold (manifest.json's "schema")
SCHEMA_VERSION = 2

# the host's settings: where this machine writes (logs, profiles, the
# cache) and how it reports. Never stored, never read from a file; the
# loading user sets them (poptorch.load's edit_opts_fn, or the wrapper's
# options).
HOST_OPTIONS = frozenset({"log_dir", "profile_dir", "executable_cache_dir", "max_repeat_logs",
                          "show_compilation_progress_bar"})

# the longest string field of a file (names of tensors, models, machines)
MAX_NAME_CHARS = 4096
# the most entries of a list or dict field (parameters, inputs, anchors, ...)
MAX_ENTRIES = 1 << 20
# the most dimensions of a recorded input shape (PyTorch's own limit is 64)
MAX_RANK = 64

# the numpy dtypes an executable's inputs may have (no objects, no records)
INPUT_DTYPES = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                          "uint16", "uint32", "uint64", "bool", "complex64", "complex128"})


def _fail(where: str, what: str):
    raise Error(f"{where}: {what}")


# -- option values -------------------------------------------------------------

def encode(v):
    """An option value as JSON: enums and dtypes by name; objects (a strategy,
    a policy) compiled into the IR as their repr, which loading skips."""
    if isinstance(v, enum.Enum):
        return {"__enum__": type(v).__name__, "name": v.name}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.dtype):
        return {"__dtype__": str(v).removeprefix("torch.")}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        return {k: encode(x) for k, x in v.items()}
    return {"__repr__": repr(v)}


SKIP = object()  # a value compiled into the IR (its repr was stored): the fresh default stays


def _decode(v, where: str, depth: int = 0):
    if depth > 32:
        _fail(where, "nested too deeply")
    if isinstance(v, list):
        if len(v) > MAX_ENTRIES:
            _fail(where, f"more than {MAX_ENTRIES} entries")
        return [_decode(x, where, depth + 1) for x in v]
    if isinstance(v, str) and len(v) > MAX_NAME_CHARS:
        _fail(where, f"a string longer than {MAX_NAME_CHARS} characters")
    if not isinstance(v, dict):
        return v
    if "__enum__" in v:
        if set(v) != {"__enum__", "name"} or not isinstance(v["__enum__"], str) or not isinstance(v["name"], str):
            _fail(where, "an enum is {\"__enum__\": class, \"name\": member}")
        cls = enums.ENUM_TYPES.get(v["__enum__"])
        if cls is None or v["name"] not in cls.__members__:
            _fail(where, f"unknown enum value {v['__enum__']}.{v['name']}")
        return cls[v["name"]]
    if "__dtype__" in v:
        dt = getattr(torch, v["__dtype__"], None) if isinstance(v["__dtype__"], str) else None
        if set(v) != {"__dtype__"} or not isinstance(dt, torch.dtype):
            _fail(where, f"unknown dtype {v.get('__dtype__')!r}")
        return dt
    if "__repr__" in v:
        if set(v) != {"__repr__"} or not isinstance(v["__repr__"], str):
            _fail(where, "an object compiled into the IR is {\"__repr__\": text}")
        return SKIP
    if len(v) > MAX_ENTRIES:
        _fail(where, f"more than {MAX_ENTRIES} entries")
    return {k: _decode(x, f"{where}.{k}", depth + 1) for k, x in v.items()}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# options whose default is None: the kinds their values may have
_OPTIONAL_KINDS = {
    "random_seed": int, "use_ipu_model": bool, "ipu_id": int, "ipu_version": int, "model_name": str,
    "execution_strategy": object, "autocast_policy": object, "mean_reduction_strategy": enums.MeanReductionStrategy,
}


def _bounded(key: str, v, where: str):
    """The bounds the options' setters enforce, for the values a file gives."""
    from tilefx.api.option_groups import _check_int

    if key in ("replication_factor", "input_group_size", "num_processes"):
        return check_ipus(f"{where}{key}", v)
    if key in ("device_iterations", "gradient_accumulation", "output_return_period"):
        return check_repeats(f"{where}{key}", v)
    if key == "random_seed" and v is not None:
        return _check_int(f"{where}{key}", v, 0, 2**64 - 1)
    if key in ("ipu_id", "ipu_version", "process_id") and v is not None:
        return _check_int(f"{where}{key}", v, 0, 2**31 - 1)
    if key == "timeout_seconds" and not (math.isfinite(v) and v > 0):
        _fail(f"{where}{key}", f"must be a positive finite number of seconds, got {v!r}")
    if key == "available_memory_proportion":
        if not all(isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool)
                   and 0 < x <= 1 for k, x in v.items()):
            _fail(f"{where}{key}", "must map IPU names to proportions in (0, 1]")
    if key == "machine" and isinstance(v, str):
        from tilefx.backend.machine import PRESETS

        if v not in PRESETS:
            _fail(f"{where}{key}", f"unknown machine {v!r} (known: {', '.join(sorted(PRESETS))})")
    if key == "updatable_named_buffers" and not all(isinstance(x, str) for x in v):
        _fail(f"{where}{key}", "must list buffer names")
    return v


def option_value(key: str, raw, default, where: str):
    """The value of option `key` a file holds, of its declared kind and
    within its bounds (SKIP for objects compiled into the IR)."""
    name = f"options.json: {where}{key}"
    v = _decode(raw, name)
    if v is SKIP:
        return SKIP
    kind = _OPTIONAL_KINDS.get(key) if default is None else type(default)
    if default is None and v is None:
        return None
    if kind is None:
        _fail(name, "has no declared type (this option is not stored in executables)")
    if kind is object:  # an object compiled into the IR is stored as its repr only
        _fail(name, "must be an object's {\"__repr__\": text} or null")
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if _is_int(v) and not isinstance(v, enum.Enum):
            try:
                v = kind(v)
            except ValueError:
                _fail(name, f"{v} is not a {kind.__name__}")
        if not isinstance(v, kind):
            _fail(name, f"must be a {kind.__name__}, got {v!r}")
    elif kind is bool:
        if not isinstance(v, bool):
            _fail(name, f"must be a bool, got {v!r}")
    elif kind is int:
        if not _is_int(v):
            _fail(name, f"must be an int, got {v!r}")
    elif kind is float:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            _fail(name, f"must be a number, got {v!r}")
        v = float(v)
    elif kind is str:
        if not isinstance(v, str):
            _fail(name, f"must be a string, got {v!r}")
    elif kind in (list, tuple):
        if not isinstance(v, list):
            _fail(name, f"must be a list, got {type(v).__name__}")
        v = kind(v)
    elif kind is dict:
        if not isinstance(v, dict):
            _fail(name, f"must be an object, got {type(v).__name__}")
    elif isinstance(default, torch.dtype):
        if not isinstance(v, torch.dtype):
            _fail(name, f"must be a torch dtype, got {v!r}")
    else:
        _fail(name, f"holds a {kind.__name__}, which executables do not store")
    try:
        return _bounded(key, v, where)
    except Error as e:
        raise Error(f"options.json: {e.message}") from None


def check_popart_options(raw) -> dict:
    """The PopART session options of a file: a flat object of names to
    plain values (strings, numbers, bools, and lists and objects of them)."""
    v = _decode(raw, "options.json: _Popart")
    if not isinstance(v, dict):
        _fail("options.json: _Popart", "must be an object")
    for k, x in v.items():
        if k in HOST_OPTIONS or "dir" in k.lower() or "path" in k.lower() or "file" in k.lower():
            _fail(f"options.json: _Popart.{k}", "names a path on the host, which is never taken from a file")
    return v


# -- executor.json ---------------------------------------------------------------

def _names(v, where: str) -> list:
    if not isinstance(v, list) or len(v) > MAX_ENTRIES or \
            not all(isinstance(x, str) and 0 < len(x) <= MAX_NAME_CHARS for x in v):
        _fail(where, "must be a list of names")
    return v


def _count(v, where: str, maximum: int = MAX_ENTRIES, minimum: int = 0):
    if not _is_int(v) or not minimum <= v <= maximum:
        _fail(where, f"must be an int in [{minimum}, {maximum}], got {v!r}")
    return v


def _optional(check):
    return lambda v, where: None if v is None else check(v, where)


def _bool(v, where: str):
    if not isinstance(v, bool):
        _fail(where, f"must be a bool, got {v!r}")
    return v


def _text(v, where: str, limit: int = MAX_NAME_CHARS):
    if not isinstance(v, str) or len(v) > limit:
        _fail(where, f"must be a string of at most {limit} characters")
    return v


def _shapes(v, where: str):
    if not isinstance(v, list) or len(v) > MAX_ENTRIES:
        _fail(where, "must be a list of shapes")
    for s in v:
        if not isinstance(s, list) or len(s) > MAX_RANK or not all(_is_int(d) and 0 <= d < 2**63 for d in s):
            _fail(where, f"must be a list of shapes (lists of at most {MAX_RANK} non-negative ints)")
    return v


def _dtypes(v, where: str):
    if not isinstance(v, list) or not all(isinstance(d, str) and d in INPUT_DTYPES for d in v):
        _fail(where, f"must list input dtypes, each one of {', '.join(sorted(INPUT_DTYPES))}")
    return v


def _torch_dtypes(v, where: str):
    if not isinstance(v, list) or not all(isinstance(d, str) and isinstance(getattr(torch, d, None), torch.dtype)
                                          for d in v):
        _fail(where, "must list torch dtype names")
    return v


def _plain(v, where: str):
    """A JSON value checked by the code that reads it (a recorded call, RNG
    states, a replica grouping): only its size is bounded here."""
    return v


def _rng_states(v, where: str):
    if not isinstance(v, list) or len(v) > 256:
        _fail(where, "must list one generator state per replica")
    return v


EXECUTOR_FIELDS = {
    "training": _bool, "params": _names, "buffers": _names,
    "num_inputs": _count, "num_outputs": _count, "loss_index": _optional(_count),
    "anchor_outputs": _count, "consts": _names, "out_spec": _optional(lambda v, w: _text(v, w, 1 << 24)),
    "input_shapes": _shapes, "input_dtypes": _dtypes, "input_torch_dtypes": _torch_dtypes,
    "step": lambda v, w: _count(v, w, 2**63 - 1), "model": _text, "exported_model": _bool,
    "call": _plain, "rng_states": _rng_states, "replica_grouping": _plain,
}
REQUIRED = ("training", "params", "buffers", "num_inputs", "num_outputs", "input_shapes", "input_dtypes")


def check_executor(meta: dict, filename: str) -> dict:
    """executor.json, every field known, of its type and within its bounds."""
    unknown = sorted(set(meta) - set(EXECUTOR_FIELDS))
    if unknown:
        _fail(f"{filename}: executor.json", f"unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    for k in REQUIRED:
        if k not in meta:
            _fail(f"{filename}: executor.json", f"the field {k!r} is missing")
    for k, v in meta.items():
        EXECUTOR_FIELDS[k](v, f"{filename}: executor.json: {k}")
    if len(meta["input_shapes"]) != len(meta["input_dtypes"]):
        _fail(f"{filename}: executor.json", "input_shapes and input_dtypes must have one entry per input")
    return meta


def input_bytes(meta: dict) -> int:
    """The bytes of one call's recorded inputs (checked against the file's
    real size by the loader before anything of that size is made)."""
    total = 0
    for shape, dtype in zip(meta["input_shapes"], meta["input_dtypes"]):
        total += math.prod(shape) * np.dtype(dtype).itemsize
    return total
