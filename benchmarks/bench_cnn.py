"""Compile time and training-step time of the tutorial CNN at micro-batch 40,
next to PyTorch eager on the CPU doing the same step (forward, backward, AdamW).

    .venv/bin/python benchmarks/bench_cnn.py [--repeats N]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from models import TutorialCNN, WithLoss  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--batch", type=int, default=40)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))

    # warm torch's tracing machinery once (imports, first-call caches)
    warm = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    tilefx.compile(warm, x, y, training=True)

    compile_times = []
    for _ in range(5):
        model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
        t0 = time.perf_counter()
        trainer = tilefx.compile(model, x, y, training=True,
                                 optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3))
        compile_times.append(time.perf_counter() - t0)

    ref = copy.deepcopy(model)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3)

    def torch_step():
        opt.zero_grad()
        ref(x, y)[1].backward()
        opt.step()

    def timed(fn):
        fn()
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    t_ours = timed(lambda: trainer(x, y))
    t_torch = timed(torch_step)
    print(f"tutorial CNN, micro-batch {args.batch}, torch threads {torch.get_num_threads()}")
    print(f"compile (trace to ready executor), median of 5: {statistics.median(compile_times):.3f} s")
    print(f"training step, tilefx:        {1000 * t_ours:.2f} ms (median of {args.repeats})")
    print(f"training step, PyTorch eager: {1000 * t_torch:.2f} ms")
    print(f"ratio tilefx / PyTorch: {t_ours / t_torch:.2f}x")


if __name__ == "__main__":
    main()
