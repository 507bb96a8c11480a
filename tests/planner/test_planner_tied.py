"""`tilefx.plan` with a head whose weight is tied to the embedding: the
planner puts the tail (the head and the loss) back on the embedding's IPU
as a last pipeline stage, as Graphcore's BERT pipelines do, when that is
what fits; the candidate compiles as predicted and trains like PyTorch."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from tilefx.planner import table

VOCAB, D, FFN, LAYERS, SEQ = 8192, 1024, 4096, 3, 4


class TiedLM(nn.Module):
    """A word embedding, residual feed-forward layers and a language-model
    head sharing the embedding's weight."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(D, FFN), nn.GELU(), nn.Linear(FFN, D))
                                    for _ in range(LAYERS))
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, ids, labels):
        x = self.tok(ids)
        for layer in self.layers:
            x = x + layer(x)
        logits = self.head(x)
        return logits, nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def _batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (n, SEQ), generator=g), torch.randint(0, VOCAB, (n, SEQ), generator=g)


@pytest.fixture(scope="module")
def planned():
    """On 2 Mk1 IPUs (256 KiB per tile) with AdamW: the table with its
    gradient accumulator fills a third of an IPU and each layer about as
    much, so one IPU does not hold the model, and two contiguous stages (the
    head with a second copy of the table on IPU 1) fit only unbalanced; the
    tail on IPU 0 fits balanced."""
    torch.manual_seed(0)
    model = TiedLM()
    opts = tilefx.Options().setMachine("mk1")
    cands = tilefx.plan(model, *_batch(1, 0), ipus=2, global_batch=8, options=opts, keep_all=True,
                        optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3))
    return model, cands


def test_planner_puts_the_tied_head_back_on_ipu_0(planned):
    model, cands = planned
    best = cands[0]
    assert best.fits, table(cands)
    assert best.tail == "head" and best.stages == 2 and best.pipeline_stages == 3
    assert best.schedule == "FillDrain"
    assert best.placement[-1] == ("head", 0) and len(best.placement) == 2
    # the contiguous splits were costed: the last IPU holds a second copy of
    # the tied table, so their balanced splits are over its tile, and what
    # fits once cut again (the layers with the embedding, the head alone on
    # IPU 1) leaves IPU 1 mostly idle
    contiguous = [c for c in cands if c.stages == 2 and not c.tail]
    assert any(not c.fits and c.memory and max(c.memory.values()) > c.tile_bytes for c in contiguous)
    recut = [c for c in contiguous if c.fits]
    assert recut and all(c.throughput < best.throughput / 2 for c in recut)
    for c in recut:  # cut again with IPU 0's excess left free there
        assert c.reserve[0] > 0 and c.reason.startswith("cut again leaving free per tile")
        first = next(f for f in contiguous if (f.schedule, f.state, f.proportion, f.reserve) ==
                     (c.schedule, c.state, c.proportion, []))
        assert first.memory[0] - first.tile_bytes == c.reserve[0]
    assert not any(c.fits for c in cands if c.stages == 1)
    code = best.code
    assert "poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)" in code
    assert code.splitlines()[-1] == 'poptorch.BeginBlock(model.head, "stage2", ipu_id=0)'
    assert "back on the IPU holding its tied weight" in best.explain()
    assert "2+tail x 1" in table(cands, 1)
    # the planner's hooks and blocks are gone from the model
    assert all(getattr(m, "_tilefx_begin_block", None) is None for m in model.modules())
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_top_three_compile_as_predicted(planned):
    """The re-cut contiguous candidates after the tail's: their placement
    compiles to the memory and throughput the planner predicted."""
    model, cands = planned
    for c in cands[1:3]:
        m = c.place(copy.deepcopy(model))
        t = tilefx.trainingModel(m, c.options, optimizer=tilefx.optim.AdamW(m.parameters(), lr=1e-3))
        t.compile(*_batch(c.global_batch, 1))
        assert {i: int(mem.peak.max()) for i, mem in t.profile.memory.items()} == c.memory
        assert c.global_batch / t.profile.seconds == pytest.approx(c.throughput, rel=1e-9)


def test_code_of_a_tail_candidate_with_per_ipu_proportions_round_trips(tmp_path):
    """`.code`'s Options calls (PopTorch's options-file syntax) give
    `.options`: AutoIncrement for the tail, the proportion of each IPU, the
    state off chip and sharded."""
    from tilefx.planner.candidate import STATE_OFF_CHIP_SHARDED, Candidate

    c = Candidate(4, 4, 8, 64, "FillDrain", STATE_OFF_CHIP_SHARDED, 0.15, "bow", tail="head",
                  placement=[("layers.3", 1), ("layers.10", 2), ("layers.17", 3), ("head", 0)],
                  proportions={1: 0.3, 2: 0.3, 3: 0.3})
    path = tmp_path / "opts.conf"
    path.write_text("\n".join(line.removeprefix("opts.") for line in c.code.splitlines()
                              if line.startswith("opts.")) + "\n")
    loaded = tilefx.Options()
    loaded.loadFromFile(str(path))
    a, b = loaded.toDict(), c.options.toDict()
    sa, sb = a.pop("execution_strategy"), b.pop("execution_strategy")
    assert a == b and repr(sa) == repr(sb) and sa.auto_stage == tilefx.AutoStage.AutoIncrement
    assert c.options.available_memory_proportion == {"IPU0": 0.15, "IPU1": 0.3, "IPU2": 0.3, "IPU3": 0.3}
    loc = c.options.TensorLocations.optimizer.resolved()
    assert loc.on_chip is False and loc.sharded
    assert c.code.splitlines()[-1] == 'poptorch.BeginBlock(model.head, "stage4", ipu_id=0)'
    assert "4+tail x 4" in c.row() and "0.15-0.3" in c.row()
    assert "IPU0 0.15, IPU1 0.3" in c.explain()


def test_tail_candidate_compiles_as_predicted_and_trains_like_pytorch(planned):
    model, cands = planned
    c = cands[0]
    ref, ours = copy.deepcopy(model), c.place(copy.deepcopy(model))
    trainer = tilefx.trainingModel(ours, c.options,
                                   optimizer=tilefx.optim.AdamW(ours.parameters(), lr=1e-3, eps=1e-3))
    # (an eps well above the gradients' rounding: Adam's update divides by
    # the gradient's own size, which turns a last-bit difference in a near-
    # zero gradient, from another order of additions, into a whole step)
    torch_opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, eps=1e-3)
    n = c.global_batch
    trainer.compile(*_batch(n, 1))  # raises if an IPU runs out of memory
    p = trainer.profile
    assert p.num_ipus == 2 and trainer.schedule.num_stages == 2 * 3 - 1
    assert {i: int(m.peak.max()) for i, m in p.memory.items()} == c.memory
    assert c.global_batch / p.seconds == pytest.approx(c.throughput, rel=1e-9)
    # the head (and its loss) run on IPU 0, after the layers on IPU 1
    ir = trainer.ir("graph")
    head = next(line for line in ir.splitlines() if "aten._log_softmax " in line)
    assert "ipu = 0" in head and 'block = "stage2"' in head
    for step in range(2):
        ids, labels = _batch(n, 2 + step)
        torch_opt.zero_grad()
        ref(ids, labels)[1].backward()
        torch_opt.step()
        trainer(ids, labels)
    for (name, a), b in zip(ref.named_parameters(), ours.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")


def test_auto_tail_errors_are_clear():
    with pytest.raises(tilefx.Error, match="FillDrain schedule only"):
        tilefx.PipelinedExecution.auto(2, tail="head", schedule="1F1B")
    with pytest.raises(tilefx.Error, match="tail_ipu must be one of the IPUs 0..1"):
        tilefx.PipelinedExecution.auto(2, tail="head", tail_ipu=2)
    with pytest.raises(tilefx.Error, match="tail must be a block name"):
        tilefx.PipelinedExecution.auto(2, tail="")
    cfg = tilefx.PipelinedExecution.auto(2, tail="head").to_config()
    assert cfg["auto"] == {"num_ipus": 2, "virtual_stages": 1, "tail_block": "head", "tail_ipu": 0}


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))
        self.head = nn.Linear(8, 8)

    def forward(self, x, y):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        x = self.head(x)
        return x, nn.functional.mse_loss(x, y)


def test_auto_tail_needs_the_block():
    """A tail naming no block of the model is the pass's placement error."""
    opts = tilefx.Options().useOfflineIpuTarget()
    opts.Training.gradientAccumulation(8)
    opts.setExecutionStrategy(tilefx.PipelinedExecution.auto(2, tail="head"))
    model = Small()
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(tilefx.Error, match="the tail block 'head' has no forward ops"):
        t.compile(torch.randn(16, 8), torch.randn(16, 8))


def test_auto_tail_trains_like_pytorch():
    """`PipelinedExecution.auto(2, tail=...)`: the head's block is a third
    pipeline stage on IPU 0; the numbers are PyTorch's."""
    torch.manual_seed(0)
    model = Small()
    ref = copy.deepcopy(model)
    tilefx.BeginBlock(model.head, "head")
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(8)
    opts.setExecutionStrategy(tilefx.PipelinedExecution.auto(2, tail="head"))
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    torch_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 8, generator=g)
        torch_opt.zero_grad()
        ref(x, y)[1].backward()
        torch_opt.step()
        t(x, y)
    assert t.profile.auto_stage["stage_ipus"] == [0, 1, 0]
    assert t.schedule.num_stages == 5
    for (name, a), b in zip(ref.named_parameters(), model.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=lambda m, name=name: f"{name}: {m}")


def test_the_tied_heads_gradient_is_not_copied_across_the_pipeline():
    """The head's partial gradient of the tied table is read by the
    embedding's backward on IPU 0, the tail's own IPU: ipu-auto-stage costs
    no IPU-Link copy of it (one across every cut between would put 2.8 M
    cycles of a 32 MB copy on IPU 1 and on the tail, and the cut after the
    embedding alone), and its cycles per micro-batch of each IPU are the
    profile's compute, copies and host streams (ipu-auto-stage counts a
    micro-batch's host streams on stage 0's IPU, where the timeline runs them)."""
    import collections

    torch.manual_seed(0)
    model = TiedLM()
    tilefx.BeginBlock(model.head, "head")
    opts = tilefx.Options().useOfflineIpuTarget()
    opts.Training.gradientAccumulation(8)
    opts.setExecutionStrategy(tilefx.PipelinedExecution.auto(2, tail="head"))
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    t.compile(*_batch(8, 1))
    p = t.profile
    estimate = collections.Counter()
    for ipu, cycles in zip(p.auto_stage["stage_ipus"], p.auto_stage["stage_cycles"]):
        estimate[ipu] += cycles
    planned = collections.Counter()
    for step in p.timeline:
        if step.kind in ("compute", "copy", "host"):
            planned[step.ipu] += (step.end - step.start) / 8
    table = VOCAB * D * 4  # the table's gradient, fp32
    assert max(estimate.values()) < p.machine.link_cycles(table, p.machine.ipu_link_bytes_per_s)
    for ipu in (0, 1):
        assert estimate[ipu] == pytest.approx(planned[ipu], rel=0.15)
