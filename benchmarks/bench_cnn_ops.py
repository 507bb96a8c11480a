"""Where a tutorial-CNN step spends its time, op by op, in thread CPU time.

    .venv/bin/python benchmarks/bench_cnn_ops.py [infer|sgd|adamw] [--steps N] [--top K]

Wall-clock times on the shared 2-core machine move by 2-3x with the load of
other jobs; the CPU time of the one thread that runs a tilefx step moves much
less (cache sharing still inflates it under load), so this is the number to
compare kernels by between runs. Each step of the compiled functions
(backend/executor.py) is wrapped with `time.thread_time()`; "outside" is the
rest of the call: the API layer (api/executor.py) and the executor's loop.
"""

from __future__ import annotations

import argparse
import collections
import copy
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from models import TutorialCNN, WithLoss  # noqa: E402


def build(kind: str):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 1, 28, 28, generator=g), torch.randint(0, 10, (40,), generator=g)
    torch.manual_seed(0)
    base = TutorialCNN()
    if kind == "infer":
        ex = tilefx.inferenceModel(copy.deepcopy(base).eval())
        ex.compile(x)
        return ex, lambda: ex(x)
    model = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
    opt = tilefx.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if kind == "sgd" else \
        tilefx.optim.AdamW(model.parameters(), lr=1e-3)
    ex = tilefx.trainingModel(model, optimizer=opt)
    ex.compile(x, y)
    return ex, lambda: ex(x, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", nargs="?", default="infer", choices=["infer", "sgd", "adamw"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    ex, call = build(args.kind)
    for _ in range(10):
        call()
    per_op: dict[str, float] = collections.defaultdict(float)
    fns = [ex._program.main] + ([ex._program.update] if ex._program.update else [])
    for f in fns:
        for i, step in enumerate(f.steps):
            label = f"{f.name}:{i} {step.__qualname__.split(' #')[0]}"

            def timed(env, step=step, label=label):
                t = time.thread_time()
                step(env)
                per_op[label] += time.thread_time() - t

            f.steps[i] = timed
    t0 = time.thread_time()
    for _ in range(args.steps):
        call()
    total = time.thread_time() - t0
    inside = sum(per_op.values())
    n = args.steps
    print(f"tutorial CNN, micro-batch 40, {args.kind}: thread CPU per step {1e3 * total / n:.2f} ms "
          f"(ops {1e3 * inside / n:.2f}, outside {1e3 * (total - inside) / n:.2f}); "
          f"load average {os.getloadavg()[0]:.1f}")
    for label, t in sorted(per_op.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{1e3 * t / n:8.3f} ms  {label}")


if __name__ == "__main__":
    main()
