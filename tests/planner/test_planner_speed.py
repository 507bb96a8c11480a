"""What makes the planner fast without changing what it finds: a split
`ipu-auto-stage` refuses is refused once for every configuration needing
as much memory or more (a bound resting on the monotonicity checked here),
and the costing copies of the traced IR are not verified again."""

import pytest
import torch
from xdsl.dialects.builtin import ModuleOp

import tilefx
from tilefx.backend.costs import plan_matmul
from tilefx.backend.locations import TensorLocation
from tilefx.backend.machine import machine
from tilefx.backend.memory_model import resident_share
from tilefx.passes.auto_stage import STATE_RANK, stash_depths
from tilefx.planner.candidate import STATES, Candidate
from tilefx.planner.search import _Planner

from test_planner_costing import MB, Checkpointed

PROPS = (0.6, 0.45, 0.3, 0.22, 0.15, 0.1, 0.05, 0.01)


@pytest.mark.parametrize("shape", [(1, 128, 1024, 4096), (1, 1024, 4096, 1024), (16, 128, 64, 128),
                                   (1, 8, 30528, 1024), (3, 500, 7000, 300), (1, 4096, 4096, 4096)])
@pytest.mark.parametrize("itemsize,resident", [(2, True), (2, False), (4, True)])
def test_matmul_temporary_never_grows_as_the_proportion_shrinks(shape, itemsize, resident):
    """The premise of the refusal bound: a matmul's planned temporary memory
    at a smaller available memory proportion is at most that at a larger one
    (the fastest plan within the smaller bound is within the larger one
    too, or the larger one's plan needs more than the smaller bound)."""
    for mach in (machine("mk1"), machine("mk2")):
        temps = [plan_matmul(*shape, itemsize, mach, p, resident).temp_bytes for p in PROPS]
        assert temps == sorted(temps, reverse=True), temps


def test_state_rank_orders_every_tensors_resident_bytes():
    """STATE_RANK: off chip (sharded or not) <= sharded on chip <= on chip,
    for every tensor size, as ipu-auto-stage counts optimizer state."""
    def loc(state):
        on_chip, sharded = Candidate(1, 1, 1, 1, "FillDrain", state, 0.6, "mk2").state_flags
        return STATE_RANK[(on_chip, sharded)], TensorLocation(on_chip=on_chip, sharded=sharded)

    for numel in (0, 1, 2, 3, 8191, 8192, 8193, 10 ** 6 + 1):
        for replicas in (1, 2, 8):
            shares = sorted((loc(s)[0], resident_share(loc(s)[1], 8 * numel, numel, replicas)) for s in STATES)
            assert [b for _, b in shares] == sorted(b for _, b in shares)


def test_stash_depths_of_the_planners_schedules_are_ordered():
    """1F1B stashes no more than FillDrain or ZeroBubble on every stage, so
    its refusal covers theirs."""
    for stages in (2, 4, 8):
        for acc in (2 * stages - 1, 64):
            one = stash_depths(list(range(stages)), "1F1B", acc, True)
            for other in ("FillDrain", "ZeroBubble"):
                assert all(a <= b for a, b in zip(one, stash_depths(list(range(stages)), other, acc, True)))


def _planner(prune: bool, monkeypatch=None):
    with torch.device("meta"):
        torch.manual_seed(0)
        model = Checkpointed(d=2048, h=8192)  # 2 stages: on chip no split fits, sharded one does
    x, y = torch.zeros(MB, 2048), torch.zeros(MB, 2048)
    p = _Planner(model, (x, y), 4, tilefx.optim.Adam(model.parameters(), lr=0.1), MB * 32, tilefx.Options(), MB)
    if not prune:  # every configuration costed, as without the bound
        monkeypatch.setattr(p, "_covered", lambda c: False)
        monkeypatch.setattr(p, "_probe", lambda c, floors: [])
    return p, p.run(keep_all=True)


def _figures(c):
    return (c.stages, c.replicas, c.accumulation, c.schedule, c.state, c.proportion, c.proportions, c.tail,
            c.reserve, c.throughput, c.memory, c.bubble, c.allreduce_share, c.stage_cycles, c.placement, c.reason)


def test_refused_splits_are_refused_once_and_the_ranking_is_unchanged(monkeypatch):
    full_planner, full = _planner(False, monkeypatch)
    planner, cands = _planner(True)
    # what fits, in order, to the last figure
    assert [_figures(c) for c in cands if c.fits] == [_figures(c) for c in full if c.fits]
    assert any(c.fits for c in cands)
    refused = [c for c in full if c.refused]
    assert len(refused) >= 6
    # every configuration the bound skipped is one the pass refuses
    def key(c):
        return (c.stages, c.accumulation, c.schedule, c.state, c.proportion, c.tail, tuple(c.reserve))

    kept = {key(c) for c in cands}
    skipped = [c for c in full if key(c) not in kept]
    assert skipped and all(c.refused for c in skipped)
    assert all(planner._covered(c) for c in skipped)
    assert planner.costings < full_planner.costings


def test_a_split_refused_everywhere_is_asked_about_once_more():
    """A 2-stage split of a model whose weights and gradient accumulators
    alone overflow two IPUs: refused on chip at 0.6 (FillDrain, the first
    schedule), the pass is asked about the least memory (off chip, 0.15,
    1F1B) next, and that refusal covers the split's other configurations."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = Checkpointed(d=4096, h=16384, layers=2)  # 268M fp32 weights
    x, y = torch.zeros(MB, 4096), torch.zeros(MB, 4096)
    p = _Planner(model, (x, y), 2, tilefx.optim.Adam(model.parameters(), lr=0.1), MB * 8, tilefx.Options(), MB)
    asked = []
    real = p._refusal
    p._refusal = lambda c: asked.append(c) or real(c)
    p._trace()
    rows = []
    for sched in p._schedules(2, 8):
        rows += p._first_that_fits(2, 1, 8, sched)
    assert [(c.schedule, c.state, c.proportion) for c in rows] == [
        ("FillDrain", "on chip", 0.6), ("1F1B", "off chip", 0.15)]
    assert all(c.refused and not c.fits for c in rows) and len(asked) == 1
    assert "(not costed)" in rows[-1].reason
    for sched in p._schedules(2, 8):  # the 18 configurations of the split: all covered
        for state in p._states(1):
            for prop in (0.6, 0.3, 0.15):
                c = Candidate(2, 1, MB, 8, sched, state, prop, p.machine.name, base=p.base)
                assert p._covered(c)
                if (sched, state, prop) == ("ZeroBubble", "on chip", 0.3):  # one checked by costing
                    p._cost(c)
                    assert c.refused


def _checkpointed_planner() -> _Planner:
    """A planner of `Checkpointed` on 2 IPUs, SGD, 8 micro-batches per update (not traced yet)."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = Checkpointed()
    return _Planner(model, (torch.zeros(MB, 32), torch.zeros(MB, 32)), 2,
                    tilefx.optim.SGD(model.parameters(), lr=0.1), MB * 8, tilefx.Options(), MB)


def test_costing_copies_are_not_verified_again(monkeypatch):
    """The trace is verified once; the copies the planner costs are not
    (they are never run; a configuration is verified when it compiles)."""
    calls = []
    real = ModuleOp.verify
    monkeypatch.setattr(ModuleOp, "verify", lambda self: calls.append(self) or real(self))
    planner = _checkpointed_planner()
    planner._trace()
    traced = len(calls)
    assert traced >= 1
    c = Candidate(2, 1, MB, 8, "1F1B", "on chip", 0.6, planner.machine.name, base=planner.base)
    planner._cost(c)
    assert c.fits and len(calls) == traced


def test_a_configuration_is_costed_with_the_collector_paused(monkeypatch):
    """As a compile (tilefx/gcpause.py): the collector does not walk the
    heap while a costing makes its objects, and is back on after."""
    import gc

    from tilefx import driver

    seen = []
    real = driver.profile_of
    monkeypatch.setattr(driver, "profile_of", lambda *a, **k: seen.append(gc.isenabled()) or real(*a, **k))
    planner = _checkpointed_planner()
    planner._trace()
    assert gc.isenabled()
    planner._cost(Candidate(2, 1, MB, 8, "1F1B", "on chip", 0.6, planner.machine.name, base=planner.base))
    assert seen == [False] and gc.isenabled()


def test_one_placement_attribute_per_placement():
    from tilefx.dialects.ipu import PlacementAttr

    a = PlacementAttr("bwd", "b1", 0, 2, 0)
    moved = a.with_(block="stage1", ipu=1)
    assert moved is a.with_(block="stage1", ipu=1)
    assert moved == PlacementAttr("bwd", "stage1", 1, 2, 0) and moved.is_backward


def test_update_attributes_are_made_once_per_value():
    """ipu-training-step's flags and hyperparameters: one attribute per
    value (each weight's update op carries them), 0.0 and -0.0 apart."""
    import math

    from tilefx.passes.training_step import _bool, _f64

    assert _f64(0.9) is _f64(0.9) and _f64(0.9).value.data == 0.9
    assert math.copysign(1.0, _f64(-0.0).value.data) == -1.0 and _f64(0.0) is not _f64(-0.0)
    assert math.isnan(_f64(float("nan")).value.data) and _f64(float("inf")).value.data == math.inf
    from xdsl.dialects.builtin import BoolAttr

    assert _bool(True) is _bool(True) and _bool(True) == BoolAttr.from_bool(True)
    assert _bool(False) == BoolAttr.from_bool(False) != _bool(True)


def test_forked_workers_find_what_one_process_finds(monkeypatch):
    """The stage counts costed by two forked processes: the same candidates,
    fitting or not, with the same figures and reasons, in the same order as
    one process costing them in turn (a model with a tied head, so the tail
    stage is searched too)."""
    from tilefx.planner import search
    from test_planner_tied import TiedLM, _batch

    in_this_process = []  # the groups costed here (a forked worker's record stays in the worker)
    real = search._Planner._group
    monkeypatch.setattr(search._Planner, "_group", lambda self, *g: in_this_process.append(g) or real(self, *g))
    out, here = {}, {}
    for workers in (1, 2):
        torch.manual_seed(0)
        model = TiedLM()
        opts = tilefx.Options().setMachine("mk1")
        cands = tilefx.plan(model, *_batch(1, 0), ipus=2, global_batch=8, options=opts, keep_all=True,
                            optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3), workers=workers)
        out[workers] = [_figures(c) + (c.fits, c.refused, c.held_bytes) for c in cands]
        here[workers] = len(in_this_process)
        in_this_process.clear()
        assert all(c.base is opts for c in cands)
    assert len({c[0] for c in out[1]}) >= 2 and any(c[7] for c in out[1])  # stage counts; a tail
    assert out[2] == out[1]
    assert here == {1: 2, 2: 0}  # both stage counts here with one worker, none with two


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "2"])
def test_workers_must_be_a_positive_int(workers):
    model = Checkpointed()
    with pytest.raises(tilefx.Error, match="workers must be a positive int"):
        tilefx.plan(model, torch.zeros(MB, 32), torch.zeros(MB, 32), ipus=2, workers=workers)
