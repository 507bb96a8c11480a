"""`tilefx-run FILE --inputs in.npz [--output out.npz] [--function NAME]`:
run a function of an IR file on the simulated machine.

Arguments are taken from the .npz by the argument's name: its
`tilefx.param` / `tilefx.buffer` / `tilefx.const` / `tilefx.accum` name,
`input<N>` for `tilefx.input = N`, else `arg<i>` by position.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from tilefx.errors import Error
from tilefx.backend.executor import CompiledFunction, ExecutionError, arg_roles, result_roles
from tilefx.dialects.aten import np_dtype
from tilefx.passes.pipelines import graph_context
from tilefx.dialects.irutil import find_func
from tilefx.tools.opt import report


def arg_key(i: int, role: dict) -> str:
    for k in ("param", "buffer", "const", "accum", "state", "hyper"):
        if k in role:
            return str(role[k])
    if "input" in role:
        return f"input{role['input']}"
    if role.get("step"):
        return "step"
    return f"arg{i}"


def result_key(i: int, role: dict) -> str:
    for k, prefix in (("output", "output"), ("grad", "grad:"), ("buffer", "buffer:"),
                      ("accum", "accum:"), ("param", "param:"), ("state", "state:")):
        if k in role:
            return f"{prefix}{role[k]}"
    return f"result{i}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tilefx-run", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--inputs", required=True, help=".npz with one array per argument")
    ap.add_argument("--output", help="write the results to this .npz")
    ap.add_argument("--function", default="main")
    ap.add_argument("--seed", type=int, default=0, help="seed of random ops (dropout)")
    args = ap.parse_args(argv)
    try:
        with open(args.file) as f:
            text = f.read()
        module = Parser(graph_context(), text, args.file).parse_module()
        module.verify()
        fn = find_func(module, args.function)
        data = np.load(args.inputs, allow_pickle=False)
        values = []
        for i, (a, role) in enumerate(zip(fn.body.block.args, arg_roles(fn))):
            key = arg_key(i, role)
            if key not in data:
                raise Error(f"--inputs has no array {key!r} for argument {i} of @{args.function}")
            arr = np.asarray(data[key])
            want = tuple(a.type.get_shape())
            if arr.shape != want:
                raise Error(f"array {key!r} has shape {arr.shape}, argument {i} needs {want}")
            dtype = np_dtype(a.type.element_type)
            if arr.dtype != dtype and not (arr.dtype.kind == dtype.kind == "f"):
                raise Error(f"array {key!r} has dtype {arr.dtype}, argument {i} needs {dtype}")
            values.append(arr.astype(dtype, copy=False))
        results = CompiledFunction(fn, np.random.default_rng(args.seed), check_types=True)(*values)
    except (ParseError, VerifyException, DiagnosticException, Error, OSError, ValueError,
            ExecutionError) as e:
        return report(e)
    named = {result_key(i, r): v for i, (v, r) in enumerate(zip(results, result_roles(fn)))}
    if args.output:
        np.savez(args.output, **{k: np.asarray(v) for k, v in named.items() if v is not None})
    else:
        for k, v in named.items():
            print(f"{k} = {np.array2string(np.asarray(v), precision=6, threshold=64)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
