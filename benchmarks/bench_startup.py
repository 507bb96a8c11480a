"""Start-up of `tilefx-opt` against `python -c pass` and `import torch`.

    python benchmarks/bench_startup.py [ROUNDS] [--ops OPS] [-p PIPELINE] [--before TREE]

Runs each command ROUNDS times (default 5), the commands interleaved so
that a loaded machine weighs on all alike, and prints each one's median
wall-clock time and its ratio to `python -c pass` and to `python -c "import
torch"` of the same rounds, and the median CPU time (user + system) the
command used, which a machine loaded by other work inflates far less than
the wall clock, with the lowest of the rounds. `tilefx-opt` reads a
one-op function: `ipu.nop` (IR without `aten` ops: no torch) and one op of each class torch's shape rules verify
differently (tilefx/lowering/torch_rules.py): `aten.relu` (elementwise),
`aten.mm`, `aten._softmax`, `aten.convolution` and `aten.sum.dim_IntList`.
With `-p PIPELINE` each `tilefx-opt` also runs those passes (e.g.
`-p ipu-assign-stages`: a graph pass imports the `aten` dialect to read the
IR). With `--before TREE` it also times the tilefx source tree TREE (e.g. an
older commit's `git archive`) for comparison. Last, for each `aten` op, the
CPU time `tilefx-opt` takes in a process that imported torch first, measured
inside it: the cost over `import torch` directly, where the difference of
two medians of separate runs carries both runs' noise on a loaded machine.

The commands run in a scratch directory: `python -c` puts the working
directory first on sys.path, which would shadow TREE with the checkout the
benchmark is started from. They run from compiled bytecode, as an installed
package does (`pip install` compiles it; a checkout caches it on first
import): the bytecode goes to a scratch directory (PYTHONPYCACHEPREFIX),
written by one round that is not counted, so a shell that sets
PYTHONDONTWRITEBYTECODE does not time Python compiling every module of
tilefx on every start. `--source` times them compiling instead.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# one-op functions: (parameters after %x's, the op, the result type)
IR = {
    "ipu.nop": ("tensor<4xf32>", "ipu.nop %x : tensor<4xf32> -> tensor<4xf32>", "tensor<4xf32>"),
    "aten.relu": ("tensor<4xf32>", "aten.relu %x : tensor<4xf32> -> tensor<4xf32>", "tensor<4xf32>"),
    "aten.mm": ("tensor<8x16xf32>, %w: tensor<16x4xf32>",
                "aten.mm %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>", "tensor<8x4xf32>"),
    "aten._softmax": ("tensor<4x8xf32>", "aten._softmax %x {dim = 1 : i64, half_to_float = false} : "
                      "tensor<4x8xf32> -> tensor<4x8xf32>", "tensor<4x8xf32>"),
    "aten.convolution": ("tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>",
                         "aten.convolution %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, "
                         "dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, "
                         "groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>",
                         "tensor<2x4x8x8xf32>"),
    "aten.sum.dim_IntList": ("tensor<4x8xf32>", "aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = false} "
                             ": tensor<4x8xf32> -> tensor<8xf32>", "tensor<8xf32>"),
}
OPT = "import sys; from tilefx.tools.opt import main; sys.exit(main())"
# tilefx-opt after `import torch` in the same process; prints the CPU seconds it took last on stderr
OPT_AFTER_TORCH = ("import sys, time, torch; t = time.process_time(); from tilefx.tools.opt import main; "
                   "rc = main(); print(time.process_time() - t, file=sys.stderr); sys.exit(rc)")


def _env(tree: str | None, pycache: pathlib.Path | None) -> dict[str, str]:
    env = dict(os.environ, **({"PYTHONPATH": tree} if tree else {}))
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int, nargs="?", default=5)
    ap.add_argument("--before", help="a tilefx source tree to time as well")
    ap.add_argument("--source", action="store_true", help="compile every module on every start (no bytecode cache)")
    ap.add_argument("--ops", help="comma-separated ops of IR to time (default: all)")
    ap.add_argument("-p", "--passes", help="a pass pipeline every tilefx-opt command runs (default: none)")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp())
    pycache = None if args.source else tmp / "pycache"
    cases: dict[str, tuple[list[str], str | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], None),
    }
    trees = {"": str(ROOT)} | ({" (before)": args.before} if args.before else {})
    inside: dict[str, tuple[str, str]] = {}
    ops = args.ops.split(",") if args.ops else list(IR)
    pipeline = ["-p", args.passes] if args.passes else []
    for op in ops:
        params, line, result = IR[op]
        path = tmp / f"{op}.mlir"
        path.write_text(f"func.func @main(%x: {params}) -> {result} {{\n"
                        f"  %y = {line}\n  func.return %y : {result}\n}}\n")
        for label, tree in trees.items():
            tool = " ".join(["tilefx-opt", *pipeline])
            cases[f"{tool} on {op}{label}"] = ([sys.executable, "-c", OPT, str(path), *pipeline], tree)
            if op.startswith("aten."):
                inside[f"{tool} on {op}{label}, after import torch"] = (str(path), tree)
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    over_torch: dict[str, list[float]] = {k: [] for k in inside}
    for round_ in range(args.rounds + 1):  # round 0 writes the bytecode and is not counted
        for name, (cmd, tree) in cases.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            out = subprocess.run(cmd, env=_env(tree, pycache), capture_output=True, text=True, cwd=tmp)
            elapsed = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode:
                raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
            if round_:
                times[name].append(elapsed)
                cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        for name, (path, tree) in inside.items():
            out = subprocess.run([sys.executable, "-c", OPT_AFTER_TORCH, path, *pipeline], env=_env(tree, pycache),
                                 capture_output=True, text=True, cwd=tmp)
            if out.returncode:
                raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
            if round_:
                over_torch[name].append(float(out.stderr.split()[-1]))
    base = statistics.median(times["python -c pass"])
    torch_s = statistics.median(times["python -c 'import torch'"])
    torch_cpu = statistics.median(cpu["python -c 'import torch'"])
    for name, ts in times.items():
        m, c = statistics.median(ts), statistics.median(cpu[name])
        print(f"{name:45s} median {m:6.2f} s  x pass {m / base:5.1f}  x import torch {m / torch_s:5.2f}"
              f"  cpu {c:5.2f} s (lowest {min(cpu[name]):5.2f} s)  cpu - import torch {c - torch_cpu:+5.2f} s")
    for name, cs in over_torch.items():
        print(f"{name:66s} cpu over import torch, in the process {statistics.median(cs):5.2f} s"
              f" (lowest {min(cs):5.2f} s)")
    print("bytecode:", "compiled on every start" if args.source else "cached", " load average:", os.getloadavg())


if __name__ == "__main__":
    main()
