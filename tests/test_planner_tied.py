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
    assert all(c.throughput < best.throughput / 2 for c in contiguous if c.fits)
    assert not any(c.fits for c in cands if c.stages == 1)
    code = best.code
    assert "poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)" in code
    assert code.splitlines()[-1] == 'poptorch.BeginBlock(model.head, "stage2", ipu_id=0)'
    assert "back on the IPU holding its tied weight" in best.explain()
    assert "2+tail x 1" in table(cands, 1)
    # the planner's hooks and blocks are gone from the model
    assert all(getattr(m, "_tilefx_begin_block", None) is None for m in model.modules())
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


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
