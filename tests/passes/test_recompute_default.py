"""PopTorch's default recomputation: a training model pipelined over more
than one IPU recomputes each stage's forward in its backward from the
stage's inputs (PopART's autoRecomputation = Pipeline, which PopTorch sets
unless the user did); `opts._Popart.set("autoRecomputation", 0)` (None)
recomputes nothing. The numbers are PyTorch's either way; the profile keeps
less activation memory and runs more cycles."""

import copy

import pytest
import torch

import tilefx as poptorch
from tilefx.api.compile_config import compile_config
from tilefx.driver import CompileConfig, config_from_json
from tilefx.errors import Error
from tilefx.passes import PassOptionError
from tilefx.passes.auto_stage import AutoStagePass
from tilefx.passes.recompute import RecomputePass


class _TwoIpus(torch.nn.Module):
    """Four tanh layers, two per IPU, no checkpoints."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(4)])

    def forward(self, x, y):
        for i, layer in enumerate(self.layers):
            if i % 2 == 0:
                x = poptorch.BeginBlock(torch.nn.Identity(), f"ipu{i // 2}", ipu_id=i // 2)(x)
            x = torch.tanh(layer(x))
        return torch.nn.functional.mse_loss(x, y)


def _train(model, recomputation, x, y, steps=3):
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    if recomputation is not None:
        opts._Popart.set("autoRecomputation", recomputation)
    ex = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    losses = [ex(x, y) for _ in range(steps)]
    ex.copyWeightsToHost()
    return ex, losses


def test_pipelined_training_recomputes_each_stage_by_default_with_pytorchs_numbers():
    torch.manual_seed(0)
    x, y = torch.randn(64, 32), torch.randn(64, 32)
    plain = _TwoIpus()
    ref = copy.deepcopy(plain)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        ref(x, y).backward()
        opt.step()
    stats = {}
    for recomputation in (0, None, 3):
        model = copy.deepcopy(plain)
        ex, _ = _train(model, recomputation, x, y)
        for a, b in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        stash = sum(ex.profile.stash_bytes.values())
        graph = ex.ir("graph")
        stats[recomputation] = (stash, ex.profile.total_cycles, graph.count("aten.tanh"), graph.count("aten.addmm"))
    none, default, pipeline = stats[0], stats[None], stats[3]
    assert default == pipeline  # unset is Pipeline over two IPUs
    assert default[0] < none[0]  # IPU 0 stashes its input only
    assert default[1] > none[1]  # paid for with IPU 0's forward run again
    # IPU 0 recomputes its first layer (addmm, tanh) in its backward; its
    # second layer's output is the stage's output, copied to IPU 1 and kept;
    # the loss stage on IPU 1 recomputes nothing
    assert default[2] == none[2] + 1 and default[3] == none[3] + 1


def test_one_ipu_keeps_the_checkpoints_alone():
    """Not pipelined over several IPUs, unset recomputes from the model's
    checkpoints only (none here: nothing)."""
    torch.manual_seed(0)
    x, y = torch.randn(16, 32), torch.randn(16, 32)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32))

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x, y):
            return torch.nn.functional.mse_loss(self.m(x), y)

    graphs = {}
    for recomputation in (None, 0):
        ex = poptorch.trainingModel(Loss(), _opts(recomputation),
                                    optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
        ex(x, y)
        graphs[recomputation] = ex.ir("graph").count("aten.tanh")
    assert graphs[None] == graphs[0]


def _opts(recomputation):
    opts = poptorch.Options()
    if recomputation is not None:
        opts._Popart.set("autoRecomputation", recomputation)
    return opts


def test_the_option_reaches_the_compile_config():
    assert compile_config(_opts(None), training=True).auto_recomputation is None
    assert compile_config(_opts(3), training=True).auto_recomputation == 3
    assert compile_config(_opts(0), training=True).auto_recomputation == 0
    assert config_from_json(b'{"training": true, "auto_recomputation": 3}', "cfg.json").auto_recomputation == 3


@pytest.mark.parametrize("value", [1, 2, 4])
def test_recomputation_types_not_modelled_are_refused_for_training(value):
    with pytest.raises(Error, match=f"autoRecomputation {value} .*not modelled"):
        compile_config(_opts(value), training=True)
    assert compile_config(_opts(value), training=False).auto_recomputation == value  # inference recomputes nothing


@pytest.mark.parametrize("value", [5, -1, True, "Pipeline", 3.0])
def test_values_outside_popart_enum_are_refused(value):
    with pytest.raises(Error, match="auto_recomputation must be None or one of PopART's RecomputationType"):
        CompileConfig(training=True, auto_recomputation=value)
    with pytest.raises(Error, match="auto_recomputation"):
        compile_config(_opts(value), training=True)


@pytest.mark.parametrize("cls", [RecomputePass, AutoStagePass])
@pytest.mark.parametrize("value", [1, 2, 4, 7, True])
def test_pass_options_take_the_modelled_types_only(cls, value):
    """tilefx-opt's `auto-recomputation` option: -1 (unset), 0 or 3."""
    with pytest.raises(PassOptionError, match=f"{cls.name}: auto-recomputation must be -1"):
        cls(auto_recomputation=value)
