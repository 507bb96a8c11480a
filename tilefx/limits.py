"""The bounds on what a file or a text from someone else may make tilefx do
(docs/security.md): one home for every cap, each with the environment
variable that raises it.

A cap is read when it is checked, so a user raises it for one process
(`TILEFX_MAX_EXECUTABLE_BYTES=64GiB python train.py`) or from Python
(`os.environ[...]`) before the call. Values are integers with an optional
binary suffix (KiB, MiB, GiB, TiB); a value that is not one is an Error
naming the variable, never a silent default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tilefx.errors import Error

_SUFFIXES = {"": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


@dataclass(frozen=True)
class Limit:
    env: str  # the environment variable that raises (or lowers) it
    default: int
    what: str  # what it bounds, as an error message says it

    def value(self) -> int:
        raw = os.environ.get(self.env)
        if raw is None or not raw.strip():
            return self.default
        text = raw.strip().lower().replace(" ", "")
        digits = text.rstrip("kmgtib")
        suffix = text[len(digits):]
        if not digits.isdigit() or len(digits) > 30 or suffix not in _SUFFIXES:
            raise Error(f"{self.env}={raw!r}: expected a non-negative integer with an optional KiB, MiB, "
                        "GiB or TiB suffix")
        return int(digits) * _SUFFIXES[suffix]

    def check(self, amount: int, where: str) -> None:
        """An Error naming `where`, the amount, the cap and how to raise it
        when `amount` is over the cap."""
        cap = self.value()
        if amount > cap:
            raise Error(f"{where}: {self.what} is {amount:,}, more than the limit {cap:,}; if the input is "
                        f"trusted, raise the limit with the environment variable {self.env}")


# -- executables and cache entries (api/export.py) ----------------------------------
# a JSON part of an executable (manifest, executor, options)
EXECUTABLE_JSON_BYTES = Limit("TILEFX_MAX_EXECUTABLE_JSON_BYTES", 16 << 20, "the JSON part's size in bytes")
# every part of an executable once decompressed, together
EXECUTABLE_BYTES = Limit("TILEFX_MAX_EXECUTABLE_BYTES", 16 << 30,
                         "the executable's decompressed size in bytes")
# how much larger the decompressed parts may be than the file (a zip bomb's
# parts are thousands of times their compressed size; weights compress a little)
EXECUTABLE_RATIO = Limit("TILEFX_MAX_COMPRESSION_RATIO", 64,
                         "the ratio of the decompressed parts to the file's size")
# the size below which the ratio is not checked (small files of zeros are fine)
RATIO_FREE_BYTES = 64 << 20

# -- text inputs --------------------------------------------------------------------
# an options file (Options.loadFromFile) or POPTORCH_DEFAULT_OPTIONS
OPTIONS_TEXT_BYTES = Limit("TILEFX_MAX_OPTIONS_BYTES", 1 << 20, "the options text's size in bytes")
# lists, tuples, dicts and calls nested in one value (options, JSON parts)
NESTING_DEPTH = Limit("TILEFX_MAX_NESTING_DEPTH", 64, "the nesting depth")
# the digits of an integer literal (options files, JSON parts)
INTEGER_DIGITS = Limit("TILEFX_MAX_INTEGER_DIGITS", 40, "the number of digits of an integer")

# -- IR and tensors -----------------------------------------------------------------
# the dense constants of one IR module, together (tilefx-opt, executables)
# (declared bytes: xDSL holds a dense attribute's elements as Python numbers,
# some twenty times their size, and expands a splat element by element)
IR_CONSTANT_BYTES = Limit("TILEFX_MAX_CONSTANT_BYTES", 64 << 20, "the IR's dense constants' size in bytes")
# one tensor an input file (npz, ONNX) declares, before it is allocated
TENSOR_BYTES = Limit("TILEFX_MAX_TENSOR_BYTES", 16 << 30, "the tensor's size in bytes")


def json_depth_ok(text: str | bytes) -> bool:
    """Whether the brackets of a JSON text nest at most NESTING_DEPTH deep
    (checked on the text, before a recursive parser sees it)."""
    cap = NESTING_DEPTH.value()
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > cap:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def load_json(data: str | bytes, where: str, size: Limit = EXECUTABLE_JSON_BYTES):
    """A JSON text parsed within the caps: size, nesting depth and integer
    digits each an Error naming `where` (never a RecursionError or a
    ValueError from Python's integer conversion limit)."""
    size.check(len(data), where)
    if isinstance(data, bytes):
        try:
            data = data.decode()
        except UnicodeDecodeError as e:
            raise Error(f"{where}: not UTF-8 text: {e}") from None
    if not json_depth_ok(data):
        raise Error(f"{where}: nested deeper than {NESTING_DEPTH.value()} levels; if the input is trusted, "
                    f"raise the limit with the environment variable {NESTING_DEPTH.env}")

    def parse_int(text: str) -> int:
        INTEGER_DIGITS.check(len(text.lstrip("-")), where)
        return int(text)

    import json  # here: tilefx-opt reads limits for IR, which needs no JSON

    try:
        return json.loads(data, parse_int=parse_int)
    except (json.JSONDecodeError, RecursionError) as e:
        raise Error(f"{where}: not valid JSON: {e}") from None
