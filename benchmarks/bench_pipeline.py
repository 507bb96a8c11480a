"""Automatic stage partitioning and pipeline schedules, from the machine model
(compile-only: nothing runs, the figures are the profile's predictions).

Part 1 (`split`): `PipelinedExecution.auto(4)` against the best hand split
found by trying every way of cutting the model at module boundaries into 4
contiguous stages (the tutorial CNN: its 9 layers; a 12-layer BERT-base-sized
encoder: its 12 encoder layers, the embedding with the first and the head and
loss with the last). Each hand split is what a user writes with
`PipelinedExecution(Stage("u0", "u1").ipu(0), ...)`: the traced model with
one block per unit is staged, compiled through the graph passes and costed
by the same machine model as the automatic split.

Part 2 (`schedules`): FillDrain, 1F1B, Interleaved1F1B (2 virtual stages
per IPU) and ZeroBubble on the encoder over 4 IPUs, gradient accumulation 8
and 32, the stages chosen by `PipelinedExecution.auto`; schedule names after
`schedules` run only those.

    .venv/bin/python benchmarks/bench_pipeline.py [split|schedules [NAME ...]]
"""

from __future__ import annotations

import itertools
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from models import EncoderLayer, Transformer, TutorialCNN, WithLoss  # noqa: E402
from tilefx import driver  # noqa: E402
from tilefx.api.compile_config import compile_config  # noqa: E402
from tilefx.backend.machine import machine  # noqa: E402
from tilefx.backend.profile import build_profile  # noqa: E402
from tilefx.dialects.irutil import find_func, from_py  # noqa: E402
from tilefx.dialects.names import OPTIMIZER_KEY, STRATEGY_KEY  # noqa: E402
from tilefx.passes.assign_stages import AssignStagesPass  # noqa: E402
from tilefx.passes.pipelines import run_graph_passes  # noqa: E402

IPUS = 4


class BertLayer(EncoderLayer):
    """The tests' encoder layer with BERT-base's feed-forward width (4d)."""

    def __init__(self, d, heads):
        super().__init__(d, heads, 0.0)
        self.ff1 = nn.Linear(d, 4 * d)
        self.ff2 = nn.Linear(4 * d, d)


def bert(layers=12):
    model = Transformer(vocab=1000, d=768, heads=12, layers=layers, seq=128)
    model.layers = nn.ModuleList(BertLayer(768, 12) for _ in range(layers))
    return WithLoss(model, nn.CrossEntropyLoss())


def cnn_case():
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    m = model.model
    units = [m.layer1.conv, m.layer1.pool, m.layer1.relu, m.layer2.conv, m.layer2.pool,
             m.layer2.relu, m.layer3, m.layer3_act, m.layer4]
    inputs = (torch.randn(8 * 40, 1, 28, 28), torch.randint(0, 10, (8 * 40,)))
    return "tutorial CNN, micro-batch 40", model, units, inputs, 40


def bert_case():
    model = bert()
    units = list(model.model.layers)
    inputs = (torch.randint(0, 1000, (8, 128)), torch.randint(0, 1000, (8, 128)))
    return "12-layer encoder d=768 (BERT-base sizes), micro-batch 1 x 128", model, units, inputs, 1


def _options(strategy=None, G=8):
    o = tilefx.Options()
    # nothing recomputed (PopART's autoRecomputation None): the schedules and
    # splits are compared on what they stash of every activation, not on
    # PopTorch's default recomputation of each stage from its inputs
    o._Popart.set("autoRecomputation", 0)
    o.Training.gradientAccumulation(G)
    if strategy is not None:
        o.setExecutionStrategy(strategy)
    return o


def _compile(model, inputs, strategy, G=8):
    t = tilefx.trainingModel(model, _options(strategy, G),
                             optimizer=tilefx.optim.SGD(model.parameters(), lr=0.01))
    t.compile(*inputs)
    return t


def _throughput(profile, samples_per_update) -> float:
    return samples_per_update / profile.machine.seconds(profile.cycles_per_update)


def hand_splits(model, units, inputs, mb, G=8):
    """Every split of the units into IPUS contiguous groups, costed like a compile."""
    for i, u in enumerate(units):
        tilefx.BeginBlock(u, f"u{i}")
    # the trace with one block per unit (staged here by auto, which never cuts a block)
    traced = _compile(model, inputs, tilefx.PipelinedExecution.auto(IPUS))
    tilefx.removeBlocks(model)
    base = traced._program.import_module
    results = []
    for cuts in itertools.combinations(range(1, len(units)), IPUS - 1):
        bounds = (0, *cuts, len(units))
        stages = [{"blocks": [f"u{i}" for i in range(a, b)], "ipu": k}
                  for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
        module = base.clone()
        module.attributes[OPTIMIZER_KEY] = traced._program.module.attributes[OPTIMIZER_KEY]
        module.attributes[STRATEGY_KEY] = from_py({"kind": "pipelined", "stages": stages,
                                                   "auto_stage": "same_as_ipu", "schedule": "FillDrain"})
        run_graph_passes(module, training=True, assign=AssignStagesPass(gradient_accumulation=G))
        sched = driver.schedule_of(module, compile_config(traced.options, training=True))
        prof = build_profile(module, find_func(module, "main"), find_func(module, "update"), sched,
                             machine("mk2"), training=True, device_iterations=1, accumulate=True,
                             check_memory=False)
        fits = all(int(m.peak.max()) <= prof.machine.bytes_per_tile for m in prof.memory.values())
        results.append((_throughput(prof, mb * G), cuts, fits))
    return results, _throughput(traced.profile, mb * G)


def split():
    print(f"| model | hand splits tried | best hand split (cuts before unit) | its throughput | "
          f"PipelinedExecution.auto({IPUS}) | auto / best | auto's cut points | auto's stage cycles |")
    print("|---|---|---|---|---|---|---|---|")
    for case in (cnn_case, bert_case):
        torch.manual_seed(0)
        name, model, units, inputs, mb = case()
        t0 = time.perf_counter()
        results, auto_units = hand_splits(model, units, inputs, mb)
        results = [r for r in results if r[2]]
        search = time.perf_counter() - t0
        best = max(results)
        t0 = time.perf_counter()
        auto = _compile(model, inputs, tilefx.PipelinedExecution.auto(IPUS))
        auto_s = time.perf_counter() - t0
        thr = _throughput(auto.profile, mb * 8)
        rep = auto.profile.auto_stage
        print(f"| {name} | {len(results)} ({search:.0f} s) | {list(best[1])} | {best[0]:,.0f} samples/s | "
              f"{thr:,.0f} samples/s ({auto_s:.1f} s to compile) | {100 * thr / best[0]:.1f}% | "
              f"{'; '.join(rep['cuts'])} | {rep['stage_cycles']} |", flush=True)
        print(f"|   (auto on the model with one block per unit: cuts only between units) | | | | "
              f"{auto_units:,.0f} samples/s | {100 * auto_units / best[0]:.1f}% | | |", flush=True)


def schedules(names=("FillDrain", "1F1B", "Interleaved1F1B", "ZeroBubble")):
    print("| schedule | G | throughput (samples/s) | cycles per weight update | bubble fraction | "
          "peak stashed activations per IPU (MB) | peak tile memory per IPU (KiB) |")
    print("|---|---|---|---|---|---|---|")
    for G in (8, 32):
        for name in names:
            torch.manual_seed(0)
            model = bert()
            inputs = (torch.randint(0, 1000, (G, 128)), torch.randint(0, 1000, (G, 128)))
            t = _compile(model, inputs, tilefx.PipelinedExecution.auto(IPUS, schedule=name), G=G)
            p = t.profile
            stash = ", ".join(f"{p.stash_bytes.get(i, 0) / 1e6:.1f}" for i in range(IPUS))
            peak = ", ".join(f"{int(p.memory[i].peak.max()) // 1024}" for i in range(IPUS))
            print(f"| {name} | {G} | {_throughput(p, G):,.1f} | {p.cycles_per_update:,} | "
                  f"{100 * p.bubble_fraction():.1f}% | {stash} | {peak} |", flush=True)


if __name__ == "__main__":
    which = sys.argv[1:] or ["split", "schedules"]
    if "split" in which:
        split()
    if "schedules" in which:
        chosen = which[which.index("schedules") + 1:]
        schedules(*([chosen] if chosen else []))
