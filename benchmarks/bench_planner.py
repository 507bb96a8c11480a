"""`tilefx.plan` on BERT pre-training models, compile-only (the model on the
meta device: nothing is allocated or run, the figures are the machine
model's), timed; and the planner's best against a published configuration.

    .venv/bin/python benchmarks/bench_planner.py time [--layers 24] [--ipus 16] [--global-batch 65536]
    .venv/bin/python benchmarks/bench_planner.py published [--case NAME]

`time`: the planning time of a BERT-Large-sized model (d 1024, 16 heads,
FFN 4096, sequence 128, 20 masked tokens, vocabulary 30,528) with the given
number of layers, micro-batch 8, fp16 with a recomputation checkpoint per
layer (Graphcore's phase-1 BERT-Large), AdamW state, and the best
configurations.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import tilefx  # noqa: E402
from tilefx.planner import table  # noqa: E402
from validation_models import BertPretraining  # noqa: E402


def bert_factory(layers=24, d=1024, heads=16, ffn=4096, mb=8, seq=128, masked=20):
    """fp16 weights and activations with a recomputation checkpoint after
    every layer, as Graphcore's BERT pre-training runs."""
    with torch.device("meta"):
        model = BertPretraining(d=d, heads=heads, layers=layers, ffn=ffn, seq=seq, masked=masked,
                                recompute=True).half()
    ids = torch.randint(0, 30528, (mb, seq))
    labels = torch.randint(0, 30528, (mb, masked))
    return model, (ids, labels), tilefx.optim.AdamW(model.parameters(), lr=1e-4)


def bert_published(name):
    """The model with its published layer placement and the published options:
    (model, inputs, optimizer, options, ipus, global batch)."""
    if name == "bert-large-pod16":
        kw, split, amp, replicas = {}, [3, 7, 7, 7], [0.1, 0.15, 0.15, 0.15], 4
        state = tilefx.TensorLocationSettings().useOnChipStorage(False).useReplicatedTensorSharding(True)
    elif name == "bert-base-pod16":
        kw = dict(d=768, heads=12, layers=12, ffn=3072)
        split, amp, replicas, state = [0, 4, 4, 4], [0.22] * 4, 4, None
    else:
        raise SystemExit(f"unknown case {name}")
    mb, accumulation = 8, 512
    with torch.device("meta"):
        model = BertPretraining(**kw, layers_per_ipu=split, recompute=True).half()
    ids = torch.randint(0, 30528, (mb, 128))
    labels = torch.randint(0, 30528, (mb, 20))
    opts = tilefx.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    # the head goes back to IPU 0 as a later stage (optimum-graphcore's placement)
    opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
    opts.setAvailableMemoryProportion({f"IPU{i}": p for i, p in enumerate(amp)})
    if state is not None:
        opts.TensorLocations.setOptimizerLocation(state)
    opt = tilefx.optim.AdamW(model.parameters(), lr=1e-4)
    return model, (ids, labels), opt, opts, replicas * len(split), mb * accumulation * replicas, kw


def time_plan(layers, ipus, global_batch, mb=8, machine="mk2", **kw):
    model, inputs, opt = bert_factory(layers=layers, mb=mb, **kw)
    opts = tilefx.Options()
    opts.setMachine(machine)
    start, cpu = time.perf_counter(), time.process_time()
    cands = tilefx.plan(model, *inputs, ipus=ipus, optimizer=opt, global_batch=global_batch, options=opts,
                        keep_all=True)
    return time.perf_counter() - start, time.process_time() - cpu, cands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["time", "published"])
    ap.add_argument("--case", default="bert-large-pod16")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--ipus", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=65536)
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--machine", default="mk2")
    ap.add_argument("--base", action="store_true", help="BERT-Base sizes (d 768, 12 heads, FFN 3072)")
    a = ap.parse_args()
    if a.what == "published":
        model, inputs, opt, opts, ipus, gb, kw = bert_published(a.case)
        start, cpu = time.perf_counter(), time.process_time()
        cands = tilefx.plan(model, *inputs, ipus=ipus, optimizer=opt, global_batch=gb, options=opts,
                            keep_all=True)
        print(f"{a.case} published configuration, {ipus} IPUs, global batch {gb}: costed in "
              f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU)")
        print(table(cands, 12))
        print(cands[0].explain())
        return
    sizes = dict(d=768, heads=12, ffn=3072) if a.base else {}
    seconds, cpu, cands = time_plan(a.layers, a.ipus, a.global_batch, a.mb, a.machine, **sizes)
    fit = [c for c in cands if c.fits]
    print(f"{a.layers} layers, {a.ipus} IPUs, global batch {a.global_batch}: planned in {seconds:.1f} s "
          f"({cpu:.1f} s of CPU time: the machine is shared), "
          f"{len(cands)} configurations costed, {len(fit)} fit")
    print(table(fit, 12))
    for c in cands:
        if not c.fits:
            print(f"  not fitting: {c.stages} x {c.replicas} {c.schedule} {c.state} {c.proportion}: {c.reason}")
    if fit:
        print(fit[0].explain())
        print(fit[0].code)


if __name__ == "__main__":
    main()
