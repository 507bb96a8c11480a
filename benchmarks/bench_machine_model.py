"""Compile-time overhead of the machine model (costs, timeline, memory) on the
tutorial CNN and on a 12-layer transformer (d=768), next to the whole
compile (trace to ready executor).

    .venv/bin/python benchmarks/bench_machine_model.py
"""

from __future__ import annotations

import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from models import Transformer, TutorialCNN, WithLoss  # noqa: E402
from tilefx.backend import costs  # noqa: E402
from tilefx.backend.machine import machine  # noqa: E402
from tilefx.backend.profile import build_profile  # noqa: E402
from tilefx.passes.training_step import find_func  # noqa: E402


def measure(name, model, inputs, opts=None):
    t0 = time.perf_counter()
    ex = tilefx.compile(model, *inputs, training=True, options=opts,
                        optimizer=tilefx.optim.AdamW(model.parameters()))
    total = time.perf_counter() - t0
    costs.plan_matmul.cache_clear()
    prog = ex._program
    t0 = time.perf_counter()
    build_profile(prog.module, find_func(prog.module, "main"), find_func(prog.module, "update"),
                  ex.schedule, machine(ex.options.machine), training=True,
                  device_iterations=ex.options.device_iterations)
    mm = time.perf_counter() - t0
    print(f"{name}: compile {total:.3f} s, machine model {mm:.3f} s ({100 * mm / total:.1f}% of compile); "
          f"predicted {ex.profile.total_cycles:,} cycles per call on {ex.profile.num_ipus} IPU(s)")


def main():
    torch.manual_seed(0)
    warm = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    tilefx.compile(warm, torch.randn(40, 1, 28, 28), torch.randint(0, 10, (40,)), training=True)
    measure("tutorial CNN, micro-batch 40", WithLoss(TutorialCNN(), nn.CrossEntropyLoss()),
            (torch.randn(40, 1, 28, 28), torch.randint(0, 10, (40,))))
    model = WithLoss(Transformer(vocab=1000, d=768, heads=12, layers=12, seq=128),
                     nn.CrossEntropyLoss())
    for i, layer in enumerate(model.model.layers):
        if i % 3 == 0 and i:
            tilefx.BeginBlock(layer, f"layers{i}", ipu_id=i // 3)
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(8)
    measure("12-layer transformer d=768 over 4 IPUs, micro-batch 4 x 128", model,
            (torch.randint(0, 1000, (32, 128)), torch.randint(0, 1000, (32, 128))), opts)


if __name__ == "__main__":
    main()
