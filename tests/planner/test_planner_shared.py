"""What `ipu-auto-stage` derives from the traced ops alone (each op's
position, what recomputation keeps, each position's cycles at a proportion,
its weight, stash and crossing bytes at a state location), and
`ipu-training-step`'s @update, are computed once per setting for every
configuration the planner costs
(analysis/shared_results.py), not again on each copy of the trace; what the
planner finds is the same, to the last figure."""

import numpy as np
import pytest
import torch
from xdsl.dialects.builtin import ModuleOp

import tilefx
from tilefx.analysis.shared_results import Shared
from tilefx.passes import auto_stage
from tilefx.planner.candidate import STATE_OFF_CHIP_SHARDED, STATE_ON_CHIP, Candidate
from tilefx.planner.search import _Planner

from test_planner_costing import MB, Checkpointed
from test_planner_reuse import _planner
from test_planner_speed import _figures


@pytest.mark.parametrize("case", ["tied", "checkpointed", "widths"])
def test_shared_results_give_the_figures_of_each_copy_analysed(case):
    """Every configuration, fitting or not, in the same order with the same
    figures as when each copy computes them itself."""
    out = {}
    for share in (False, True):
        p = _planner(case, reuse=True)
        p.share_results = share
        out[share] = ([_figures(c) for c in p.run(keep_all=True)], p.costings, dict(p.shared.computed))
    assert out[True][:2] == out[False][:2]
    assert any(f[-1] == "" or f[9] for f in out[True][0])
    assert out[True][2] and not out[False][2]


def _counting(monkeypatch, name):
    calls = []
    real = getattr(auto_stage, name)
    monkeypatch.setattr(auto_stage, name, lambda *a, **k: calls.append(name) or real(*a, **k))
    return calls


def test_each_vector_is_computed_once_per_setting_not_per_configuration(monkeypatch):
    """Six configurations of one 4-stage split: three schedules, two
    accumulations, the optimizer state in two places, one proportion. The
    anchors are computed once, the cycles once (one proportion), the memory
    vectors once per state location, the recomputation (what they read) on
    the two copies where one of them was new; each copy computes all of them
    without the sharing."""
    anchors = _counting(monkeypatch, "_anchor_list")
    recomputation = _counting(monkeypatch, "_recomputation")
    memory = _counting(monkeypatch, "_memory_vectors")
    figures = {}
    full_counts = (0, 0, 0)  # each copy computing its own (the first pass of the loop)
    for share in (False, True):
        p = _planner("checkpointed", reuse=True)
        p.share_results = share
        p._trace()
        anchors.clear(), recomputation.clear(), memory.clear()
        configurations = [Candidate(4, 1, 8, acc, sched, state, 0.6, "mk2", base=p.base)
                          for sched, acc, state in [("FillDrain", 32, STATE_ON_CHIP), ("1F1B", 32, STATE_ON_CHIP),
                                                    ("ZeroBubble", 32, STATE_ON_CHIP), ("1F1B", 64, STATE_ON_CHIP),
                                                    ("1F1B", 32, STATE_OFF_CHIP_SHARDED),
                                                    ("FillDrain", 64, STATE_OFF_CHIP_SHARDED)]]
        for c in configurations:
            p._cost(c)
        figures[share] = [_figures(c) for c in configurations]
        counts = (len(anchors), len(recomputation), len(memory))
        if share:
            per_copy_recomputation = full_counts[1] // len(configurations)
            per_copy_memory = full_counts[2] // len(configurations)
            assert counts == (1, 2 * per_copy_recomputation, 2 * per_copy_memory)
            assert p.shared.computed["cycles"] == 1 and p.shared.computed["memory"] == 2
            # ipu-training-step's @update (the optimizer's, the same for every copy): built once
            assert p.shared.computed["update"] == 1
        else:
            full_counts = counts
            assert counts[0] == len(configurations)
    assert figures[True] == figures[False]
    assert any(f[10] for f in figures[True])  # memory per IPU: the profile ran


def test_shared_arrays_cannot_be_changed_by_a_reader():
    """A pass that changed a shared vector in place would change what the
    next copy reads: the arrays are read-only, so it fails instead."""
    shared = Shared()
    calls = []
    got = shared.get(("vectors", 1), lambda: calls.append(1) or (np.zeros(3), {"held": np.ones(2)}))
    assert shared.get(("vectors", 1), lambda: calls.append(1)) is got and calls == [1]
    with pytest.raises(ValueError):
        got[0][0] = 1.0
    with pytest.raises(ValueError):
        got[1]["held"] += 1
    assert shared.computed == {"vectors": 1}


def test_a_configuration_the_pass_refuses_is_never_copied(monkeypatch):
    """ipu-auto-stage is asked about each configuration on the trace itself
    before a copy is made: a refused one costs no copy of the traced IR,
    and the trace is left as it was (the next copies find the same)."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = Checkpointed(d=2048, h=8192)  # 2 stages: on chip no split fits, sharded one does
    x = torch.zeros(MB, 2048)
    p = _Planner(model, (x, x), 4, tilefx.optim.Adam(model.parameters(), lr=0.1), MB * 32, tilefx.Options(), MB)
    copies, costed, refused, traces = [], [], [], []
    clone, cost, refusal = ModuleOp.clone, p._cost, p._refusal
    monkeypatch.setattr(ModuleOp, "clone", lambda self, *a, **k: copies.append(self) or clone(self, *a, **k))

    def counted(c, reserve=None):
        traces.append((str(p.traced), dict(p.traced.attributes)))
        n = len(copies)
        cost(c, reserve)
        assert len(copies) - n == (0 if c.refused else 1)
        (refused if c.refused else costed).append(c)

    def asked(c):
        n = len(copies)
        e = refusal(c)
        assert len(copies) == n
        return e

    p._cost, p._refusal = counted, asked
    cands = p.run(keep_all=True)
    assert len(refused) >= 6 and len(costed) >= 6 and any(c.fits for c in cands)
    assert all(t == traces[0] for t in traces)
