"""What the PopTorch options part of an executable file (and an executable
cache entry) may contain, checked field by field before any of it is used
(docs/security.md); the schema of `executor.json` is the driver's
(driver/executable_schema.py).

An executable is data from someone else, not configuration: its options
are the compile-time ones its program was made with, each of a declared
type and within the bounds the option's setter enforces; settings of the
loading host (where logs, profiles and caches go: anything naming a path
on this machine) are never written to a file and a file that holds one is
refused.
"""

from __future__ import annotations

import enum
import math

import torch

from tilefx.api import enums
from tilefx.api.option_groups import check_ipus, check_repeats
from tilefx.driver.executable_schema import MAX_ENTRIES, MAX_NAME_CHARS, fail, is_int
from tilefx.errors import Error

# the host's settings: where this machine writes (logs, profiles, the
# cache) and how it reports. Never stored, never read from a file; the
# loading user sets them (poptorch.load's edit_opts_fn, or the wrapper's
# options).
HOST_OPTIONS = frozenset({"log_dir", "profile_dir", "executable_cache_dir", "max_repeat_logs",
                          "show_compilation_progress_bar"})


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
        fail(where, "nested too deeply")
    if isinstance(v, list):
        if len(v) > MAX_ENTRIES:
            fail(where, f"more than {MAX_ENTRIES} entries")
        return [_decode(x, where, depth + 1) for x in v]
    if isinstance(v, str) and len(v) > MAX_NAME_CHARS:
        fail(where, f"a string longer than {MAX_NAME_CHARS} characters")
    if not isinstance(v, dict):
        return v
    if "__enum__" in v:
        if set(v) != {"__enum__", "name"} or not isinstance(v["__enum__"], str) or not isinstance(v["name"], str):
            fail(where, "an enum is {\"__enum__\": class, \"name\": member}")
        cls = enums.ENUM_TYPES.get(v["__enum__"])
        if cls is None or v["name"] not in cls.__members__:
            fail(where, f"unknown enum value {v['__enum__']}.{v['name']}")
        return cls[v["name"]]
    if "__dtype__" in v:
        dt = getattr(torch, v["__dtype__"], None) if isinstance(v["__dtype__"], str) else None
        if set(v) != {"__dtype__"} or not isinstance(dt, torch.dtype):
            fail(where, f"unknown dtype {v.get('__dtype__')!r}")
        return dt
    if "__repr__" in v:
        if set(v) != {"__repr__"} or not isinstance(v["__repr__"], str):
            fail(where, "an object compiled into the IR is {\"__repr__\": text}")
        return SKIP
    if len(v) > MAX_ENTRIES:
        fail(where, f"more than {MAX_ENTRIES} entries")
    return {k: _decode(x, f"{where}.{k}", depth + 1) for k, x in v.items()}


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
        fail(f"{where}{key}", f"must be a positive finite number of seconds, got {v!r}")
    if key == "available_memory_proportion":
        if not all(isinstance(k, str) and isinstance(x, (int, float)) and not isinstance(x, bool)
                   and 0 < x <= 1 for k, x in v.items()):
            fail(f"{where}{key}", "must map IPU names to proportions in (0, 1]")
    if key == "machine" and isinstance(v, str):
        from tilefx.backend.machine import PRESETS

        if v not in PRESETS:
            fail(f"{where}{key}", f"unknown machine {v!r} (known: {', '.join(sorted(PRESETS))})")
    if key == "updatable_named_buffers" and not all(isinstance(x, str) for x in v):
        fail(f"{where}{key}", "must list buffer names")
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
        fail(name, "has no declared type (this option is not stored in executables)")
    if kind is object:  # an object compiled into the IR is stored as its repr only
        fail(name, "must be an object's {\"__repr__\": text} or null")
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if is_int(v) and not isinstance(v, enum.Enum):
            try:
                v = kind(v)
            except ValueError:
                fail(name, f"{v} is not a {kind.__name__}")
        if not isinstance(v, kind):
            fail(name, f"must be a {kind.__name__}, got {v!r}")
    elif kind is bool:
        if not isinstance(v, bool):
            fail(name, f"must be a bool, got {v!r}")
    elif kind is int:
        if not is_int(v):
            fail(name, f"must be an int, got {v!r}")
    elif kind is float:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            fail(name, f"must be a number, got {v!r}")
        v = float(v)
    elif kind is str:
        if not isinstance(v, str):
            fail(name, f"must be a string, got {v!r}")
    elif kind in (list, tuple):
        if not isinstance(v, list):
            fail(name, f"must be a list, got {type(v).__name__}")
        v = kind(v)
    elif kind is dict:
        if not isinstance(v, dict):
            fail(name, f"must be an object, got {type(v).__name__}")
    elif isinstance(default, torch.dtype):
        if not isinstance(v, torch.dtype):
            fail(name, f"must be a torch dtype, got {v!r}")
    else:
        fail(name, f"holds a {kind.__name__}, which executables do not store")
    try:
        return _bounded(key, v, where)
    except Error as e:
        raise Error(f"options.json: {e.message}") from None


def check_popart_options(raw) -> dict:
    """The PopART session options of a file: a flat object of names to
    plain values (strings, numbers, bools, and lists and objects of them)."""
    v = _decode(raw, "options.json: _Popart")
    if not isinstance(v, dict):
        fail("options.json: _Popart", "must be an object")
    for k, x in v.items():
        if k in HOST_OPTIONS or "dir" in k.lower() or "path" in k.lower() or "file" in k.lower():
            fail(f"options.json: _Popart.{k}", "names a path on the host, which is never taken from a file")
    return v


