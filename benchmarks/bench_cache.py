"""Executable cache: compile time of the tutorial CNN (training, AdamW) cold
(trace + passes + machine model) and from the cache (parse + verify + machine model).

    .venv/bin/python benchmarks/bench_cache.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from models import TutorialCNN, WithLoss  # noqa: E402


def compile_once(cache_dir: str | None, x, y) -> float:
    torch.manual_seed(0)
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    opts = tilefx.Options()
    if cache_dir:
        opts.enableExecutableCaching(cache_dir)
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3))
    t0 = time.perf_counter()
    ex.compile(x, y)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    x = torch.randn(40, 1, 28, 28)
    y = torch.randint(0, 10, (40,))
    compile_once(None, x, y)  # warm torch's tracing machinery
    cold = [compile_once(None, x, y) for _ in range(args.repeats)]
    with tempfile.TemporaryDirectory() as d:
        compile_once(d, x, y)  # fills the cache
        hit = [compile_once(d, x, y) for _ in range(args.repeats)]
    c, h = statistics.median(cold), statistics.median(hit)
    print(f"cold compile {c:.3f} s, cache hit {h:.3f} s, speed-up {c / h:.1f}x")


if __name__ == "__main__":
    main()
