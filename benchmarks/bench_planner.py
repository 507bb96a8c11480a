"""`tilefx.plan` on BERT pre-training models, compile-only (the model on the
meta device: nothing is allocated or run, the figures are the machine
model's), timed; and the planner's best against a published configuration.

    .venv/bin/python benchmarks/bench_planner.py time [--layers 24] [--ipus 16] [--global-batch 65536] [--workers 1]
    .venv/bin/python benchmarks/bench_planner.py published [--case NAME|all] [--machine bow] [--same-shape]
    .venv/bin/python benchmarks/bench_planner.py compile
    .venv/bin/python benchmarks/bench_planner.py makespan [--stages 16] [--micro-batches 2048]
    .venv/bin/python benchmarks/bench_planner.py reuse [--layers 24] [--base] [--rounds 2]
    .venv/bin/python benchmarks/bench_planner.py shared [--layers 24] [--base] [--rounds 2]

`time`: the planning time of a BERT-Large-sized model (d 1024, 16 heads,
FFN 4096, sequence 128, 20 masked tokens, vocabulary 30,528) with the given
number of layers, micro-batch 8, fp16 with a recomputation checkpoint per
layer (Graphcore's phase-1 BERT-Large), AdamW state, and the best
configurations.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
import tilefx  # noqa: E402
from tilefx.planner import table  # noqa: E402
from tilefx.planner.candidate import Candidate  # noqa: E402
from tilefx.planner.search import _Planner  # noqa: E402
from validation_models import BertPretraining, EightBitInput, ResNet50, ViT  # noqa: E402


def bert_factory(layers=24, d=1024, heads=16, ffn=4096, mb=8, seq=128, masked=20):
    """fp16 weights and activations with a recomputation checkpoint after
    every layer, as Graphcore's BERT pre-training runs."""
    with torch.device("meta"):
        model = BertPretraining(d=d, heads=heads, layers=layers, ffn=ffn, seq=seq, masked=masked,
                                recompute=True).half()
    ids = torch.randint(0, 30528, (mb, seq))
    labels = torch.randint(0, 30528, (mb, masked))
    return model, (ids, labels), tilefx.optim.AdamW(model.parameters(), lr=1e-4)


# Graphcore's published configurations (sources in each entry). Both sides of
# the comparison get the model, micro-batch, optimizer, precision, machine and
# global batch of the entry; the published side also its placement, replicas,
# accumulation, proportions and optimizer-state location, given to the
# planner as fixed choices so the same costing and memory rules apply.
_BERT_SRC = "graphcore/examples nlp/bert/pytorch/configs_pretraining.yml"
PUBLISHED = {
    "bert-large-pod16": dict(
        model="bert", sizes=dict(d=1024, heads=16, ffn=4096), split=(3, 7, 7, 7), mb=8, replicas=4,
        accumulation=2048, proportions=(0.15, 0.25, 0.25, 0.25), state="off chip, sharded",
        optimizer="lamb", source=f"{_BERT_SRC} pretrain_large_128 (Bow Pod16)"),
    "bert-large-pod64": dict(
        model="bert", sizes=dict(d=1024, heads=16, ffn=4096), split=(3, 7, 7, 7), mb=8, replicas=16,
        accumulation=512, proportions=(0.14, 0.19, 0.19, 0.19), state="off chip, sharded",
        optimizer="lamb", source=f"{_BERT_SRC} pretrain_large_128_POD64"),
    "bert-base-pod16": dict(
        model="bert", sizes=dict(d=768, heads=12, ffn=3072), split=(0, 4, 4, 4), mb=32, replicas=4,
        accumulation=512, proportions=(0.25,) * 4, state="off chip, sharded", optimizer="lamb",
        source=f"{_BERT_SRC} pretrain_base_128"),
    "vit-b16-pod16": dict(
        model="vit", split=(3, 3, 3, 3), mb=8, replicas=4, accumulation=2048, proportions=(0.3,) * 4,
        state="on chip, sharded", optimizer="lamb",
        source="graphcore/examples vision/vit/pytorch/configs.yml b16_in1k_pretrain_lamb"),
    "resnet50-pod16": dict(
        model="resnet50", split=(), mb=18, replicas=16, accumulation=57, proportions=(0.16,),
        state="on chip", optimizer="sgd",
        source="graphcore/examples vision/cnns/pytorch/train/configs.yml (ResNet-50, Bow Pod16)"),
}


def published_case(name, placed: bool, machine="bow"):
    """(model, inputs, optimizer, options) of a PUBLISHED entry: with
    `placed`, its placement and every published choice fixed; without, only
    what the planner does not search (precision, machine)."""
    cfg = PUBLISHED[name]
    split = cfg["split"] if placed else None
    with torch.device("meta"):
        torch.manual_seed(0)
        if cfg["model"] == "bert":
            model = BertPretraining(**cfg["sizes"], layers=sum(cfg["split"]), layers_per_ipu=split,
                                    recompute=True).half()
        elif cfg["model"] == "vit":
            model = ViT(layers_per_ipu=split, recompute=True, representation=True).half()
        else:
            model = EightBitInput(ResNet50(recompute_blocks=13)).half()
    mb = cfg["mb"]
    if cfg["model"] == "bert":
        inputs = (torch.randint(0, 30528, (mb, 128)), torch.randint(0, 30528, (mb, 20)))
    elif cfg["model"] == "vit":
        inputs = (torch.zeros(mb, 3, 224, 224, dtype=torch.half), torch.zeros(mb, dtype=torch.long))
    else:
        inputs = (torch.zeros(mb, 3, 224, 224, dtype=torch.uint8), torch.zeros(mb, dtype=torch.long))
    opt = (tilefx.optim.LAMB(model.parameters()) if cfg["optimizer"] == "lamb" else
           tilefx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    opts = tilefx.Options().setMachine(machine)
    opts.Precision.setPartialsType(torch.half)  # every entry's enable_half_partials / 16.16
    if placed:
        opts.replicationFactor(cfg["replicas"])
        opts.Training.gradientAccumulation(cfg["accumulation"])
        if cfg["split"]:  # a later stage on IPU 0 (BERT's tied head): AutoIncrement
            opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
        opts.setAvailableMemoryProportion({f"IPU{i}": p for i, p in enumerate(cfg["proportions"])})
        state = tilefx.TensorLocationSettings()
        state.useOnChipStorage(not cfg["state"].startswith("off chip"))
        if "sharded" in cfg["state"]:
            state.useReplicatedTensorSharding(True)
        opts.TensorLocations.setOptimizerLocation(state)
    return model, inputs, opt, opts


def compare(name, machine="bow", same_shape=False):
    """The published configuration and the planner's best, both costed by
    tilefx: (published candidate, planner candidates, CPU seconds).
    `same_shape`: the planner keeps the published replicas (so stages), and
    searches the rest."""
    cfg = PUBLISHED[name]
    ipus = cfg["replicas"] * max(1, len(cfg["split"]))
    gb = cfg["mb"] * cfg["accumulation"] * cfg["replicas"]
    cpu = time.process_time()
    model, inputs, opt, opts = published_case(name, True, machine)
    # the one published configuration, with PopTorch's pipeline schedule
    planner = _Planner(model, inputs, ipus, opt, gb, opts, cfg["mb"])
    planner._trace()
    pub = Candidate(max(1, len(cfg["split"])), cfg["replicas"], cfg["mb"], cfg["accumulation"], "FillDrain",
                    planner.fixed_state, min(cfg["proportions"]), planner.machine.name, base=opts)
    planner._cost(pub)
    model, inputs, opt, opts = published_case(name, False, machine)
    if same_shape:
        opts.replicationFactor(cfg["replicas"])
    cands = tilefx.plan(model, *inputs, ipus=ipus, optimizer=opt, global_batch=gb, options=opts, keep_all=True)
    return pub, cands, time.process_time() - cpu


def compile_reuse(repeats=2, layers=12):
    """CPU seconds of a BERT-Base-sized training compile (12 layers over 4
    IPUs as [0, 4, 4, 4], micro-batch 8, compile-only), with each op's cost
    computed afresh and each element size from its type's text ("without")
    and both kept ("with": the repeated layers' ops costed once), alternated in one process after a
    warm-up compile; the memo is emptied before each compile."""
    from tilefx.backend import costs

    def once(reuse):
        with torch.device("meta"):
            model = BertPretraining(d=768, heads=12, ffn=3072, layers=layers, layers_per_ipu=(0, 4, 4, 4),
                                    recompute=True).half()
        opts = tilefx.Options().useOfflineIpuTarget()
        opts.Training.gradientAccumulation(16)
        opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
        t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.LAMB(model.parameters()))
        costs._COSTS.clear()
        signature, itemsize = costs._signature, costs._itemsize
        if not reuse:  # as before the memo and the element-size cache
            costs._signature = lambda *a: None
            costs._itemsize = lambda v: costs._itemsize_of.__wrapped__(v.type.element_type)
        cpu = time.process_time()
        try:
            t.compile(torch.randint(0, 30528, (8 * 16, 128)), torch.randint(0, 30528, (8 * 16, 20)))
        finally:
            costs._signature, costs._itemsize = signature, itemsize
        return time.process_time() - cpu

    once(True)
    out = {"without": [], "with": []}
    for _ in range(repeats):
        out["without"].append(once(False))
        out["with"].append(once(True))
    return out


def time_makespan(stages=16, micro_batches=2048, calls=6):
    """CPU seconds of `Schedule.makespan` per call for random stage cycles
    (what ipu-auto-stage's cut refinement asks for, hundreds of times per
    configuration), per schedule: the first call (which prepares the step
    order) and the mean of the next `calls`."""
    import random

    from tilefx.backend.schedule import pipelined

    sip = {j: j for j in range(stages)}
    sip.update({2 * stages - 2 - j: j for j in range(stages - 1)})
    out = {}
    for name in ("FillDrain", "1F1B", "ZeroBubble"):
        sched = pipelined(dict(sip), stages, micro_batches, True, 1, name)
        times = []
        for _ in range(calls + 1):
            cyc = {s: random.uniform(1, 1e6) for s in range(2 * stages - 1)}
            cpu = time.process_time()
            sched.makespan(cyc, {s: 0.3 * c for s, c in cyc.items()})
            times.append(time.process_time() - cpu)
        out[name] = (times[0], sum(times[1:]) / calls)
    return out


def _traced_planners(layers, attribute, **sizes):
    """{True: planner, False: planner} of the BERT model on 16 mk2 IPUs with
    `attribute` (a `_Planner` switch) on and off, each traced; and each
    one's trace CPU seconds."""
    planners, trace = {}, {}
    for on in (True, False):
        model, inputs, opt = bert_factory(layers=layers, **sizes)
        p = _Planner(model, inputs, 16, opt, 16384, tilefx.Options().setMachine("mk2"), 8)
        setattr(p, attribute, on)
        cpu = time.process_time()
        p._trace()
        planners[on], trace[on] = p, time.process_time() - cpu
    return planners, trace


def _alternated(planners, configurations, rounds):
    """CPU seconds costing `configurations(planner)` with each of the two
    planners, alternated in one process (the order swapped each round), and
    each one's figures."""
    cpu = {True: 0.0, False: 0.0}
    figures: dict = {True: [], False: []}
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            p = planners[on]
            for c in configurations(p):
                start = time.process_time()
                p._cost(c)
                cpu[on] += time.process_time() - start
                figures[on].append((c.throughput, c.memory, c.bubble, c.reason, c.placement, c.stage_cycles))
    return cpu, figures


def time_reuse(layers, rounds=2, **sizes):
    """CPU seconds per configuration costing with the repeated layers' ops
    costed once (`_Planner.reuse_repeats`) and with every op of every copy
    costed, alternated in one process after a warm-up costing of each
    configuration by both; and whether every figure is the same."""
    from tilefx.planner.candidate import STATE_OFF_CHIP_SHARDED, STATE_ON_CHIP, STATE_SHARDED

    planners, trace = _traced_planners(layers, "reuse_repeats", **sizes)

    def configurations(p):
        opts = p.base
        return [Candidate(1, 16, 8, 128, "FillDrain", STATE_SHARDED, 0.6, "mk2", base=opts),
                Candidate(2, 8, 8, 256, "1F1B", STATE_ON_CHIP, 0.15, "mk2", base=opts),
                Candidate(4, 4, 8, 512, "FillDrain", STATE_OFF_CHIP_SHARDED, 0.15, "mk2", base=opts, tail=p.tail),
                Candidate(4, 4, 8, 512, "ZeroBubble", STATE_OFF_CHIP_SHARDED, 0.3, "mk2", base=opts),
                Candidate(8, 2, 8, 1024, "1F1B", STATE_OFF_CHIP_SHARDED, 0.15, "mk2", base=opts)]

    for p in planners.values():  # the op-cost memo and the matmul plans filled for both
        for c in configurations(p):
            p._cost(c)
    cpu, figures = _alternated(planners, configurations, rounds)
    n = len(figures[True])
    return {"pairs": len(planners[True].repeat_pairs), "trace": (trace[True], trace[False]),
            "reuse": cpu[True] / n, "full": cpu[False] / n, "costings": n,
            "same": figures[True] == figures[False]}


def time_shared(layers, rounds=2, **sizes):
    """CPU seconds per configuration costing with what the copies of the
    trace share (`_Planner.share_results`: ipu-auto-stage's vectors and
    split, training-step's @update, the refusal asked on the trace) and
    with each copy computing its own, alternated in one process; the
    shared results start empty (the first round fills them, as a plan
    does). Fourteen configurations of 4 x 4 (three schedules, two state
    locations, two proportions, the tail) and one refused 8 x 2; whether
    every figure is the same."""
    from tilefx.analysis.shared_results import Shared
    from tilefx.planner.candidate import STATE_OFF_CHIP_SHARDED, STATE_ON_CHIP

    planners, _ = _traced_planners(layers, "share_results", **sizes)
    for p in planners.values():
        p.shared = Shared()

    def configurations(p):
        opts = p.base
        out = [Candidate(4, 4, 8, 512, sched, state, prop, "mk2", base=opts)
               for sched in ("FillDrain", "1F1B", "ZeroBubble") for state in (STATE_ON_CHIP, STATE_OFF_CHIP_SHARDED)
               for prop in (0.6, 0.15)]
        return out + [Candidate(4, 4, 8, 512, "FillDrain", STATE_OFF_CHIP_SHARDED, 0.15, "mk2", base=opts, tail=p.tail),
                      Candidate(8, 2, 8, 1024, "1F1B", STATE_OFF_CHIP_SHARDED, 0.15, "mk2", base=opts)]

    cpu, figures = _alternated(planners, configurations, rounds)
    n = len(figures[True])
    return {"shared": cpu[True] / n, "own": cpu[False] / n, "costings": n, "same": figures[True] == figures[False],
            "computed": dict(planners[True].shared.computed)}


def time_plan(layers, ipus, global_batch, mb=8, machine="mk2", workers=None, **kw):
    """(wall seconds, CPU seconds of this process and its workers, candidates)."""
    model, inputs, opt = bert_factory(layers=layers, mb=mb, **kw)
    opts = tilefx.Options()
    opts.setMachine(machine)

    def cpu_time():  # this process's and its reaped workers'
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() + children.ru_utime + children.ru_stime

    start, cpu = time.perf_counter(), cpu_time()
    cands = tilefx.plan(model, *inputs, ipus=ipus, optimizer=opt, global_batch=global_batch, options=opts,
                        keep_all=True, workers=workers)
    return time.perf_counter() - start, cpu_time() - cpu, cands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["time", "published", "compile", "makespan", "reuse", "shared"])
    ap.add_argument("--case", default="all", help="a PUBLISHED entry, or all")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--ipus", type=int, default=16)
    ap.add_argument("--global-batch", type=int, default=65536)
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--machine", default="mk2")
    ap.add_argument("--base", action="store_true", help="BERT-Base sizes (d 768, 12 heads, FFN 3072)")
    ap.add_argument("--same-shape", action="store_true",
                    help="published: the planner keeps the published replicas and stages")
    ap.add_argument("--stages", type=int, default=16)
    ap.add_argument("--micro-batches", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=2, help="reuse, shared: alternations of the two costings")
    ap.add_argument("--workers", type=int, default=None, help="time: tilefx.plan's workers (default: the CPUs)")
    a = ap.parse_args()
    if a.what == "reuse":
        r = time_reuse(a.layers, a.rounds, **(dict(d=768, heads=12, ffn=3072) if a.base else {}))
        print(f"{a.layers} layers: {r['pairs']} ops paired; trace {r['trace'][0]:.1f} s with the pairing, "
              f"{r['trace'][1]:.1f} s without; per costing {r['reuse']:.3f} s with the reuse, {r['full']:.3f} s "
              f"without (ratio {r['reuse'] / r['full']:.3f}, {r['costings']} costings each); "
              f"the same figures: {r['same']}")
        return
    if a.what == "shared":
        r = time_shared(a.layers, a.rounds, **(dict(d=768, heads=12, ffn=3072) if a.base else {}))
        print(f"{a.layers} layers: per costing {r['shared']:.3f} s with the shared results, {r['own']:.3f} s "
              f"with each copy's own (ratio {r['shared'] / r['own']:.3f}, {r['costings']} costings each); "
              f"the same figures: {r['same']}; computed once per setting: {r['computed']}")
        return
    if a.what == "makespan":
        for name, (first, rest) in time_makespan(a.stages, a.micro_batches).items():
            print(f"{name}: {a.stages} stages x {a.micro_batches} micro-batches: first call {first:.3f} s, "
                  f"then {rest:.4f} s CPU per makespan")
        return
    if a.what == "compile":
        res = compile_reuse()
        for k, v in res.items():
            print(f"{k} the op-cost reuse: " + ", ".join(f"{x:.1f}" for x in v) + " s CPU")
        print(f"ratio (with / without): {sum(res['with']) / sum(res['without']):.2f}")
        return
    if a.what == "published":
        for name in ([a.case] if a.case != "all" else list(PUBLISHED)):
            pub, cands, cpu = compare(name, a.machine if a.machine != "mk2" else "bow", a.same_shape)
            cfg = PUBLISHED[name]
            print(f"== {name}: {cfg['source']}; {pub.ipus} IPUs, global batch {pub.global_batch} "
                  f"({cpu:.1f} s CPU for both)")
            print("published, costed by tilefx:")
            print(table([pub], 1))
            print(pub.explain())
            print("planner:")
            print(table(cands, 6))
            if cands and cands[0].fits:
                print(cands[0].explain())
            sys.stdout.flush()
        return
    sizes = dict(d=768, heads=12, ffn=3072) if a.base else {}
    seconds, cpu, cands = time_plan(a.layers, a.ipus, a.global_batch, a.mb, a.machine, a.workers, **sizes)
    fit = [c for c in cands if c.fits]
    print(f"{a.layers} layers, {a.ipus} IPUs, global batch {a.global_batch}: planned in {seconds:.1f} s "
          f"({cpu:.1f} s of CPU time, workers included), "
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
