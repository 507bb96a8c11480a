"""Start-up of `tilefx-opt` against `python -c pass` and `import torch`.

    python benchmarks/bench_startup.py [ROUNDS] [--before TREE]

Runs each command ROUNDS times (default 5), the commands interleaved so
that a loaded machine weighs on all alike, and prints each one's median
wall-clock time and its ratio to `python -c pass` and to `python -c "import
torch"` of the same rounds, and the median CPU time (user + system) the
command used, which a machine loaded by other work inflates far less than
the wall clock. `tilefx-opt` reads a one-op function: `ipu.nop` (IR without `aten`
ops: no torch) and `aten.relu` (torch's shape rules verify it). With
`--before TREE` it also times the tilefx source tree TREE (e.g. an older
commit's `git archive`) for comparison. Last, for `aten.relu`, the CPU time
`tilefx-opt` takes in a process that imported torch first, measured inside
it: the cost over `import torch` directly, where the difference of two
medians of separate runs carries both runs' noise on a loaded machine. The
commands run in a scratch directory: `python -c` puts the working directory
first on sys.path, which would shadow TREE with the checkout the benchmark
is started from.
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
IR = {
    "ipu.nop": "%y = ipu.nop %x : tensor<4xf32> -> tensor<4xf32>",
    "aten.relu": "%y = aten.relu %x : tensor<4xf32> -> tensor<4xf32>",
}
OPT = "import sys; from tilefx.tools.opt import main; sys.exit(main())"
# tilefx-opt after `import torch` in the same process; prints the CPU seconds it took last on stderr
OPT_AFTER_TORCH = ("import sys, time, torch; t = time.process_time(); from tilefx.tools.opt import main; "
                   "rc = main(); print(time.process_time() - t, file=sys.stderr); sys.exit(rc)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int, nargs="?", default=5)
    ap.add_argument("--before", help="a tilefx source tree to time as well")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp())
    cases: dict[str, tuple[list[str], str | None]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], None),
    }
    trees = {"": str(ROOT)} | ({" (before)": args.before} if args.before else {})
    for op, line in IR.items():
        path = tmp / f"{op}.mlir"
        path.write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                        f"  {line}\n  func.return %y : tensor<4xf32>\n}}\n")
        for label, tree in trees.items():
            cases[f"tilefx-opt on {op}{label}"] = ([sys.executable, "-c", OPT, str(path)], tree)
    inside = {f"tilefx-opt on aten.relu{label}, after import torch": tree for label, tree in trees.items()}
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    over_torch: dict[str, list[float]] = {k: [] for k in inside}
    for _ in range(args.rounds):
        for name, (cmd, tree) in cases.items():
            env = dict(os.environ, **({"PYTHONPATH": tree} if tree else {}))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
            times[name].append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if out.returncode:
                raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
        for name, tree in inside.items():
            env = dict(os.environ, **({"PYTHONPATH": tree} if tree else {}))
            out = subprocess.run([sys.executable, "-c", OPT_AFTER_TORCH, str(tmp / "aten.relu.mlir")], env=env,
                                 capture_output=True, text=True, cwd=tmp)
            if out.returncode:
                raise SystemExit(f"{name} failed:\n{out.stderr[-2000:]}")
            over_torch[name].append(float(out.stderr.split()[-1]))
    base = statistics.median(times["python -c pass"])
    torch_s = statistics.median(times["python -c 'import torch'"])
    torch_cpu = statistics.median(cpu["python -c 'import torch'"])
    for name, ts in times.items():
        m, c = statistics.median(ts), statistics.median(cpu[name])
        print(f"{name:36s} median {m:7.2f} s  x pass {m / base:6.1f}  x import torch {m / torch_s:5.2f}"
              f"  cpu {c:5.2f} s  cpu - import torch {c - torch_cpu:+5.2f} s")
    for name, cs in over_torch.items():
        print(f"{name:52s} cpu over import torch, in the process {statistics.median(cs):5.2f} s")
    print("load average:", os.getloadavg())


if __name__ == "__main__":
    main()
