"""The executor of this tree against another tree's, on the same IR, in one process.

    python benchmarks/bench_executor_before.py TREE [--steps N] [--only NAME ...]

TREE is a tilefx source tree (e.g. `git archive <commit> | tar -x -C TREE`).
Its `tilefx` package is loaded a second time as `tilefx_before` (a copy whose
import statements name `tilefx_before`), with its own runtime registry and
ATen kernels installed. Each model of bench_speed.py is compiled once by this
tree; its `@main` is then compiled by both executors, and two trainers (or
inference runners) run side by side, one on each, alternating call by call:
- the steps both executors built are compared (each step's name, in order,
  and which slots each drops, up to the numbering of the slots);
- every call's outputs must be equal bit for bit (the same weights, updated
  by both from the same start);
- the warm call times are reported as medians and their ratio, this tree
  over TREE (below 1: faster), and so are the times each executor takes to
  compile `@main` (built alternately from the same IR).
"""

from __future__ import annotations

import argparse
import atexit
import copy
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_speed import WithLoss, cases  # noqa: E402

import tilefx  # noqa: E402
from tilefx.passes.training_step import find_func  # noqa: E402

_IMPORT = re.compile(r"^(\s*)(from|import) tilefx(?=[\s.])", re.M)


def load_before(tree: str):
    """TREE's tilefx as the package `tilefx_before`, its kernels installed."""
    root = tempfile.mkdtemp(prefix="tilefx_before_")
    atexit.register(shutil.rmtree, root, True)
    dst = os.path.join(root, "tilefx_before")
    shutil.copytree(os.path.join(tree, "tilefx"), dst)
    for folder, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(folder, f)
                with open(p) as fh:
                    text = fh.read()
                with open(p, "w") as fh:
                    fh.write(_IMPORT.sub(r"\1\2 tilefx_before", text))
    sys.path.insert(0, root)
    import importlib

    executor = importlib.import_module("tilefx_before.backend.executor")
    runtime = importlib.import_module("tilefx_before.runtime")
    kernels = importlib.import_module("tilefx_before.lowering.aten_kernels")
    runtime.RUNTIME.install(kernels.AtenKernels())
    return executor.CompiledFunction


def _shape(cf) -> tuple:
    """The steps' names in order and what each drops, with the slots
    renumbered by first appearance (the two executors number them apart)."""
    names: dict[int, int] = {}

    def n(s: int) -> int:
        return names.setdefault(s, len(names))

    for s in cf.arg_slots:
        n(s)
    steps = [(step.__qualname__, tuple(sorted(n(j) for j in dead))) for step, dead in zip(cf.steps, cf.dead)]
    return steps, [n(s) for s in cf.result_slots], sorted(cf.tensor_args)


def _same(a, b) -> bool:
    if a is None and b is None:
        return True
    a = a if isinstance(a, (tuple, list)) else [a]
    b = b if isinstance(b, (tuple, list)) else [b]
    return len(a) == len(b) and all(
        x.detach().numpy().tobytes() == y.detach().numpy().tobytes() for x, y in zip(a, b))


def alternate(fa, fb, steps: int) -> tuple[float, float, bool]:
    """Median seconds of fa and fb run alternately, and whether every pair
    of results was the same bits."""
    same = _same(fa(), fb())
    ta, tb = [], []
    for i in range(steps):
        order = ((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta))
        got = []
        for f, ts in order:
            t0 = time.perf_counter()
            got.append(f())
            ts.append(time.perf_counter() - t0)
        same = same and _same(*got)
    return statistics.median(ta), statistics.median(tb), same


def bench(key: str, before_cls, steps: int) -> list[str]:
    from tilefx.backend.executor import CompiledFunction

    title, make, x, y, optims = cases()[key]
    torch.manual_seed(0)
    base = make()
    rows = []
    for kind in ("training", "inference"):
        runners = []
        for cls in (CompiledFunction, before_cls):
            if kind == "training":
                m = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
                r = tilefx.trainingModel(m, optimizer=optims(m.parameters())[1](m.parameters()))
                args = (x, y)
            else:
                r = tilefx.inferenceModel(copy.deepcopy(base).eval())
                args = (x,)
            r.compile(*args)
            prog = r._program
            prog.main = cls(find_func(prog.module, "main"), r.random_streams.own)
            runners.append((r, args))
        (new, a), (old, _) = runners
        same_steps = _shape(new._program.main) == _shape(old._program.main)
        fn, rng = find_func(new._program.module, "main"), np.random.default_rng(0)
        c_new, c_old, _ = alternate(lambda: CompiledFunction(fn, rng) and None,
                                    lambda: before_cls(fn, rng) and None, max(3, steps // 4))
        t_new, t_old, same = alternate(lambda: new(*a), lambda: old(*a), steps)
        rows.append(f"| {key} {kind} | {len(new._program.main.steps)} | {'yes' if same_steps else 'NO'} | "
                    f"{'yes' if same else 'NO'} | {1e3 * t_old:.2f} | {1e3 * t_new:.2f} | {t_new / t_old:.3f} | "
                    f"{1e3 * c_old:.1f} | {1e3 * c_new:.1f} | {c_new / c_old:.3f} |")
        print(rows[-1], flush=True)
        for r, _ in runners:
            r.destroy()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tree", help="the tilefx source tree to compare with")
    ap.add_argument("--steps", type=int, default=40, help="alternating calls per measurement")
    ap.add_argument("--only", nargs="*", default=None, help=f"a subset of {list(cases())}")
    args = ap.parse_args()
    before_cls = load_before(os.path.abspath(args.tree))
    np.seterr(all="ignore")
    print("| model | steps | same steps | same bits | call before ms | call after ms | after / before | "
          "compile before ms | compile after ms | after / before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for key in args.only or list(cases()):
        for row in bench(key, before_cls, args.steps):
            ok = ok and "NO" not in row
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
