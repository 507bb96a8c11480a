"""The memory plan's gradients: with PopART's decomposeGradSum a weight's
gradient contributions are added into its accumulator where they are made,
and a scatter-add into a dying tensor takes over its memory.

Graphcore's BERT-Large pipeline ([3, 7, 7, 7] layers, the masked-LM head tied
to the word embedding and placed back on IPU 0) only fitted once both were
modelled (docs/machine-validation.md): the head's gradient of the tied weight
had been kept from the head's stage to the embedding's, one copy per
micro-batch in flight, and the embedding's gradient counted twice (the zeros
and the scatter-add's result).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

import tilefx

VOCAB, D = 2000, 64


class TiedLM(nn.Module):
    """Embedding, three layers on IPUs 1-3, and the projection tied to the
    embedding back on IPU 0 (optimum-graphcore's placement)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.l1 = nn.Linear(D, D)
        self.l2 = nn.Linear(D, D)
        self.l3 = nn.Linear(D, D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.tok.weight
        tilefx.BeginBlock(self.l1, "l1", ipu_id=1)
        tilefx.BeginBlock(self.l2, "l2", ipu_id=2)
        tilefx.BeginBlock(self.l3, "l3", ipu_id=3)
        tilefx.BeginBlock(self.head, "head", ipu_id=0)

    def forward(self, ids, labels):
        logits = self.head(self.l3(torch.relu(self.l2(torch.relu(self.l1(self.tok(ids)))))))
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))


def _trainer(model, accumulation=10, decompose_grad_sum=True):
    opts = tilefx.Options().useOfflineIpuTarget()
    opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
    opts.Training.gradientAccumulation(accumulation)
    if decompose_grad_sum:
        opts._Popart.set("decomposeGradSum", True)
    ids = torch.zeros(accumulation * 4, 16, dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
        t.compile(ids, ids)
    return t


def _big_stashes(profile, nbytes):
    return [(ipu, t.name, t.made_by, t.nbytes) for ipu, mem in profile.memory.items()
            for t in mem.tensors if t.kind == "stash" and t.nbytes >= nbytes]


def test_tied_weight_gradient_is_not_stashed_between_its_stages():
    """With PopART's decomposeGradSum (Graphcore's BERT sets it) the head's
    partial gradient goes into the accumulator in its own stage; without it
    PopART sums the partials in one op, so the head's partial waits for the
    embedding's, stashed once per micro-batch in flight."""
    weight_bytes = VOCAB * D * 4
    p = _trainer(TiedLM()).profile
    assert not _big_stashes(p, weight_bytes)
    # the pipeline still stashes the activations it must keep (the hidden states)
    assert any(t.kind == "stash" for m in p.memory.values() for t in m.tensors)
    summed = _trainer(TiedLM(), decompose_grad_sum=False).profile
    assert _big_stashes(summed, weight_bytes)
    assert summed.memory[0].peak.max() > p.memory[0].peak.max()


def test_partials_without_an_accumulator_are_counted():
    """Without gradient accumulation (nor replicas) there is no accumulator to
    add partials into: decomposeGradSum changes nothing in the plan."""
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, D)
            self.head = nn.Linear(D, VOCAB, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, ids):
            return self.head(self.tok(ids)).pow(2).mean()

    peaks = []
    for decompose in (False, True):
        opts = tilefx.Options().useOfflineIpuTarget()
        if decompose:
            opts._Popart.set("decomposeGradSum", True)
        model = Tied()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
            t.compile(torch.zeros(4, 16, dtype=torch.long))
        peaks.append(t.profile.memory[0].peak.max())
    assert peaks[0] == peaks[1]


def test_embedding_gradient_is_counted_once():
    """The embedding's backward (zeros, then a scatter-add of the rows) holds
    one vocabulary-sized tensor at its peak, not two."""
    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, D)
            self.out = nn.Linear(D, 1)

        def forward(self, ids):
            return self.out(self.tok(ids)).float().pow(2).mean()

    opts = tilefx.Options().useOfflineIpuTarget()
    opts.Training.gradientAccumulation(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Embed().half()  # fp16: ATen's backward is zeros in fp32 and a scatter-add
        t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
        t.compile(torch.zeros(8, 16, dtype=torch.long))
    grad_sized = [x for x in t.profile.memory[0].tensors
                  if x.kind in ("activation", "stash") and x.nbytes >= VOCAB * D * 4]
    assert len(grad_sized) == 1, [(x.name, x.made_by) for x in grad_sized]


def test_numbers_are_unchanged_by_the_accounting():
    """The plan only changes what memory the profile counts: training the tied
    model runs as eager (one accumulated step on one IPU, gradients of both
    uses of the tied weight summed in eager's order)."""
    torch.manual_seed(0)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(50, 8)
            self.head = nn.Linear(8, 50, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, ids, labels):
            return nn.functional.cross_entropy(self.head(self.tok(ids)).reshape(-1, 50), labels.reshape(-1))

    model = Tied()
    ref = Tied()
    ref.load_state_dict(model.state_dict())
    ids = torch.randint(0, 50, (8, 5))
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(2)
    t = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.5))
    t(ids, ids)
    opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    opt.zero_grad()
    for half in (ids[:4], ids[4:]):
        (ref(half, half) / 2).backward()
    opt.step()
    t.copyWeightsToHost()
    torch.testing.assert_close(model.tok.weight, ref.tok.weight, rtol=1e-6, atol=1e-7)


def test_popart_session_option_reaches_the_memory_plan():
    """SessionOptions.decomposeGradSum (PopART's own switch) sets what the
    memory plan reads; it is off by default, as in PopART."""
    import tilefx.popart as popart
    from tilefx.popart.session import SessionOptions

    assert SessionOptions().decomposeGradSum is False
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 8]))
    w = b.addInitializedInputTensor(torch.randn(8, 8).numpy())
    y = b.aiOnnx.matmul([b.aiOnnx.matmul([x, w]), w])  # the weight used twice
    loss = b.aiGraphcore.l1loss([y], 0.1)
    for decompose in (False, True):
        opts = popart.SessionOptions()
        opts.decomposeGradSum = decompose
        opts.enableGradientAccumulation = True
        opts.accumulationFactor = 2
        session = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, {loss: popart.AnchorReturnType("ALL")}),
                                         loss, popart.ConstSGD(0.1), userOptions=opts,
                                         deviceInfo=popart.DeviceManager().createCpuDevice())
        assert session._compile_config().decompose_grad_sum is decompose
        session.prepareDevice()  # compiles, the memory plan included
        anchors = session.initAnchorArrays()
        session.run(popart.PyStepIO({x: np.ones((2, 4, 8), np.float32)}, anchors))
        assert np.isfinite(anchors[loss]).all()
