"""`tilefx.plan` on BERT pre-training models, compile-only (the model on the
meta device: nothing is allocated or run, the figures are the machine
model's), timed; and the planner's best against a published configuration.

    .venv/bin/python benchmarks/bench_planner.py time [--layers 24] [--ipus 16] [--global-batch 65536]
    .venv/bin/python benchmarks/bench_planner.py published

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


def time_plan(layers, ipus, global_batch, mb=8, machine="mk2"):
    model, inputs, opt = bert_factory(layers=layers, mb=mb)
    opts = tilefx.Options()
    opts.setMachine(machine)
    start = time.perf_counter()
    cands = tilefx.plan(model, *inputs, ipus=ipus, optimizer=opt, global_batch=global_batch, options=opts,
                        keep_all=True)
    seconds = time.perf_counter() - start
    return seconds, cands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["time"])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--ipus", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=65536)
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--machine", default="mk2")
    a = ap.parse_args()
    seconds, cands = time_plan(a.layers, a.ipus, a.global_batch, a.mb, a.machine)
    fit = [c for c in cands if c.fits]
    print(f"{a.layers} layers, {a.ipus} IPUs, global batch {a.global_batch}: planned in {seconds:.1f} s, "
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
