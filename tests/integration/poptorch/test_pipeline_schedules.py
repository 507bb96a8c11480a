"""Pipeline schedules (FillDrain, 1F1B, Interleaved1F1B) and automatic stage
partitioning (`PipelinedExecution.auto`, the `ipu-auto-stage` pass): the
numbers never depend on the schedule or the split (checked against
PyTorch); the timeline, bubbles and stashed activations do, as the
schedules' theory says."""

import contextlib
import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend import schedule as sched_mod
from tilefx.api.options import ConfigFileError
from tilefx.backend.machine import MK2
from tilefx.passes.auto_stage import _partition
from models import BlockCNN, mnist_batches
from test_strategies import _opts, _train_and_compare


class Stack(nn.Module):
    """P blocks of n identical tanh(Linear(16, 16)) layers, block i on IPU i:
    equal stages whose cycles are the ops' fixed costs, not IPU-link copies."""

    def __init__(self, P=4, n=8, d=16):
        super().__init__()
        self.P, self.n = P, n
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(P * n))

    def forward(self, x, y=None):
        for i, layer in enumerate(self.layers):
            with tilefx.Block(f"L{i // self.n}", ipu_id=i // self.n):
                x = torch.tanh(layer(x))
        if y is None:
            return x
        with tilefx.Block(f"L{self.P - 1}", ipu_id=self.P - 1):
            loss = (x * y).sum()
        return x, loss


def _stack_trainer(schedule, M, P=4, mb=2, n=2):
    torch.manual_seed(0)
    model = Stack(P=P, n=n)
    opts = _opts(tilefx.PipelinedExecution(*[f"L{i}" for i in range(P)], schedule=schedule), G=M)
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    t.compile(torch.randn(mb * M, 16), torch.randn(mb * M, 16))
    return t


# -- numbers: every schedule and the automatic split train like PyTorch -------

SCHEDULE_CASES = {
    "FillDrain": lambda: tilefx.PipelinedExecution("B1", "B2", "B3", "B4"),
    "1F1B": lambda: tilefx.PipelinedExecution("B1", "B2", "B3", "B4", schedule="1F1B"),
    # two virtual stages on each of two IPUs: B1, B3 on IPU 0 and B2, B4 on IPU 1
    "Interleaved1F1B": lambda: tilefx.PipelinedExecution(
        *[tilefx.Stage(f"B{i + 1}").ipu(i % 2) for i in range(4)], schedule="Interleaved1F1B"),
    "auto": lambda: tilefx.PipelinedExecution.auto(4),
    "auto_interleaved": lambda: tilefx.PipelinedExecution.auto(2, schedule="Interleaved1F1B"),
}


@pytest.mark.parametrize("case", SCHEDULE_CASES)
def test_schedule_and_split_train_like_pytorch(case):
    torch.manual_seed(0)
    trainer = _train_and_compare(BlockCNN(), _opts(SCHEDULE_CASES[case](), G=8))
    s = trainer.schedule
    assert s.name == {"auto": "FillDrain", "auto_interleaved": "Interleaved1F1B"}.get(case, case)
    assert trainer.profile.summary()["schedule"] == s.name
    # every (stage, micro-batch) runs once, after the stage before it
    seen = {(st.stage, st.micro_batch): st.time for st in s.steps}
    assert len(seen) == len(s.steps) == s.num_stages * 8
    assert all(t > seen[(k - 1, i)] for (k, i), t in seen.items() if k > 0)


def test_auto_split_respects_user_placements_and_reports_the_cuts():
    torch.manual_seed(0)
    # B1..B3 without an IPU (never cut inside), B4 pinned to IPU 3
    trainer = _train_and_compare(BlockCNN(ipus=(None, None, None, 3)),
                                 _opts(tilefx.PipelinedExecution.auto(4), G=8))
    report = trainer.profile.auto_stage
    assert report["num_ipus"] == 4 and report["stage_ipus"] == [0, 1, 2, 3]
    assert len(report["cuts"]) == 3 and len(report["stage_cycles"]) == 4
    assert all(c > 0 for c in report["stage_cycles"]) and all(b > 0 for b in report["stage_bytes"])
    # the blocks are whole: one block per stage, the loss block on IPU 3
    assert "ipu-auto-stage: 4 stages over 4 IPUs" in trainer.profile.table()
    ir = trainer.ir("graph")
    assert 'aten.sum.dim_IntList' in ir
    loss_line = next(line for line in ir.splitlines() if "aten._log_softmax " in line)
    assert "ipu = 3" in loss_line


def test_auto_split_of_an_inference_model_equals_pytorch():
    torch.manual_seed(0)
    model = Stack(P=2, n=3).eval()
    x = torch.randn(8, 16)
    tilefx.removeBlocks(model)
    inf = tilefx.inferenceModel(copy.deepcopy(model), tilefx.Options().deviceIterations(4)
                                .setExecutionStrategy(tilefx.PipelinedExecution.auto(2)))
    torch.testing.assert_close(inf(x), model(x), rtol=1e-5, atol=1e-6)
    assert {st.ipu for st in inf.schedule.steps} == {0, 1}


def test_dynamic_program_finds_the_best_cuts():
    """The pass's dynamic program against a search over every cut placement."""
    rng = np.random.default_rng(0)
    n, S = 9, 3
    for trial in range(20):
        cyc = rng.integers(1, 100, n).astype(float)
        link = rng.integers(0, 30, n).astype(float)
        weights = rng.integers(0, 4, n).astype(float) * 1e8 if trial % 2 else np.zeros(n)
        zeros = np.zeros(n)
        pinned = np.full(n, -1)
        if trial % 3 == 0:
            pinned[n - 1] = S - 1
        cuts, report, _, _ = _partition([cyc] * S, link, weights, [zeros] * S, zeros, zeros, [1] * S,
                                           list(range(S)), pinned, np.zeros(n + 1, dtype=bool), True, MK2, 1)
        stage_cyc, _ = report(cuts)
        best = np.inf
        for c in itertools.combinations(range(1, n), S - 1):
            b = (0, *c, n)
            costs = [cyc[i:j].sum() + (link[j] if j < n else 0) + (link[i] if i else 0)
                     for i, j in zip(b[:-1], b[1:])]
            mem = [weights[i:j].sum() / MK2.tiles for i, j in zip(b[:-1], b[1:])]
            if max(mem) <= MK2.bytes_per_tile:
                best = min(best, max(costs))
        assert max(stage_cyc) == pytest.approx(best)


# -- bubbles, stash and timelines ---------------------------------------------

@pytest.mark.parametrize("M", [8, 32])
def test_fill_drain_bubble_fraction_matches_theory(M):
    """Equal stages: the share of idle IPU time is (P-1)/(M+P-1)."""
    P = 4
    torch.manual_seed(0)
    opts = tilefx.Options().deviceIterations(M).setExecutionStrategy(
        tilefx.PipelinedExecution(*[f"L{i}" for i in range(P)]))
    inf = tilefx.inferenceModel(Stack(P=P, n=8), opts)
    inf.compile(torch.randn(4 * M, 16))
    assert len(set(inf.profile.stage_cycles.values())) == 1  # the stages are equal
    expected = (P - 1) / (M + P - 1)
    assert inf.profile.bubble_fraction() == pytest.approx(expected, rel=0.05)
    assert inf.profile.summary()["bubble_fraction"] == inf.profile.bubble_fraction()


def test_one_f_one_b_stash_is_bounded_by_the_stages_not_the_micro_batches():
    P = 4
    stash = {(s, M): _stack_trainer(s, M, P=P, mb=1, n=1).profile.stash_bytes
             for s, M in (("FillDrain", 8), ("1F1B", 8), ("1F1B", 32))}
    assert stash["1F1B", 8] == stash["1F1B", 32]  # independent of the accumulation
    # 1F1B keeps P-k micro-batches on IPU k, fill-drain 2(P-k)-1: per micro-batch
    # IPU 0 stashes the same values, so the ratio is P / (2P-1)
    assert stash["1F1B", 8][0] * (2 * P - 1) == stash["FillDrain", 8][0] * P
    assert all(stash["1F1B", 8][k] <= stash["FillDrain", 8][k] for k in range(P))


def test_schedule_in_flight_counts():
    F = 4
    stage_ipu = {j: (j if j < F else 2 * F - 2 - j) for j in range(2 * F - 1)}
    for M in (8, 32):
        fd = sched_mod.pipelined(stage_ipu, F, M, True, 1, "FillDrain")
        ofob = sched_mod.pipelined(stage_ipu, F, M, True, 1, "1F1B")
        assert [fd.in_flight(k, 2 * F - 2 - k) for k in range(F)] == [7, 5, 3, 1]
        assert [ofob.in_flight(k, 2 * F - 2 - k) for k in range(F)] == [4, 3, 2, 1]
        # 1F1B on IPU k: P-1-k warm-up forwards, then alternating, then the drain
        ipu0 = [(st.stage, st.micro_batch) for st in ofob.per_ipu()[0]]
        assert ipu0[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (6, 0)]
    # interleaved: 8 virtual stages over 4 IPUs, micro-batches in groups of 4
    F = 8
    stage_ipu = {j: j % 4 for j in range(F)} | {2 * F - 2 - j: j % 4 for j in range(F - 1)}
    inter = sched_mod.pipelined(stage_ipu, F, 8, True, 1, "Interleaved1F1B")
    assert len(inter.steps) == (2 * F - 1) * 8
    first = [(st.stage, st.micro_batch) for st in inter.per_ipu()[0]][:8]
    assert first == [(0, 0), (0, 1), (0, 2), (0, 3), (4, 0), (4, 1), (4, 2), (4, 3)]


def test_interleaved_has_fewer_bubbles_than_one_stage_per_ipu():
    torch.manual_seed(0)
    res = {}
    for name, strategy in (("Interleaved1F1B", tilefx.PipelinedExecution(
                               *[tilefx.Stage(f"L{i}").ipu(i % 2) for i in range(4)],
                               schedule="Interleaved1F1B")),
                           ("two", tilefx.PipelinedExecution(tilefx.Stage("L0", "L1").ipu(0),
                                                             tilefx.Stage("L2", "L3").ipu(1),
                                                             schedule="1F1B"))):
        model = Stack(P=4, n=2)
        t = tilefx.trainingModel(model, _opts(strategy, G=8),
                                 optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
        t.compile(torch.randn(16, 16), torch.randn(16, 16))
        res[name] = t.profile.bubble_fraction()
    # the same model on two IPUs: two virtual stages per IPU shorten the fill and flush
    assert res["Interleaved1F1B"] < res["two"]


def test_sharded_inference_is_timed_one_ipu_at_a_time():
    """Sharded inference is costed as sharded, not with the pipelined cycle count."""
    torch.manual_seed(0)
    model = BlockCNN()

    class Infer(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, torch.zeros(x.shape[0], dtype=torch.int64))[0]

    x = torch.randn(20, 1, 28, 28)
    cycles = {}
    for name, strategy in (("pipelined", tilefx.PipelinedExecution("B1", "B2", "B3", "B4")),
                           ("sharded", tilefx.ShardedExecution("B1", "B2", "B3", "B4"))):
        inf = tilefx.inferenceModel(Infer(model), tilefx.Options().deviceIterations(10)
                                    .setExecutionStrategy(strategy))
        inf(x)
        cycles[name] = inf.profile.total_cycles
        if name == "sharded":
            steps = sorted((s for s in inf.profile.timeline), key=lambda s: s.start)
            for a, b in zip(steps, steps[1:]):  # never two IPUs at once
                assert b.start >= a.end or a.ipu == b.ipu
            per_mb = sum(inf.profile.step_cycles.values())
            assert cycles[name] == 10 * per_mb
    assert cycles["sharded"] > cycles["pipelined"]


# -- bad input ------------------------------------------------------------------

def test_schedule_errors_are_clear():
    with pytest.raises(tilefx.Error, match="unknown schedule 'GPipe'"):
        tilefx.PipelinedExecution("B1", "B2", schedule="GPipe")
    with pytest.raises(tilefx.Error, match="positive number of IPUs"):
        tilefx.PipelinedExecution.auto(0)
    with pytest.raises(tilefx.Error, match="virtual_stages=2 needs schedule='Interleaved1F1B'"):
        tilefx.PipelinedExecution.auto(2, virtual_stages=2)
    torch.manual_seed(0)
    x, y = mnist_batches(1, 8)[0]
    # 1F1B with two forward stages on one IPU
    revisit = tilefx.PipelinedExecution(*[tilefx.Stage(f"B{i + 1}").ipu(i % 2) for i in range(4)],
                                        schedule="1F1B")
    t = tilefx.trainingModel(BlockCNN(), _opts(revisit, G=8))
    with pytest.raises(tilefx.Error, match="use schedule='Interleaved1F1B'"):
        t.compile(x, y)
    inter = tilefx.PipelinedExecution(*[tilefx.Stage(f"B{i + 1}").ipu(i % 2) for i in range(4)],
                                      schedule="Interleaved1F1B")
    t = tilefx.trainingModel(BlockCNN(), _opts(inter, G=7))
    with pytest.raises(tilefx.Error, match=r"multiple of the number of IPUs \(2\)"):
        t.compile(*mnist_batches(1, 14)[0])


def test_options_file_sets_the_schedule(tmp_path):
    """An options file chooses the schedule as the constructor does, and a
    misspelt one is the file's error at its line and column."""
    good = tmp_path / "good.conf"
    good.write_text('setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement, '
                    'schedule="1F1B"))\n')
    opts = tilefx.Options()
    opts.loadFromFile(str(good))
    assert opts.execution_strategy.schedule == "1F1B"
    bad = tmp_path / "bad.conf"
    bad.write_text('setExecutionStrategy(poptorch.PipelinedExecution(schedule="OneFOneB"))\n')
    with pytest.raises(ConfigFileError, match=r"line 1, column \d+.*unknown schedule 'OneFOneB'"):
        tilefx.Options().loadFromFile(str(bad))


def test_auto_stage_counts_the_working_activations_at_each_position():
    """ipu-auto-stage's memory per position holds the forward values live
    while it runs (from their maker to their last forward reader), beside
    its largest temporary: a 4 x 4096 activation made by the first matmul
    (position 0) is read by the ReLU (1), whose output the second matmul (2)
    reads. In training the ReLU output is read by the backward, so it is
    counted once, stashed, not as working memory."""
    from xdsl.dialects import func

    from tilefx.dialects.irutil import find_func
    from tilefx.passes.auto_stage import _memory_vectors
    from tilefx.passes.auto_stage_positions import _anchors

    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(64, 4096), nn.Linear(4096, 8)

        def forward(self, x, y=None):
            out = self.b(torch.relu(self.a(x)))
            return out if y is None else (out, nn.functional.mse_loss(out, y))

    act = 4 * 4096 * 4
    for training in (False, True):
        model = Wide()
        if training:
            ex = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
            ex.compile(torch.randn(4, 64), torch.randn(4, 8))
        else:
            ex = tilefx.inferenceModel(model)
            ex.compile(torch.randn(4, 64))
        module = ex._program.import_module
        main = find_func(module, "main")
        ops = [o for o in main.body.block.ops if not isinstance(o, func.ReturnOp)]
        anchor, n = _anchors(ops)
        *_, working = _memory_vectors(module, main, ops, anchor, n, training)
        assert list(working[:3]) == ([act, 2 * act, act] if not training else [act, act, 0])


# -- ZeroBubble (ZB-H1, Qi et al., ICLR 2024) -----------------------------------

def test_zero_bubble_trains_like_pytorch():
    torch.manual_seed(0)
    strategy = tilefx.PipelinedExecution("B1", "B2", "B3", "B4", schedule="ZeroBubble")
    trainer = _train_and_compare(BlockCNN(), _opts(strategy, G=8))
    s = trainer.schedule
    assert s.name == "ZeroBubble" and trainer.profile.summary()["schedule"] == "ZeroBubble"
    # every backward stage runs in two parts, its input gradient before its weight gradient
    parts = {}
    for st in s.steps:
        parts.setdefault((st.stage, st.micro_batch), []).append((st.time, st.part))
    backward = [k for k in parts if k[0] >= 3]
    assert backward and all([p for _, p in sorted(v)] == ["input", "weight"]
                            for k, v in parts.items() if k[0] >= 3)
    assert all(v == [(v[0][0], "")] for k, v in parts.items() if k[0] < 3)


def test_zero_bubble_has_less_bubble_than_one_f_one_b_at_the_same_accumulation():
    P = 4
    res = {name: _stack_trainer(name, 8, P=P, mb=1, n=2).profile for name in ("1F1B", "ZeroBubble")}
    zb, ob = res["ZeroBubble"], res["1F1B"]
    assert zb.bubble_fraction() < ob.bubble_fraction()
    assert zb.total_cycles < ob.total_cycles
    # the weight steps take the cycles of the weight-gradient ops: the same work as 1F1B's
    busy = lambda p: sum(t.end - t.start for t in p.timeline if t.kind == "compute")
    assert busy(zb) == busy(ob)
    assert "ZeroBubble schedule: bubble fraction" in zb.table()
    # the first IPU keeps 1F1B's P micro-batches; later IPUs keep up to P too
    # (1F1B keeps P-k there), the price of deferring their weight gradients
    assert zb.stash_bytes[0] == ob.stash_bytes[0]
    assert all(zb.stash_bytes[k] >= ob.stash_bytes[k] for k in range(1, P))


def test_zero_bubble_order_and_unit_makespan():
    """With the paper's unit costs (forward, input and weight gradient one
    unit each), ZB-H1 ends before 1F1B, whose backward is both gradients:
    the drain's idle steps run weight gradients."""
    F, M = 4, 8
    stage_ipu = {j: (j if j < F else 2 * F - 2 - j) for j in range(2 * F - 1)}
    zb = sched_mod.pipelined(stage_ipu, F, M, True, 1, "ZeroBubble")
    ob = sched_mod.pipelined(stage_ipu, F, M, True, 1, "1F1B")
    cycles = {s: 1.0 if s < F - 1 else (3.0 if s == F - 1 else 2.0) for s in range(2 * F - 1)}
    weight = {s: 1.0 for s in range(F - 1, 2 * F - 1)}
    assert ob.makespan(cycles) == 3 * M + 3 * (F - 1)
    assert zb.makespan(cycles, weight) < ob.makespan(cycles)
    assert zb.makespan(cycles, weight) >= 3 * M  # never faster than the work
    # IPU 0: 1F1B's warm-up, then a weight gradient only where no forward may start
    ipu0 = [("W" if st.part == "weight" else "B" if st.part else "F") + str(st.micro_batch)
            for st in zb.per_ipu()[0]]
    assert ipu0[:6] == ["F0", "F1", "F2", "F3", "B0", "W0"]  # P await W0: no forward may start
    assert [zb.in_flight(k, 2 * F - 2 - k) for k in range(F)] == [F] * F
    # one forward stage per IPU, as 1F1B
    inter = {j: j % 2 for j in range(F)} | {2 * F - 2 - j: j % 2 for j in range(F - 1)}
    with pytest.raises(tilefx.Error, match="ZeroBubble runs one forward stage per IPU"):
        sched_mod.pipelined(inter, F, M, True, 1, "ZeroBubble")


def test_zero_bubble_weight_part_holds_the_weight_gradients():
    from tilefx.backend.schedule import weight_gradient_ops
    from tilefx.dialects.ipu import StageOp
    from tilefx.dialects.irutil import find_func

    t = _stack_trainer("ZeroBubble", 4, P=2, mb=1, n=1)
    main = find_func(t._program.module, "main")
    stages = {op.stage.value.data: op for op in main.body.block.ops if isinstance(op, StageOp)}
    last = weight_gradient_ops(stages[1])  # forward, loss and the input gradient stay out
    names = sorted(o.name for o in last)
    assert names.count("ipu.accumulate") == 2 and "aten.mm" in names and "aten.tanh" not in names
    # the input gradient's product (the next stage waits for it) is not a weight op
    mms = [o for o in stages[1].body.block.ops if o.name == "aten.mm"]
    assert sum(o in last for o in mms) == 1


def test_zero_bubble_runs_every_part_once_for_any_depth_and_accumulation():
    for F in range(2, 8):
        stage_ipu = {j: (j if j < F else 2 * F - 2 - j) for j in range(2 * F - 1)}
        for M in (1, 2, F - 1, F, 3 * F + 1):
            z = sched_mod.pipelined(stage_ipu, F, M, True, 1, "ZeroBubble")
            parts = [(s.stage, s.micro_batch, s.part) for s in z.steps]
            assert len(set(parts)) == len(parts) == M * (3 * F - 1)
            # a micro-batch's weight part never comes before its input part
            when = {p: s.time for p, s in zip(parts, z.steps)}
            assert all(when[(st, i, "weight")] > when[(st, i, "input")] for st, i, part in parts
                       if part == "weight")


# -- automatic mixed precision over pipeline stages ---------------------------

class _ConvHead(nn.Module):
    """A convolution on one stage, a linear layer and the loss on the next
    (Blocks on IPUs 0 and 1 when `blocks`, else cut by PipelinedExecution.auto)."""

    def __init__(self, blocks: bool):
        super().__init__()
        self.blocks = blocks
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, y):
        with tilefx.Block("conv", ipu_id=0) if self.blocks else contextlib.nullcontext():
            h = torch.relu(self.conv(x))
        with tilefx.Block("head", ipu_id=1) if self.blocks else contextlib.nullcontext():
            out = self.fc(h.flatten(1))
            loss = self.loss(out, y)
        return out, loss


@pytest.mark.parametrize("placement", ["blocks", "auto"])
def test_autocast_over_two_stages_trains_like_torch_autocast(placement):
    """The casts ipu-autocast adds to the backward (a float16 weight gradient
    of the convolution given back its float32 type) run in the backward stage
    of their layer: the model trains as eager PyTorch under torch.autocast."""
    torch.manual_seed(0)
    G, mb = 4, 2
    model = _ConvHead(placement == "blocks")
    ref = copy.deepcopy(model)
    tilefx.removeBlocks(ref)
    model.autocast()
    opts = _opts(tilefx.PipelinedExecution.auto(2) if placement == "auto" else None, G=G)
    opts.outputMode(tilefx.OutputMode.All)  # each micro-batch's loss
    trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.05))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(7)
    for _ in range(3):
        x, y = torch.randn(G * mb, 1, 8, 8, generator=g), torch.randint(0, 10, (G * mb,), generator=g)
        _, loss = trainer(x, y)
        with torch.autocast("cpu", dtype=torch.float16):
            with torch.no_grad():
                ref_losses = torch.stack([ref(x[i:i + mb], y[i:i + mb])[1] for i in range(0, G * mb, mb)])
            _, ref_loss = ref(x, y)
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        assert loss.dtype == torch.float32
        torch.testing.assert_close(loss, ref_losses, rtol=5e-3, atol=5e-3)
    assert {st.ipu for st in trainer.schedule.steps} == {0, 1}
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        assert q.dtype == torch.float32
        torch.testing.assert_close(q, p.detach(), rtol=1e-3, atol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_float_downcast_to_half_over_two_stages_trains_like_pytorch():
    """FloatDowncastToHalf without autocast: float16 inputs, float32 weights
    cast down where they meet them, over the stages PipelinedExecution.auto(2)
    cuts; the weights' float32 gradients leave the backward stages they are
    computed in. The reference: the model in float16 from the float32 master
    weights, its float16 gradients applied to them."""
    torch.manual_seed(0)
    G, mb = 4, 2
    model = _ConvHead(blocks=False)
    ref = copy.deepcopy(model)
    opts = _opts(tilefx.PipelinedExecution.auto(2), G=G)
    opts.outputMode(tilefx.OutputMode.All)
    opts.Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.FloatDowncastToHalf)
    trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.05))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(7)
    for _ in range(3):
        x, y = torch.randn(G * mb, 1, 8, 8, generator=g).half(), torch.randint(0, 10, (G * mb,), generator=g)
        _, loss = trainer(x, y)
        half = copy.deepcopy(ref).half()
        for p16, p in zip(half.parameters(), ref.parameters()):
            p16.data = p.detach().half().requires_grad_()
        with torch.no_grad():
            ref_losses = torch.stack([half(x[i:i + mb], y[i:i + mb])[1] for i in range(0, G * mb, mb)])
        half(x, y)[1].backward()
        for p16, p in zip(half.parameters(), ref.parameters()):
            p.grad = p16.grad.float()
        ref_opt.step()
        ref_opt.zero_grad()
        torch.testing.assert_close(loss.float(), ref_losses.float(), rtol=5e-3, atol=5e-3)
    assert {st.ipu for st in trainer.schedule.steps} == {0, 1}
    for (n, p), q in zip(ref.named_parameters(), model.parameters()):
        assert q.dtype == torch.float32
        torch.testing.assert_close(q, p.detach(), rtol=1e-3, atol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
