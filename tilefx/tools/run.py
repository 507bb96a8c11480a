"""`tilefx-run FILE --inputs in.npz [--output out.npz] [--function NAME] [--config config.json]`:
run a function of an IR file on the simulated machine.

With `--config`, a JSON object naming `tilefx.driver.CompileConfig` fields
(`{"training": true, "replication_factor": 2, "machine": "bow", ...}`), the
file is compiled as the API compiles a model: the compiler driver runs the
graph passes on it (unless they ran: the module has `ipu.stages`), builds
@main and @update with the config's precision and checks that the program
fits the machine, then the function runs.

Arguments are taken from the .npz by the argument's name: its
`tilefx.param` / `tilefx.buffer` / `tilefx.const` / `tilefx.state` /
`tilefx.hyper` name, `accum:<param>` for a `tilefx.accum` (the key the
accumulator comes back under: a parameter and its accumulator share a name),
`input<N>` for `tilefx.input = N`, the IR name of the argument (`%image`: the
model's own forward argument name), else `arg<i>` by position. Positional
arrays (`np.savez(f, x, y)` writes `arr_0`, `arr_1`) bind in argument order to
the arguments no named array matched; two arguments never bind one array.
A `tilefx.const` argument that carries its value (`tilefx.value = dense<...>`,
as the frontends print it) needs no array: it takes the IR's value unless the
.npz names it, and takes no positional array.

Every failure is a one-line `error:` diagnostic (IR errors at file:line:col
with the source line) and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import re
import struct
import sys
import zipfile
import zlib

import numpy as np

from tilefx import driver, limits
from tilefx.errors import Error
from tilefx.backend.executor import CompiledFunction
from tilefx.backend.steps import ExecutionError
from tilefx.dialects.irutil import arg_roles, find_func, result_roles
from tilefx.backend.precision_steps import round_to_bf16
from tilefx.dialects.aten import np_dtype
from tilefx.dialects.const_value import array_of
from tilefx.dialects.names import CONST_VALUE_KEY, STAGES_KEY
from tilefx.driver.config import read_config
from xdsl.dialects.builtin import bf16
from tilefx.passes.pipelines import graph_context
from tilefx.runtime import RUNTIME
from tilefx.dialects.source import decode, parse_ir
from tilefx.tools.opt import report


def arg_key(i: int, role: dict) -> str:
    if "accum" in role:
        return f"accum:{role['accum']}"
    for k in ("param", "buffer", "const", "state", "hyper"):
        if k in role:
            return str(role[k])
    if "input" in role:
        return f"input{role['input']}"
    if role.get("step"):
        return "step"
    return f"arg{i}"


def arg_names(i: int, role: dict, arg) -> list[str]:
    """The .npz keys that name argument `i`: its role key, then its IR name."""
    names = [arg_key(i, role)]
    if arg.name_hint and arg.name_hint not in names:
        names.append(arg.name_hint)
    return names


def bind_inputs(args: list, roles: list[dict], files: list[str],
                carried: frozenset[int] = frozenset()) -> list[str | None]:
    """The .npz key for each argument: by name, else the next positional
    `arr_<n>` (in n order) for the arguments no name matched, except the
    arguments in `carried`, whose value the IR holds (a named array still
    overrides it)."""
    keys = [next((k for k in arg_names(i, r, a) if k in files), None)
            for i, (a, r) in enumerate(zip(args, roles))]
    bound: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k is not None and bound.setdefault(k, i) != i:
            raise Error(f"arguments {bound[k]} and {i} both take the array {k!r}: their roles "
                        "name the same value (two arguments must not share a role name)")
    positional = sorted((f for f in files if re.fullmatch(r"arr_\d+", f) and f not in keys),
                        key=lambda f: int(f[4:]))
    for i, k in enumerate(keys):
        if k is None and positional and i not in carried:
            keys[i] = positional.pop(0)
    if positional:
        raise Error(f"--inputs has {len(positional)} positional array(s) more than the "
                    f"arguments left to bind ({', '.join(positional)})")
    return keys


def carried_values(fn) -> dict[int, object]:
    """The `tilefx.value` attribute of each argument that has one, by index."""
    if fn.arg_attrs is None:
        return {}
    return {i: d.data[CONST_VALUE_KEY] for i, d in enumerate(fn.arg_attrs.data) if CONST_VALUE_KEY in d.data}


def result_key(i: int, role: dict) -> str:
    for k, prefix in (("output", "output"), ("grad", "grad:"), ("buffer", "buffer:"),
                      ("accum", "accum:"), ("param", "param:"), ("state", "state:")):
        if k in role:
            return f"{prefix}{role[k]}"
    return f"result{i}"


def main(argv: list[str] | None = None) -> int:
    """Run tilefx-run on `argv`, or, without it, as the command on the
    command line, in a process that ends after it: no collection walks
    torch's and the program's objects at its exit (tilefx/gcpause.py)."""
    if argv is None:
        from tilefx.gcpause import no_collection_at_exit

        no_collection_at_exit()
    ap = argparse.ArgumentParser(prog="tilefx-run", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--inputs", required=True, help=".npz with one array per argument")
    ap.add_argument("--output", help="write the results to this .npz")
    ap.add_argument("--function", default="main")
    ap.add_argument("--seed", type=int, default=0, help="seed of random ops (dropout)")
    ap.add_argument("--config", help="a JSON file of CompileConfig fields: compile the file with the "
                                     "compiler driver first, as the API would")
    args = ap.parse_args(argv)
    from tilefx.lowering.aten_kernels import AtenKernels
    from tilefx.lowering.torch_rules import TorchRules

    RUNTIME.install(TorchRules(), AtenKernels())  # as the API runs: torch's rules, ATen's kernels
    try:
        with open(args.file, "rb") as f:
            text = decode(f.read(), args.file)
        located = parse_ir(graph_context(), text, args.file)
        module = located.module
        run = None
        if args.config:
            config = read_config(args.config)
            rng = np.random.default_rng(config.seed if config.seed is not None else args.seed)
            compiled = driver.build if STAGES_KEY in module.attributes else driver.compile
            program = compiled(module, config, rng, check_types=True)
            run = {"main": program.main, "update": program.update}.get(args.function)
        fn = find_func(module, args.function)
        if fn is None:
            raise Error(f"{args.file} has no function @{args.function}")
        data = load_npz(args.inputs)
        fn_args = list(fn.body.block.args)
        carried = carried_values(fn)
        keys = bind_inputs(fn_args, arg_roles(fn), list(data), frozenset(carried))
        values = []
        for i, (a, key) in enumerate(zip(fn_args, keys)):
            if key is None and i in carried:  # a constant whose value the IR holds
                values.append(array_of(carried[i], a.type, f"argument {i} of @{args.function}"))
                continue
            if key is None:
                names = " or ".join(repr(k) for k in arg_names(i, arg_roles(fn)[i], a))
                raise Error(f"--inputs has no array {names} (nor a positional arr_<n>) "
                            f"for argument {i} of @{args.function}")
            arr = np.asarray(data[key])
            want = tuple(a.type.get_shape())
            if arr.shape != want:
                raise Error(f"array {key!r} has shape {arr.shape}, argument {i} needs {want}")
            dtype = np_dtype(a.type.element_type)
            if arr.dtype != dtype and not (arr.dtype.kind == dtype.kind == "f"):
                raise Error(f"array {key!r} has dtype {arr.dtype}, argument {i} needs {dtype}")
            arr = arr.astype(dtype, copy=False)
            if a.type.element_type == bf16:  # held as float32 rounded to bf16, as the executor does
                arr = round_to_bf16(arr)
            values.append(arr)
        if run is None:
            run = CompiledFunction(fn, np.random.default_rng(args.seed), check_types=True)
        results = run(*values)
        named = {result_key(i, r): v for i, (v, r) in enumerate(zip(results, result_roles(fn)))}
        if args.output:
            np.savez(args.output, **{k: np.asarray(v) for k, v in named.items() if v is not None})
        else:
            for k, v in named.items():
                print(f"{k} = {np.array2string(np.asarray(v), precision=6, threshold=64)}")
    except (SystemExit, KeyboardInterrupt):
        raise
    except ExecutionError as e:  # the program fails on these inputs: the user's data
        message = ' '.join(str(e).split())
        if e.op is not None:  # at the failing op's line in the file
            print(located.error(e.op, message), file=sys.stderr)
        else:
            print(f"error: {message}", file=sys.stderr)
        return 1
    except BaseException as e:  # noqa: BLE001 - never a traceback
        return report(e)
    return 0


_NPZ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, struct.error, RuntimeError,
               NotImplementedError, SyntaxError)


def _npz_array(z: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> np.ndarray:
    """One member of an .npz, its header checked before its data is read:
    no objects (never unpickled), and its declared shape no larger than the
    bytes the member really holds nor than limits.TENSOR_BYTES."""
    name = info.filename.removesuffix(".npy")
    with z.open(info) as f:
        version = np.lib.format.read_magic(f)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise Error(f"--inputs {path}: array {name!r} is in .npy format version {version}, which "
                        "numpy's header readers do not know")
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise Error(f"--inputs {path}: array {name!r} holds Python objects ({dtype}), which are never "
                        "unpickled: save numeric arrays")
        nbytes = math.prod(shape) * dtype.itemsize
        limits.TENSOR_BYTES.check(nbytes, f"--inputs {path}: array {name!r} of shape {shape}")
        if nbytes > info.file_size:
            raise Error(f"--inputs {path}: array {name!r} declares shape {shape} {dtype} ({nbytes:,} bytes) "
                        f"but holds {info.file_size:,} bytes")
    with z.open(info) as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz by name (never unpickled, each checked before it
    is allocated); unreadable files are an Error."""
    try:
        with open(path, "rb") as f:
            if f.read(6) == b"\x93NUMPY":
                raise Error(f"--inputs {path} is a single array; write an .npz (np.savez)")
        with zipfile.ZipFile(path) as z:
            return {info.filename.removesuffix(".npy"): _npz_array(z, info, path) for info in z.infolist()}
    except Error:
        raise
    except MemoryError:
        raise Error(f"--inputs {path}: not enough memory for its arrays") from None
    except _NPZ_ERRORS as e:
        raise Error(f"cannot read --inputs {path}: {type(e).__name__}: {' '.join(str(e).split())}") from None


if __name__ == "__main__":
    sys.exit(main())
