"""`tilefx.plan`: the configurations it proposes compile, fit and predict
what the compiled model's own profile predicts; its options and code say the
same configuration; the user's options are constraints."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from tilefx.planner import table


class Layers(nn.Module):
    """Eight identical tanh(Linear) layers and a loss: the repeated layers the
    planner cuts between."""

    def __init__(self, d=64, n=8):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(n))

    def forward(self, x, y):
        x = self.inp(x)
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x, nn.functional.mse_loss(x, y)


MB, D = 4, 64


def _plan(**kw):
    torch.manual_seed(0)
    model = Layers()
    kw.setdefault("global_batch", 64)
    return model, tilefx.plan(model, torch.randn(MB, D), torch.randn(MB, D), ipus=4, **kw)


@pytest.fixture(scope="module")
def planned():
    return _plan(keep_all=True)


def test_plan_ranks_configurations_that_fit(planned):
    model, cands = planned
    fitting = [c for c in cands if c.fits]
    assert len(fitting) >= 3
    assert [c.throughput for c in fitting] == sorted((c.throughput for c in fitting), reverse=True)
    for c in fitting:
        assert c.stages * c.replicas == 4 and c.global_batch == 64
        assert max(c.memory.values()) <= c.tile_bytes
        assert c.throughput > 0 and 0 <= c.bubble < 1
    assert {c.schedule for c in fitting if c.stages > 1} >= {"FillDrain", "1F1B", "ZeroBubble"}
    # the model the planner traced carries no annotation afterwards
    assert all(getattr(m, "_tilefx_begin_block", None) is None for m in model.modules())
    text = table(cands)
    assert "ZeroBubble" in text and "limited by" in text
    assert "samples per weight update" in fitting[0].explain()


def test_top_three_compile_fit_and_match_their_prediction(planned):
    model, cands = planned
    for c in cands[:3]:
        m = c.place(copy.deepcopy(model))
        opts = c.options.useOfflineIpuTarget()
        t = tilefx.trainingModel(m, opts, optimizer=tilefx.optim.SGD(m.parameters(), lr=0.01))
        n = c.global_batch
        t.compile(torch.randn(n, D), torch.randn(n, D))  # raises if any IPU runs out of memory
        p = t.profile
        assert p.num_ipus == c.stages
        assert {i: int(mem.peak.max()) for i, mem in p.memory.items()} == c.memory
        assert c.global_batch / p.seconds == pytest.approx(c.throughput, rel=1e-9)
        if c.stages > 1:
            assert t.schedule.name == c.schedule


def test_options_and_code_round_trip(planned, tmp_path):
    """The Options calls of `.code`, read by the options-file grammar (PopTorch's
    loadFromFile syntax), give the candidate's `.options`."""
    _, cands = planned
    for c in cands[:3]:
        calls = [line.removeprefix("opts.") for line in c.code.splitlines() if line.startswith("opts.")]
        path = tmp_path / "opts.conf"
        path.write_text("\n".join(calls) + "\n")
        loaded = tilefx.Options()
        loaded.loadFromFile(str(path))
        want = c.options
        a, b = loaded.toDict(), want.toDict()
        sa, sb = a.pop("execution_strategy"), b.pop("execution_strategy")
        assert a == b
        assert repr(sa) == repr(sb) and getattr(sa, "schedule", None) == getattr(sb, "schedule", None)
        blocks = [line for line in c.code.splitlines() if line.startswith("poptorch.BeginBlock")]
        assert len(blocks) == c.stages - 1 == len(c.placement)


def test_user_options_are_constraints():
    opts = tilefx.Options().replicationFactor(2)
    opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    _, cands = _plan(options=opts)
    assert cands and all(c.replicas == 2 and c.stages == 2 and c.state == "off chip" for c in cands)


def test_plan_errors_are_clear():
    model = Layers()
    x = torch.randn(MB, D)
    with pytest.raises(tilefx.Error, match="ipus must be a positive int"):
        tilefx.plan(model, x, x, ipus=0)
    with pytest.raises(tilefx.Error, match="global_batch must be an int"):
        tilefx.plan(model, x, x, ipus=2, global_batch=2)


def test_command_prints_the_table_and_the_code(tmp_path, capsys):
    from tilefx.tools.plan import main

    script = tmp_path / "model.py"
    script.write_text(
        "import torch\n"
        "from torch import nn\n\n\n"
        "class Layers(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(4))\n\n"
        "    def forward(self, x, y):\n"
        "        for layer in self.layers:\n"
        "            x = torch.tanh(layer(x))\n"
        "        return x, nn.functional.mse_loss(x, y)\n\n\n"
        "def factory():\n"
        "    return Layers(), (torch.randn(2, 32), torch.randn(2, 32))\n")
    assert main([f"{script}:factory", "--ipus", "2", "--global-batch", "16"]) == 0
    out = capsys.readouterr().out
    assert "limited by" in out and "opts.replicationFactor(" in out and "planned in" in out
    # costed in this process alone: the same table
    assert main([f"{script}:factory", "--ipus", "2", "--global-batch", "16", "--workers", "1"]) == 0
    assert capsys.readouterr().out.split("planned in")[0] == out.split("planned in")[0]
    assert main([f"{script}:factory", "--ipus", "2", "--workers", "0"]) == 1
    assert "workers must be a positive int" in capsys.readouterr().err
    assert main([f"{script}:nothing", "--ipus", "2"]) == 1
    assert "has no function 'nothing'" in capsys.readouterr().err
    assert main([f"{tmp_path / 'missing.py'}:factory", "--ipus", "2"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_user_placement_and_proportions_are_kept():
    torch.manual_seed(0)
    model = Layers()
    tilefx.BeginBlock(model.layers[5], "late", ipu_id=1)
    opts = tilefx.Options()
    opts.setAvailableMemoryProportion({"IPU0": 0.2, "IPU1": 0.4})
    cands = tilefx.plan(model, torch.randn(MB, D), torch.randn(MB, D), ipus=4, global_batch=64, options=opts)
    assert cands and all(c.stages == 2 and c.replicas == 2 and not c.placement for c in cands)
    for c in cands:
        assert c.options.available_memory_proportion == {"IPU0": 0.2, "IPU1": 0.4}
        assert '{"IPU0": 0.2, "IPU1": 0.4}' in c.code and "BeginBlock" not in c.code
    # the user's block is still there, and no other
    assert getattr(model.layers[5], "_tilefx_begin_block", None) == ("late", 1)
    assert sum(getattr(m, "_tilefx_begin_block", None) is not None for m in model.modules()) == 1


class DeepCNN(nn.Module):
    """A stem, `n` repeated 1x1 Conv2d + ReLU layers and a classifier: many
    small ops, so the code of its ops is most of its tile memory."""

    def __init__(self, n, c=4):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.layers = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, c, 1), nn.ReLU()) for _ in range(n)])
        self.head = nn.Linear(c, 10)

    def forward(self, x, y):
        x = self.head(self.layers(torch.relu(self.stem(x))).mean((2, 3)))
        return x, nn.functional.cross_entropy(x, y)


def test_one_stage_replicated_configuration_is_costed_and_compiles():
    """One stage x N replicas (data parallel) is no pipeline: it is costed
    as the model compiles, without ipu-auto-stage's split (whose per-stage
    bound, every op's code at once, rejects this model although its
    compiled memory plan fills under a third of a tile)."""
    torch.manual_seed(0)
    model = DeepCNN(420)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    opts = tilefx.Options().replicationFactor(2)
    cands = tilefx.plan(model, x, y, ipus=2, global_batch=32, options=opts, keep_all=True)
    assert len(cands) == 1
    c = cands[0]
    assert c.fits, c.reason
    assert (c.stages, c.replicas, c.accumulation, c.placement) == (1, 2, 4, [])
    m = c.place(copy.deepcopy(model))
    t = tilefx.trainingModel(m, c.options.useOfflineIpuTarget(), optimizer=tilefx.optim.SGD(m.parameters(), lr=0.01))
    t.compile(torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,)))
    p = t.profile
    assert p.num_ipus == 1 and max(c.memory.values()) < c.tile_bytes // 3
    assert {i: int(mem.peak.max()) for i, mem in p.memory.items()} == c.memory
    assert c.global_batch / p.seconds == pytest.approx(c.throughput, rel=1e-9)


class BatchNormLayers(nn.Module):
    """Repeated Conv2d + BatchNorm2d + ReLU layers: each BatchNorm's running
    statistics are updated by forward ops that read only the module's
    buffers and feed no later op."""

    def __init__(self, n=4, c=8):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
                                      for _ in range(n)])
        self.head = nn.Linear(c, 10)

    def forward(self, x, y):
        x = self.head(self.layers(x).mean((2, 3)))
        return x, nn.functional.cross_entropy(x, y)


def test_batchnorm_running_statistics_do_not_stop_the_cuts():
    """The running-statistics updates sit at no position of their own; they
    must not stretch their layer's block (never cut inside) over the whole
    model, which left no split of two stages or more. They run with their
    layer, and the candidate compiles to its prediction."""
    torch.manual_seed(0)
    model = BatchNormLayers()
    x, y = torch.randn(4, 8, 8, 8), torch.randint(0, 10, (4,))
    cands = tilefx.plan(model, x, y, ipus=2, global_batch=32, keep_all=True)
    piped = [c for c in cands if c.stages == 2]
    assert piped and all(c.fits for c in piped), [c.reason for c in piped]
    c = piped[0]
    m = c.place(copy.deepcopy(model))
    t = tilefx.trainingModel(m, c.options, optimizer=tilefx.optim.SGD(m.parameters(), lr=0.01))
    t.compile(torch.randn(c.global_batch, 8, 8, 8), torch.randint(0, 10, (c.global_batch,)))
    assert {i: int(mem.peak.max()) for i, mem in t.profile.memory.items()} == c.memory
    assert c.global_batch / t.profile.seconds == pytest.approx(c.throughput, rel=1e-9)


def test_the_users_half_float_casting_is_costed_as_it_compiles():
    """FloatDowncastToHalf (float16 inputs cast the float32 layers they meet
    down): the planner runs ipu-autocast with the user's casting and policy,
    so the predicted throughput is the compiled one."""
    torch.manual_seed(0)
    model = Layers(n=4)
    x, y = torch.randn(MB, D).half(), torch.randn(MB, D).half()
    opts = tilefx.Options()
    opts.Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.FloatDowncastToHalf)
    c = tilefx.plan(model, x, y, ipus=1, global_batch=16, options=opts)[0]
    m = copy.deepcopy(model)
    t = tilefx.trainingModel(m, c.options.useOfflineIpuTarget(), optimizer=tilefx.optim.SGD(m.parameters(), lr=0.01))
    t.compile(torch.randn(16, D).half(), torch.randn(16, D).half())
    assert {i: int(mem.peak.max()) for i, mem in t.profile.memory.items()} == c.memory
    assert c.global_batch / t.profile.seconds == pytest.approx(c.throughput, rel=1e-9)
