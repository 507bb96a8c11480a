"""What an executable file's `executor.json` may hold (docs/security.md):
what binds the compiled IR to a model (its parameters, buffers, inputs and
outputs, training or inference, the update count), every field of a
declared type and within bounds, checked before any of it is used; a field
the schema does not know is an error, as is a schema version other than
this one's. The surfaces' own parts (PopTorch's options: api/executable_schema.py)
are theirs to check. Imports no torch."""

from __future__ import annotations

import math
import numbers

import numpy as np

from tilefx.errors import Error

# the version of what the JSON parts may hold and of the attributes the stored
# IR carries for the machine model (manifest.json's "format_version"): 3, the
# partials type on each matmul and convolution (ipu-partials-type)
SCHEMA_VERSION = 3

# the longest string field of a file (names of tensors, models, machines)
MAX_NAME_CHARS = 4096
# the most entries of a list or dict field (parameters, inputs, anchors, ...)
MAX_ENTRIES = 1 << 20
# the most dimensions of a recorded input shape (PyTorch's own limit is 64)
MAX_RANK = 64
# the longest dtype name (torch's longest, `float8_e4m3fnuz`, has 15 characters)
MAX_DTYPE_CHARS = 32

# the numpy dtypes an executable's inputs may have (no objects, no records)
INPUT_DTYPES = frozenset({"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                          "uint16", "uint32", "uint64", "bool", "complex64", "complex128"})


def fail(where: str, what: str):
    raise Error(f"{where}: {what}")


def is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


# -- executor.json ---------------------------------------------------------------

def _names(v, where: str) -> list:
    if not isinstance(v, list) or len(v) > MAX_ENTRIES or \
            not all(isinstance(x, str) and 0 < len(x) <= MAX_NAME_CHARS for x in v):
        fail(where, "must be a list of names")
    return v


def _count(v, where: str, maximum: int = MAX_ENTRIES, minimum: int = 0):
    if not is_int(v) or not minimum <= v <= maximum:
        fail(where, f"must be an int in [{minimum}, {maximum}], got {v!r}")
    return v


def _optional(check):
    return lambda v, where: None if v is None else check(v, where)


def _bool(v, where: str):
    if not isinstance(v, bool):
        fail(where, f"must be a bool, got {v!r}")
    return v


def _text(v, where: str, limit: int = MAX_NAME_CHARS):
    if not isinstance(v, str) or len(v) > limit:
        fail(where, f"must be a string of at most {limit} characters")
    return v


def _shapes(v, where: str):
    if not isinstance(v, list) or len(v) > MAX_ENTRIES:
        fail(where, "must be a list of shapes")
    for s in v:
        if not isinstance(s, list) or len(s) > MAX_RANK or not all(is_int(d) and 0 <= d < 2**63 for d in s):
            fail(where, f"must be a list of shapes (lists of at most {MAX_RANK} non-negative ints)")
    return v


def _dtypes(v, where: str):
    if not isinstance(v, list) or not all(isinstance(d, str) and d in INPUT_DTYPES for d in v):
        fail(where, f"must list input dtypes, each one of {', '.join(sorted(INPUT_DTYPES))}")
    return v


def _torch_dtypes(v, where: str):
    """The inputs' dtypes by the frontend's names (torch's: `bfloat16`,
    which numpy lacks, apart from float32); which names exist is the
    frontend's to say when it reads them (api/export.py)."""
    if not isinstance(v, list) or len(v) > MAX_ENTRIES or \
            not all(isinstance(d, str) and 0 < len(d) <= MAX_DTYPE_CHARS and d.isidentifier() for d in v):
        fail(where, "must list torch dtype names")
    return v


def _plain(v, where: str):
    """A JSON value checked by the code that reads it (a recorded call, RNG
    states, a replica grouping): only its size is bounded here."""
    return v


def _rng_states(v, where: str):
    if not isinstance(v, list) or len(v) > 256:
        fail(where, "must list one generator state per replica")
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
        fail(f"{filename}: executor.json", f"unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    for k in REQUIRED:
        if k not in meta:
            fail(f"{filename}: executor.json", f"the field {k!r} is missing")
    for k, v in meta.items():
        EXECUTOR_FIELDS[k](v, f"{filename}: executor.json: {k}")
    if len(meta["input_shapes"]) != len(meta["input_dtypes"]):
        fail(f"{filename}: executor.json", "input_shapes and input_dtypes must have one entry per input")
    return meta


def input_bytes(meta: dict) -> int:
    """The bytes of one call's recorded inputs (checked against the file's
    real size by the loader before anything of that size is made)."""
    total = 0
    for shape, dtype in zip(meta["input_shapes"], meta["input_dtypes"]):
        total += math.prod(shape) * np.dtype(dtype).itemsize
    return total
