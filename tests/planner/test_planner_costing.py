"""What the planner's costing of a configuration rests on: `ipu-auto-stage`
sees the recomputation the model asks for (the values it stashes are the
ones `ipu-recompute` keeps), and the costs it reuses across configurations
and repeated layers are the costs it would compute afresh."""

from collections import defaultdict

import pytest
import torch
from torch import nn
from xdsl.dialects import func

import tilefx
from tilefx.backend.machine import Machine
from tilefx.backend.profile import TimedStep
from tilefx.backend.schedule import WEIGHT_PART, Schedule, part_cycles
from tilefx.dialects.ipu import PlacementAttr
from tilefx.dialects.irutil import find_func, place
from tilefx.passes.auto_stage import _memory_vectors, _recomputation
from tilefx.passes.auto_stage_positions import _anchors
from tilefx.passes.recompute import recompute

MB, D, H, LAYERS = 4, 32, 128, 4


class Checkpointed(nn.Module):
    """Feed-forward layers with a recomputation checkpoint after each."""

    def __init__(self, checkpoints=True, d=D, h=H, layers=LAYERS):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))
                                    for _ in range(layers))
        self.checkpoints = checkpoints

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
            if self.checkpoints:
                x = tilefx.recomputationCheckpoint(x)
        return x, nn.functional.mse_loss(x, y)


def _backward(op) -> bool:
    return place(op, PlacementAttr()).is_backward


def _traced(model):
    torch.manual_seed(0)
    opts = tilefx.Options().useOfflineIpuTarget()
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    module = ex.trace_only(torch.randn(MB, D), torch.randn(MB, D))
    main = find_func(module, "main")
    return module, main, [o for o in main.body.block.ops if not isinstance(o, func.ReturnOp)]


def _forward_reads_of_backward(main):
    """(forward op index, result index) of each forward value a backward op reads."""
    fwd = [o for o in main.body.block.ops if not _backward(o)]
    index = {o: i for i, o in enumerate(fwd)}
    out = set()
    for o in main.body.block.ops:
        if _backward(o):
            for v in o.operands:
                if getattr(v, "op", None) in index:
                    out.add((index[v.op], v.index))
    return out


def test_auto_stage_stashes_what_recompute_keeps():
    """The forward values the backward reads once `ipu-recompute` has run
    are the kept values `_recomputation` predicts (the checkpoints), and the
    ops it recomputes are the ones the pass clones."""
    module, main, ops = _traced(Checkpointed())
    kept, recomputed = _recomputation(main, ops)
    fwd = [o for o in main.body.block.ops if not _backward(o)]
    index = {o: i for i, o in enumerate(fwd)}
    predicted = set()
    for o in ops:
        if _backward(o):
            for v in o.operands:
                if getattr(v, "op", None) in index:
                    for k in kept.get(v, (v,)):
                        predicted.add((index[k.op], k.index))
    after = module.clone()
    cloned = recompute(find_func(after, "main"))
    assert _forward_reads_of_backward(find_func(after, "main")) == predicted
    assert cloned == len(recomputed) > 0
    # the checkpoints, and scalar constants (which carry no placement)
    names = [fwd[i].name for i, _ in predicted]
    assert names.count("ipu.recomputation_checkpoint") == LAYERS
    assert set(names) <= {"ipu.recomputation_checkpoint", "aten.scalar_tensor"}


def test_auto_stage_stash_shrinks_to_the_checkpoints():
    """Per micro-batch, a checkpointed model stashes its LAYERS checkpoints
    (MB x D float32 each); without checkpoints every value the backward
    reads."""
    module, main, ops = _traced(Checkpointed())
    anchor, n = _anchors(ops)
    kept, _ = _recomputation(main, ops)
    saved = _memory_vectors(module, main, ops, anchor, n, True, kept=kept)[1]
    assert saved.sum() == LAYERS * MB * D * 4 + 4  # and the loss's 0-d scalar constant
    module, main, ops = _traced(Checkpointed(checkpoints=False))
    anchor, n = _anchors(ops)
    assert _recomputation(main, ops) == ({}, set())
    # each layer's GELU input and output (MB x H) and its output (MB x D)
    assert _memory_vectors(module, main, ops, anchor, n, True)[1].sum() == LAYERS * (2 * MB * H + MB * D) * 4 + 4


def test_checkpointed_model_fits_where_its_stash_would_not():
    """A pipeline whose stashed activations do not fit without recomputation
    (autoRecomputation None), nor with PopTorch's default recomputation of
    each stage from its inputs (a stage's recomputed activations for one
    micro-batch are over a tile too), fits with a checkpoint per layer:
    ipu-auto-stage finds a split, and the compiled model's profile agrees
    that every IPU holds its stage (the recompute pass runs after
    ipu-auto-stage, so the cut must foresee it)."""

    torch.manual_seed(0)
    d, h, mb = 256, 4096, 8192

    def compile_(checkpoints, recomputation=None):
        with torch.device("meta"):
            model = Checkpointed(checkpoints, d, h, layers=4)
        opts = tilefx.Options().useOfflineIpuTarget()
        opts.Training.gradientAccumulation(8)
        if recomputation is not None:
            opts._Popart.set("autoRecomputation", recomputation)
        opts.setExecutionStrategy(tilefx.PipelinedExecution.auto(2, schedule="1F1B"))
        t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
        t.compile(torch.randn(mb * 8, d), torch.randn(mb * 8, d))
        return t

    for recomputation in (0, None):
        with pytest.raises(tilefx.Error, match="no split into 2 stages"):
            compile_(False, recomputation)
    t = compile_(True)
    mem = t.profile.memory
    assert len(mem) == 2 and all(int(m.peak.max()) <= t.profile.machine.bytes_per_tile for m in mem.values())


def test_repeated_layers_are_costed_once(monkeypatch):
    """An op of a repeated layer is costed once: the same op of the other
    layers (and of every configuration the planner costs) reuses its cost,
    which is the cost computed afresh."""
    from tilefx.backend import costs
    from tilefx.backend.machine import machine

    module, main, ops = _traced(Checkpointed())
    mach = machine("mk2")
    fresh = [costs._op_cost(o, mach, costs.DEFAULT_PROPORTION) for o in ops]
    calls = []
    real = costs._op_cost
    monkeypatch.setattr(costs, "_op_cost", lambda op, m, p: calls.append(op) or real(op, m, p))
    monkeypatch.setattr(costs, "_COSTS", {})
    assert [costs.op_cost(o, mach) for o in ops] == fresh
    matmuls = sum(o.name in costs._PLANNED for o in ops)  # planned (and cached) by shape instead
    assert 0 < len(calls) - matmuls < (len(ops) - matmuls) / 2
    calls.clear()
    assert [costs.op_cost(o, mach) for o in ops] == fresh  # a second configuration of the model
    assert len(calls) == matmuls


def test_top_three_of_a_checkpointed_model_compile_and_fit():
    """The configurations proposed for a model with recomputation
    checkpoints (where ipu-auto-stage cuts foreseeing ipu-recompute) compile,
    fit every IPU and predict what their compiled profile predicts: a layer's
    weight gradients stay with its block (by data flow alone a bias gradient
    was anchored on the next IPU, 4.6% off the compiled throughput)."""
    import copy

    torch.manual_seed(0)
    model = Checkpointed()
    x, y = torch.randn(MB, D), torch.randn(MB, D)
    cands = tilefx.plan(model, x, y, ipus=4, global_batch=64,
                        optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    assert len(cands) >= 3 and any(c.stages > 1 for c in cands[:3])
    for c in cands[:3]:
        m = c.place(copy.deepcopy(model))
        t = tilefx.trainingModel(m, c.options.useOfflineIpuTarget(),
                                 optimizer=tilefx.optim.SGD(m.parameters(), lr=0.1))
        t.compile(torch.randn(c.global_batch, D), torch.randn(c.global_batch, D))  # raises when out of memory
        got = {i: int(mem.peak.max()) for i, mem in t.profile.memory.items()}
        assert got == c.memory
        assert c.global_batch / t.profile.seconds == pytest.approx(c.throughput, rel=1e-9)


def test_cut_refinement_walks_the_schedule_once_per_split(monkeypatch):
    """ipu-auto-stage's refinement asks for the schedule's makespan (a walk
    over every step of every micro-batch) at most once per split."""
    import numpy as np

    from tilefx.backend.schedule import Schedule
    from tilefx.passes.auto_stage import _refine

    asked = []
    real = Schedule.makespan
    monkeypatch.setattr(Schedule, "makespan", lambda self, per, *a: asked.append(tuple(sorted(per.items())))
                        or real(self, per, *a))
    n, S = 40, 4
    rng = np.random.default_rng(0)
    cycles = [rng.uniform(1, 10, n)] * S
    bwd = [c / 2 for c in cycles]
    cuts = _refine([0, 10, 20, 30, n], cycles, bwd, np.zeros((2, n)), list(range(S)), "1F1B", 64, True,
                   lambda k, i, j: i < j)
    assert cuts[0] == 0 and cuts[-1] == n and len(asked) > S
    assert len(asked) == len(set(asked))


def test_cut_refinement_never_moves_a_cut_past_the_graph():
    """A run of cuts moved together by a step may carry a cut past either end
    of the graph; the refinement drops that move before asking whether the
    stages allow it (the pass's check reads per-position arrays of n + 1
    entries, which a position past n overruns: BERT-Large planned on 16 IPUs
    with a re-cut's reserve took that path)."""
    import numpy as np

    from tilefx.passes.auto_stage import _refine

    n, S = 40, 4
    rng = np.random.default_rng(1)
    cycles = [rng.uniform(1, 10, n)] * S
    cycles[0][:4] = 200.0  # a heavy first stage: moving every cut right is tried at each step size
    bwd = [c / 2 for c in cycles]
    W = np.zeros(n + 1)  # what the pass's check indexes by position

    def ok(k, i, j):
        W[i], W[j]  # IndexError past n, as the pass's memory check
        return i < j

    cuts = _refine([0, 30, 34, 38, n], cycles, bwd, np.zeros((2, n)), list(range(S)), "FillDrain", 16, True, ok)
    assert cuts[0] == 0 and cuts[-1] == n and all(a < b for a, b in zip(cuts, cuts[1:]))


def _walked_makespan(sched, stage_cycles, weight_cycles):
    """Schedule.makespan's definition, step by step: each IPU runs its steps
    in (time step, stage) order, a step starts once its IPU is free and
    stage s-1 of its micro-batch (a W step: its own stage's B step) is done."""
    free, done, end = defaultdict(float), {}, 0.0
    for s in sorted(sched.steps, key=lambda s: (s.time, s.stage)):
        if s.kind != "compute":
            continue
        cyc = part_cycles(s, stage_cycles.get(s.stage, 0.0), weight_cycles.get(s.stage, 0.0))
        dep = (s.stage, s.micro_batch) if s.part == WEIGHT_PART else (s.stage - 1, s.micro_batch)
        start = max(free[s.ipu], done.get(dep, 0.0))
        free[s.ipu] = start + cyc
        if s.part != WEIGHT_PART:
            done[(s.stage, s.micro_batch)] = free[s.ipu]
        end = max(end, free[s.ipu])
    return end


@pytest.mark.parametrize("schedule", ["FillDrain", "1F1B", "Interleaved1F1B", "ZeroBubble"])
def test_makespan_equals_the_step_by_step_walk(schedule):
    """The makespan the planner and ipu-auto-stage ask for many times per
    schedule (its step order prepared once) is exactly the walk over the
    steps, for random stage and weight-gradient cycles, repeated calls and
    any micro-batch count."""
    import numpy as np

    from tilefx.backend.schedule import pipelined

    rng = np.random.default_rng(0)
    for ipus, virtual in ((1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (4, 2)):
        if virtual > 1 and schedule != "Interleaved1F1B":
            continue
        S = ipus * virtual
        sip = {j: j % ipus for j in range(S)}
        sip.update({2 * S - 2 - j: j % ipus for j in range(S - 1)})
        for M in (1, ipus, 2 * S - 1, 2 * S + 3, 37):
            if schedule == "Interleaved1F1B" and M % ipus:
                continue
            try:
                sched = pipelined(sip, S, M, True, 1, schedule)
            except tilefx.Error:  # a schedule's own rule on M (its message is tested elsewhere)
                continue
            for _ in range(3):
                cyc = {s: float(rng.uniform(1, 1e6)) for s in range(2 * S - 1)}
                w = {s: float(rng.uniform(0, 0.5)) * cyc[s] for s in range(2 * S - 1)}
                assert sched.makespan(cyc, w) == _walked_makespan(sched, cyc, w)
                assert sched.makespan(cyc) == _walked_makespan(sched, cyc, {})


def _walked_peak(sched, stashed):
    """The most bytes stashed at one time step, per IPU, by a sweep over
    each value's events for every micro-batch: taken at the first step of
    (s0, i), let go after the last step of (s1, i), releases sorted before
    takes at one step."""
    starts, ends = sched.compute_times()
    events = defaultdict(list)
    for ipu, nbytes, s0, s1 in stashed:
        for i in range(sched.micro_batches):
            if (s0, i) in starts and (s1, i) in ends:
                events[ipu] += [(starts[(s0, i)], nbytes), (ends[(s1, i)] + 1, -nbytes)]
    peaks = {}
    for ipu, evs in events.items():
        cur = best = 0
        for _, d in sorted(evs):
            cur += d
            best = max(best, cur)
        peaks[ipu] = best
    return peaks


def _schedules_to_check():
    from tilefx.backend import schedule as schedules

    for name in ("FillDrain", "1F1B", "Interleaved1F1B", "ZeroBubble"):
        for ipus, virtual in ((1, 1), (2, 1), (3, 1), (4, 1), (2, 2), (4, 2)):
            if virtual > 1 and name != "Interleaved1F1B":
                continue
            S = ipus * virtual
            sip = {j: j % ipus for j in range(S)}
            sip.update({2 * S - 2 - j: j % ipus for j in range(S - 1)})
            for M in (1, ipus, 2 * S - 1, 2 * S + 3, 37):
                try:
                    yield schedules.pipelined(sip, S, M, True, 1, name)
                except tilefx.Error:  # a schedule's own rule on M (its message is tested elsewhere)
                    continue
    yield schedules.sharded({0: 0, 1: 1, 2: 1, 3: 0}, 2, 5, True, 1)
    yield schedules.phased({0: 0, 1: 1, 2: 1}, {0: 0, 1: 1, 2: 2}, 2, 6, True, 1, parallel=False,
                           liveness="OffChipAfterEachPhase")


def test_stash_figures_equal_the_walk_over_every_micro_batch():
    """The stash the memory plan reports (Schedule.stash_peaks per IPU and
    in_flight per stage pair, counted over the schedule's steps at once) is
    exactly the sweep over every micro-batch's events, for every schedule,
    random values and stage pairs (including pairs a schedule never runs)."""
    import numpy as np

    rng = np.random.default_rng(1)
    checked = 0
    for sched in _schedules_to_check():
        stages = sched.num_stages
        for _ in range(4):
            stashed = []
            for _ in range(int(rng.integers(1, 12))):
                s0, s1 = sorted(int(x) for x in rng.integers(0, stages + 1, 2))
                stashed.append((int(rng.integers(0, 3)), int(rng.integers(0, 10**9)), s0, s1))
            assert sched.stash_peaks(stashed) == _walked_peak(sched, stashed)
            assert list(sched.stash_peaks(stashed)) == list(_walked_peak(sched, stashed))  # same IPU order
            for _, _, s0, s1 in stashed:
                assert sched.in_flight(s0, s1) == _walked_peak(sched, [(0, 1, s0, s1)]).get(0, 0)
            checked += 1
    assert checked > 100


def test_a_pipeline_shape_is_walked_once_and_its_schedules_are_independent(monkeypatch):
    """ipu-auto-stage, the profile and the planner's configurations of one
    shape ask for the same pipeline: its steps are built once, and each
    schedule gets its own list with equal steps and figures."""
    from tilefx.backend import schedule as schedules

    schedules._pipeline_steps.cache_clear()
    built = []
    real = schedules._zero_bubble_steps
    monkeypatch.setattr(schedules, "_zero_bubble_steps", lambda *a: built.append(a) or real(*a))
    sip = {0: 0, 1: 1, 2: 2, 3: 2, 4: 1}
    a = schedules.pipelined(sip, 3, 9, True, 1, "ZeroBubble")
    b = schedules.pipelined(dict(sip), 3, 9, True, 4, "ZeroBubble")
    assert len(built) == 1
    assert a.steps == b.steps and a.steps is not b.steps and b.repeats == 4
    cyc = {s: 10.0 + s for s in range(5)}
    assert a.makespan(cyc) == b.makespan(cyc) == _walked_makespan(b, cyc, {})
    assert a.in_flight(0, 4) == b.in_flight(0, 4) == 3
    b.steps.append(schedules.Step(b.length, 0, "compute", 0, 9, "fwd"))  # b's list only
    assert len(schedules.pipelined(sip, 3, 9, True, 1, "ZeroBubble").steps) == len(a.steps)
    assert b.makespan(cyc) == _walked_makespan(b, cyc, {}) > a.makespan(cyc)


def _walked_simulate(schedule: Schedule, stage_of, stage_cycles, copy_bytes, machine: Machine, host_in: int,
              host_out: int, num_ipus: int, load_bytes: dict[int, int] | None = None,
              store_bytes: dict[int, int] | None = None,
              step_moves: dict[int, tuple[int, int, int]] | None = None,
              phase_gathers: dict[int, int] | None = None,
              weight_cycles: dict[int, int] | None = None) -> tuple[list[TimedStep], dict[int, int]]:
    """profile._simulate step by step: every cycle count worked out at each step."""
    ipu_free: dict[int, int] = defaultdict(int)
    done: dict[tuple[int, int], int] = {}
    out: list[TimedStep] = []
    step_cycles: dict[int, int] = {}
    last_stage = max(stage_of, default=0)
    prev_end = 0  # sharded: one IPU at a time, each step after the previous one
    weight_cycles = weight_cycles or {}
    for st in sorted(schedule.steps, key=lambda s: (s.time, s.stage)):
        ipu = st.ipu
        if st.part == WEIGHT_PART:  # after its stage's input part, on the same IPU
            start = max(ipu_free[ipu], done.get((st.stage, st.micro_batch), 0))
            end = start + weight_cycles.get(st.stage, 0)
            out.append(TimedStep(ipu, start, end, "compute", st.stage, st.micro_batch, st.direction))
            ipu_free[ipu] = prev_end = end
            step_cycles[st.stage] = max(step_cycles.get(st.stage, 0), end - start)
            continue
        if st.kind in ("load", "store"):
            start = ipu_free[ipu]
            resident = (load_bytes if st.kind == "load" else store_bytes) or {}
            nbytes = copy_bytes.get(st.stage, 0) + resident.get(st.stage, 0)
            cyc = machine.link_cycles(max(nbytes, 1), machine.streaming_bytes_per_s)
            out.append(TimedStep(ipu, start, start + cyc, st.kind, st.stage, -1, st.direction))
            ipu_free[ipu] = start + cyc
            g = (phase_gathers or {}).get(st.stage, 0) if st.kind == "load" else 0
            if g:
                out.append(TimedStep(ipu, start + cyc, start + cyc + g, "allgather", st.stage, -1, st.direction))
                ipu_free[ipu] = start + cyc + g
            continue
        start = max(ipu_free[ipu], done.get((st.stage - 1, st.micro_batch), 0))
        if schedule.sequential:
            start = max(start, prev_end)
        begin = start
        if st.stage == 0 and host_in:
            out.append(TimedStep(ipu, start, start + host_in, "host", 0, st.micro_batch, "in"))
            start += host_in
        load, gather, store = (step_moves or {}).get(st.stage, (0, 0, 0))
        for kind, cyc in (("load", machine.link_cycles(load, machine.streaming_bytes_per_s)), ("allgather", gather)):
            if cyc:
                out.append(TimedStep(ipu, start, start + cyc, kind, st.stage, st.micro_batch, st.direction))
                start += cyc
        end = start + int(part_cycles(st, stage_cycles.get(st.stage, 0), weight_cycles.get(st.stage, 0)))
        out.append(TimedStep(ipu, start, end, "compute", st.stage, st.micro_batch, st.direction))
        if store:
            cyc = machine.link_cycles(store, machine.streaming_bytes_per_s)
            out.append(TimedStep(ipu, end, end + cyc, "store", st.stage, st.micro_batch, st.direction))
            end += cyc
        nxt = stage_of.get(st.stage + 1)
        if nxt is not None and nxt[0] != ipu and copy_bytes.get(st.stage + 1, 0):
            cyc = machine.link_cycles(copy_bytes[st.stage + 1], machine.ipu_link_bytes_per_s)
            out.append(TimedStep(ipu, end, end + cyc, "copy", st.stage, st.micro_batch, st.direction))
            end += cyc
        if st.stage == last_stage and host_out:
            out.append(TimedStep(ipu, end, end + host_out, "host", st.stage, st.micro_batch, "out"))
            end += host_out
        ipu_free[ipu] = end
        prev_end = end
        done[(st.stage, st.micro_batch)] = end
        step_cycles[st.stage] = max(step_cycles.get(st.stage, 0), end - begin)
    return out, step_cycles



def test_timeline_equals_the_step_by_step_walk():
    """The profile's timeline (each stage's cycles of every kind worked out
    once, not at each of its micro-batches' steps) is exactly the walk that
    works them out at every step: for every schedule, with host streams,
    streaming-memory moves, IPU-link copies and ZeroBubble's weight parts."""
    import numpy as np

    from tilefx.backend.machine import machine
    from tilefx.backend.profile import _simulate

    rng = np.random.default_rng(2)
    mach = machine("mk2")
    checked = 0
    for sched in _schedules_to_check():
        S = sched.num_stages
        ipu_of = {s.stage: s.ipu for s in sched.steps}
        stage_of = {st: (ipu_of.get(st, 0), "fwd") for st in range(S)}
        for _ in range(2):
            cyc = {st: int(rng.integers(1, 10**6)) for st in range(S)}
            weight = {st: int(rng.integers(0, c)) for st, c in cyc.items()}
            copies = {st: int(rng.integers(0, 2)) * int(rng.integers(1, 10**7)) for st in range(S)}
            moves = {st: tuple(int(rng.integers(0, 2)) * int(rng.integers(1, 10**6)) for _ in range(3))
                     for st in range(S) if rng.random() < 0.5}
            host = [int(rng.integers(0, 2)) * int(rng.integers(1, 10**5)) for _ in range(2)]
            loads = {st: int(rng.integers(0, 10**6)) for st in range(S)}
            gathers = {st: int(rng.integers(0, 10**4)) for st in range(S)}
            args = (sched, stage_of, cyc, copies, mach, host[0], host[1], max(ipu_of.values()) + 1,
                    loads, dict(loads), moves, gathers, weight)
            assert _simulate(*args) == _walked_simulate(*args)
            checked += 1
    assert checked > 50


def test_stage_count_whose_weights_alone_overflow_is_costed_once():
    """When one configuration's always-live weights and gradient accumulators
    already overflow its IPUs' tiles on average, no optimizer-state location,
    proportion or schedule of that stage count can fit: the planner stops
    costing them (a bound, checked here by costing the skipped ones), and
    what does fit ranks as before."""
    from tilefx.planner.candidate import Candidate
    from tilefx.planner.search import PROPORTIONS, _Planner

    with torch.device("meta"):
        torch.manual_seed(0)
        model = Checkpointed(d=2048, h=8192)  # 134M fp32 weights: with their accumulators > 1 IPU
    x, y = torch.zeros(MB, 2048), torch.zeros(MB, 2048)
    opts = tilefx.Options()
    planner = _Planner(model, (x, y), 4, tilefx.optim.SGD(model.parameters(), lr=0.1), 64, opts, MB)
    cands = planner.run(keep_all=True)
    one = [c for c in cands if c.stages == 1]
    assert len(one) == 1 and not one[0].fits and 1 in planner.hopeless
    assert "no configuration of 1 stage(s) fits" in one[0].reason
    assert one[0].held_bytes > one[0].tile_bytes
    for state in planner._states(4):  # the configurations it skipped: none fits
        for prop in PROPORTIONS:
            c = Candidate(1, 4, MB, 4, "FillDrain", state, prop, planner.machine.name, base=opts)
            planner._cost(c)
            assert not c.fits and c.held_bytes == one[0].held_bytes
    assert any(c.fits for c in cands)


def test_a_stage_input_is_stashed_by_the_stage_that_holds_it():
    """Under PopTorch's default recomputation of a pipeline (PopART's
    Pipeline), each stage holds its inputs on its own IPU (ipu-recompute's
    `receive_stage_inputs`): the last checkpoint of a stage is stashed by
    the stage that reads it, not by its maker. ipu-auto-stage's stash per
    stage (its micro-batches in flight x the bytes it keeps) is the
    profile's, IPU by IPU, for the split it chose (the last stage, whose
    backward follows its forward, stashes nothing)."""
    from tilefx.passes.auto_stage import _left, stash_depths

    torch.manual_seed(0)
    model = Checkpointed(layers=6)
    for i, layer in enumerate(model.layers):  # blocks without an IPU: cut between layers only
        tilefx.BeginBlock(layer, f"layer{i}")
    opts = tilefx.Options().useOfflineIpuTarget()
    opts.Training.gradientAccumulation(8)
    opts.setExecutionStrategy(tilefx.PipelinedExecution.auto(3))
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    t.compile(torch.randn(MB * 8, D), torch.randn(MB * 8, D))
    cuts = t.profile.auto_stage["cut_positions"]
    stash = [sum(x.nbytes for x in t.profile.memory[i].tensors if x.kind == "stash") for i in range(3)]

    module, main, ops = _traced(model)
    anchor, n = _anchors(ops)
    kept, _ = _recomputation(main, ops)
    inputs = {}
    saved = _memory_vectors(module, main, ops, anchor, n, True, kept=kept, stage_inputs=inputs)[1]
    depth = stash_depths([0, 1, 2], "FillDrain", 8, True)
    estimate = []
    for k, (i, j) in enumerate(zip([0] + cuts, cuts + [n])):
        estimate.append(depth[k] * (saved[i:j].sum() - _left(inputs["leaving"], i, j) + inputs["held"][i]))
        if k < 2:  # what the next stage holds: its input checkpoint, left by its maker
            assert _left(inputs["leaving"], i, j) == inputs["held"][j] == MB * D * 4
    assert estimate[:2] == stash[:2] and stash[2] == 0
