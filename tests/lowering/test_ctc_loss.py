"""CTC loss: `nn.CTCLoss` / `F.ctc_loss` in a model and PopART's ctcloss run as
the static-shape `ipu.ctc_loss` (torch's own op has a data-dependent output),
equal to torch in value and gradient."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx import popart
from tilefx.backend.kernels.ctc import ctc_loss, ctc_loss_grad


def test_kernels_equal_torch_padded_and_concatenated_targets():
    torch.manual_seed(0)
    T, N, C, S = 9, 4, 6, 4
    lp = torch.randn(T, N, C).log_softmax(-1).requires_grad_()
    tg = torch.randint(1, C, (N, S))
    tg[1, 1] = tg[1, 0]  # a repeated label needs a blank between
    il, tl = torch.tensor([9, 8, 6, 9]), torch.tensor([4, 2, 3, 0])
    g = torch.rand(N)
    ref = nn.functional.ctc_loss(lp, tg, il, tl, reduction="none")
    (gref,) = torch.autograd.grad((ref * g).sum(), lp)
    args = (tg.numpy(), il.numpy(), tl.numpy())
    np.testing.assert_allclose(ctc_loss(lp.detach().numpy(), *args), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ctc_loss_grad(g.numpy(), lp.detach().numpy(), *args), gref.numpy(),
                               rtol=1e-5, atol=1e-7)
    flat = torch.cat([tg[n, :tl[n]] for n in range(N)])
    np.testing.assert_allclose(ctc_loss(lp.detach().numpy(), flat.numpy(), il.numpy(), tl.numpy()),
                               ref.detach().numpy(), rtol=1e-6)
    impossible = ctc_loss(lp.detach().numpy()[:2], tg.numpy(), np.array([2, 2, 2, 2]), tl.numpy())
    assert np.isinf(impossible[0])  # 4 labels cannot fit in 2 steps
    zeroed = ctc_loss(lp.detach().numpy()[:2], tg.numpy(), np.array([2, 2, 2, 2]), tl.numpy(),
                      zero_infinity=True)
    assert zeroed[0] == 0.0


class Speech(nn.Module):
    def __init__(self, reduction):
        super().__init__()
        self.rnn = nn.GRU(8, 16)
        self.out = nn.Linear(16, 6)
        self.loss = nn.CTCLoss(blank=0, reduction=reduction)

    def forward(self, x, targets, input_lengths, target_lengths):
        lp = self.out(self.rnn(x)[0]).log_softmax(-1)
        return lp, self.loss(lp, targets, input_lengths, target_lengths)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_model_trains_like_torch(reduction):
    torch.manual_seed(0)
    model = Speech(reduction)
    ref = copy.deepcopy(model)
    x = torch.randn(10, 3, 8)
    targets = torch.randint(1, 6, (3, 4))
    il, tl = torch.tensor([10, 9, 7]), torch.tensor([4, 3, 2])
    ex = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.05))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        _, loss = ex(x, targets, il, tl)
        opt.zero_grad()
        _, want = ref(x, targets, il, tl)
        want.backward()
        opt.step()
        np.testing.assert_allclose(float(loss), want.item(), rtol=1e-5)
    ex.copyWeightsToHost()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert "ipu.ctc_loss" in ex.ir("graph") and "ipu.ctc_loss_grad" in ex.ir("graph")


def test_popart_ctcloss_with_unsigned_lengths_and_gradient_anchor():
    """PopART's operator-test form: logits -> LogSoftmax -> ctcloss over UINT32
    targets and lengths, the logits' gradient anchored, against torch."""
    rng = np.random.default_rng(0)
    T, N, C, S = 6, 4, 3, 2
    logits_np = rng.random((T, N, C), dtype=np.float32)
    targets_np = rng.integers(1, C, (N, S)).astype(np.uint32)
    il_np = np.full(N, T, np.uint32)
    tl_np = rng.integers(0, S + 1, N).astype(np.uint32)
    b = popart.Builder()
    logits = b.addInputTensor(popart.TensorInfo(logits_np))
    ins = [b.addInputTensor(popart.TensorInfo(a)) for a in (targets_np, il_np, tl_np)]
    lp = b.aiOnnx.logsoftmax([logits], axis=2)
    ctc = b.aiGraphcore.ctcloss([lp, *ins], popart.ReductionType.Mean, 0)
    assert b.getTensorShape(ctc) == []
    g = popart.reservedGradientPrefix() + logits
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [ctc, g]), ctc, popart.ConstSGD(0.1),
                               deviceInfo=popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    a = s.initAnchorArrays()
    s.run(popart.PyStepIO(dict(zip([logits, *ins], [logits_np, targets_np, il_np, tl_np])), a))
    x = torch.tensor(logits_np, requires_grad=True)
    want = nn.CTCLoss()(x.log_softmax(2), torch.tensor(targets_np.astype(np.int64)),
                        torch.tensor(il_np.astype(np.int64)), torch.tensor(tl_np.astype(np.int64)))
    want.backward()
    np.testing.assert_allclose(a[ctc], want.item(), rtol=1e-6)
    np.testing.assert_allclose(a[g], x.grad.numpy(), rtol=1e-5, atol=1e-7)
