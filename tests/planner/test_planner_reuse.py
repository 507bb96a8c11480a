"""Identical repeated layers costed once: the planner pairs each op of a
repeated layer with the same op of the first identical layer when it traces
(analysis/repeated_layers.py), and `ipu-auto-stage` and the profile of every
configuration give the op its twin's cost instead of costing it again. What
the planner finds is the same, to the last figure, as with every op of every
copy costed."""

import pytest
import torch
from torch import nn
from xdsl.dialects.builtin import FloatAttr, f64

import tilefx
from tilefx.analysis import repeated_layers as repeats
from tilefx.backend import costs
from tilefx.backend.machine import machine
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.irutil import find_func
from tilefx.dialects.names import AVAILABLE_MEMORY_KEY
from tilefx.planner.candidate import STATE_OFF_CHIP_SHARDED, Candidate
from tilefx.planner.search import _Planner

from test_planner_costing import MB, Checkpointed
from test_planner_speed import _figures
from test_planner_tied import TiedLM, _batch


class Widths(nn.Module):
    """Residual feed-forward layers, one of them wider than the others."""

    def __init__(self, d=32, widths=(64, 64, 64, 96, 64, 64)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)) for h in widths)

    def forward(self, x, y):
        for layer in self.layers:
            x = x + layer(x)
        return x, nn.functional.mse_loss(x, y)


def _planner(case: str, reuse: bool) -> _Planner:
    torch.manual_seed(0)
    if case == "tied":  # the tail back on IPU 0, Mk1, AdamW
        model = TiedLM()
        p = _Planner(model, _batch(1, 0), 2, tilefx.optim.AdamW(model.parameters(), lr=1e-3), 8,
                     tilefx.Options().setMachine("mk1"), 1)
    elif case == "checkpointed":  # recomputation checkpoints, on the meta device, Adam
        with torch.device("meta"):
            model = Checkpointed(d=2048, h=8192)
        x = torch.zeros(MB, 2048)
        p = _Planner(model, (x, x), 4, tilefx.optim.Adam(model.parameters(), lr=0.1), MB * 32,
                     tilefx.Options(), MB)
    else:  # layers of two widths, half partials, 8 IPUs
        model = Widths()
        opts = tilefx.Options()
        opts.Precision.setPartialsType(torch.half)
        x = torch.randn(MB, 32)
        p = _Planner(model, (x, x), 8, tilefx.optim.SGD(model.parameters(), lr=0.1), MB * 64, opts, MB)
    p.reuse_repeats = reuse
    return p


@pytest.mark.parametrize("case", ["tied", "checkpointed", "widths"])
def test_reused_costing_equals_the_full_costing(case, monkeypatch):
    """Every configuration, fitting or not, with the same figures and in the
    same order as when every op of every copy is costed; and the reuse costs
    fewer ops."""
    calls = []
    real = repeats.op_cost
    monkeypatch.setattr(repeats, "op_cost", lambda *a: calls.append(a[0]) or real(*a))
    full_planner = _planner(case, reuse=False)
    full = full_planner.run(keep_all=True)
    full_calls = len(calls)
    calls.clear()
    planner = _planner(case, reuse=True)
    reused = planner.run(keep_all=True)
    assert planner.repeat_pairs and not full_planner.repeat_pairs
    assert [_figures(c) for c in reused] == [_figures(c) for c in full]
    assert any(c.fits for c in reused)
    assert planner.costings == full_planner.costings
    assert len(calls) < full_calls


def test_identical_layers_are_paired_and_a_different_one_is_not():
    """The wider layer's ops have no twin and are no twin; each pair is the
    same op, of the same types, in another block; no op reading a weight is
    paired (the graph passes decide again whether a weight's view crossing
    a stage is laid out for its user)."""
    p = _planner("widths", reuse=True)
    p._trace()
    ops = list(find_func(p.traced, "main").body.block.ops)
    assert p.repeat_pairs
    paired = {i for pair in p.repeat_pairs for i in pair}
    wide = {i for i, o in enumerate(ops) if PLACE_KEY in o.attributes and
            o.attributes[PLACE_KEY].block.data == "plan.unit3"}
    assert wide and not wide & paired
    for i, j in p.repeat_pairs:
        a, b = ops[i], ops[j]
        assert j < i
        assert a.attributes[PLACE_KEY].block != b.attributes[PLACE_KEY].block
        assert (a.name, [v.type for v in a.operands], [r.type for r in a.results]) == \
            (b.name, [v.type for v in b.operands], [r.type for r in b.results])
        assert not any(costs.is_resident(v) for v in a.operands)
    # the layers between the first (which reads the input) and the last (with
    # the loss) but the wide one: paired with the first of them in program
    # order, layer 1's forward, layer 4's backward
    units = {(ops[i].attributes[PLACE_KEY].block.data, ops[i].attributes[PLACE_KEY].is_backward,
              ops[j].attributes[PLACE_KEY].block.data) for i, j in p.repeat_pairs}
    assert units == {("plan.unit2", False, "plan.unit1"), ("plan.unit4", False, "plan.unit1"),
                     ("plan.unit1", True, "plan.unit4"), ("plan.unit2", True, "plan.unit4")}


def test_an_op_whose_attributes_changed_is_costed_again(monkeypatch):
    """A pass that gives an op another available memory proportion than its
    twin (ipu-available-memory, per IPU) makes it costed afresh."""
    p = _planner("checkpointed", reuse=True)
    p._trace()
    module = p.traced.clone()
    twins = repeats.twins_in(find_func(module, "main"), p.repeat_pairs)
    mach = machine("mk2")
    calls = []
    real = repeats.op_cost
    monkeypatch.setattr(repeats, "op_cost", lambda *a: calls.append(a[0]) or real(*a))
    (op, twin), (other, other_twin) = [(o, t) for o, t in twins.items() if o.name == "aten.mm"][:2]
    done: dict = {}
    first = repeats.op_cost_reusing(twin, mach, 0.6, twins, done)
    assert repeats.op_cost_reusing(op, mach, 0.6, twins, done) is first and calls == [twin]
    repeats.op_cost_reusing(other_twin, mach, 0.6, twins, done)
    other.attributes[AVAILABLE_MEMORY_KEY] = FloatAttr(0.05, f64)
    calls.clear()
    assert repeats.op_cost_reusing(other, mach, 0.6, twins, done) == costs.op_cost(other, mach, 0.6)
    assert calls[0] is other


def test_one_configuration_costs_each_repeated_op_once(monkeypatch):
    """One costing of a 4-stage split at one proportion: ipu-auto-stage and
    the profile each skip every paired op (its twin's cost is taken), and
    the figures are those of the full costing."""
    calls = []
    real = repeats.op_cost
    monkeypatch.setattr(repeats, "op_cost", lambda *a: calls.append(a[0]) or real(*a))
    out = {}
    for reuse in (False, True):
        p = _planner("checkpointed", reuse=reuse)
        p._trace()
        c = Candidate(4, 1, MB, 32, "1F1B", STATE_OFF_CHIP_SHARDED, 0.6, "mk2", base=p.base)
        calls.clear()
        p._cost(c)
        out[reuse] = (len(calls), _figures(c), len(p.repeat_pairs))
    assert out[True][1] == out[False][1] and out[True][1][10]  # the same figures, memory included
    assert out[False][0] - out[True][0] == 2 * out[True][2]
