"""Training against torch.optim: 20 steps with the same losses and weights."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from models import MLP, Transformer, TutorialCNN, WithLoss


# Adam divides by sqrt(v) + eps: for a gradient that is zero by construction
# (a bias before BatchNorm, a dead ReLU unit) float rounding noise of 1e-9
# would be amplified to +-lr with the default eps=1e-8, in PyTorch as here.
# eps=1e-3 keeps such noise negligible so the comparison tests the maths.
EPS = 1e-3


def _torch_opt(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3,
                               nesterov=False)
    if kind == "sgd_nesterov":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    if kind == "adam":
        return torch.optim.Adam(params, lr=1e-2, weight_decay=1e-3, eps=EPS)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.05, eps=EPS)


def _tilefx_opt(kind, params):
    if kind == "sgd":
        return tilefx.optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)
    if kind == "sgd_nesterov":
        return tilefx.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    if kind == "adam":
        return tilefx.optim.Adam(params, lr=1e-2, weight_decay=1e-3, eps=EPS)
    return tilefx.optim.AdamW(params, lr=1e-2, weight_decay=0.05, eps=EPS)


def _data(name, steps, batch):
    g = torch.Generator().manual_seed(1)
    if name == "mlp":
        return [(torch.randn(batch, 12, generator=g), torch.randint(0, 5, (batch,), generator=g))
                for _ in range(steps)]
    if name == "cnn":
        return [(torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g))
                for _ in range(steps)]
    return [(torch.randint(0, 20, (batch, 6), generator=g), torch.randint(0, 20, (batch, 6), generator=g))
            for _ in range(steps)]


def _model(name):
    torch.manual_seed(0)
    if name == "mlp":
        return WithLoss(MLP(), nn.CrossEntropyLoss())
    if name == "cnn":
        return WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    return WithLoss(Transformer(), nn.CrossEntropyLoss())


@pytest.mark.parametrize("model_name,kind", [
    ("mlp", "sgd"), ("mlp", "sgd_nesterov"), ("mlp", "adam"), ("mlp", "adamw"),
    ("cnn", "sgd"), ("cnn", "adamw"), ("transformer", "adam")])
def test_twenty_steps_match_torch_optim(model_name, kind):
    ref = _model(model_name)
    ours = copy.deepcopy(ref)
    torch_opt = _torch_opt(kind, ref.parameters())
    trainer = tilefx.trainingModel(ours, optimizer=_tilefx_opt(kind, ours.parameters()))
    for x, y in _data(model_name, 20, 4):
        torch_opt.zero_grad()
        _, ref_loss = ref(x, y)
        ref_loss.backward()
        torch_opt.step()
        _, loss = trainer(x, y)
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-4, atol=1e-5)
    for (n, p), (_, q) in zip(ref.state_dict().items(), ours.state_dict().items()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")


def test_torch_optim_optimizer_is_accepted():
    ref = _model("mlp")
    ours = copy.deepcopy(ref)
    torch_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
    trainer = tilefx.trainingModel(ours, optimizer=torch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.5))
    for x, y in _data("mlp", 5, 4):
        torch_opt.zero_grad()
        ref(x, y)[1].backward()
        torch_opt.step()
        trainer(x, y)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


def test_default_optimizer_is_sgd_lr_0_01():
    ref = _model("mlp")
    ours = copy.deepcopy(ref)
    trainer = tilefx.trainingModel(ours)
    x, y = _data("mlp", 1, 4)[0]
    ref(x, y)[1].backward()
    trainer(x, y)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p.detach() - 0.01 * p.grad, rtol=1e-5, atol=1e-6)


def test_parameter_groups_and_frozen_parameters():
    ref = _model("mlp")
    ref.model.fc1.weight.requires_grad_(False)
    ours = copy.deepcopy(ref)

    def groups(m):
        return [{"params": [m.model.fc2.weight, m.model.fc2.bias], "lr": 0.5},
                {"params": [p for n, p in m.named_parameters()
                            if p.requires_grad and not n.startswith("model.fc2.")]}]

    torch_opt = torch.optim.SGD(groups(ref), lr=0.05)
    trainer = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(groups(ours), lr=0.05))
    frozen = ours.model.fc1.weight.detach().clone()
    for x, y in _data("mlp", 3, 4):
        torch_opt.zero_grad()
        ref(x, y)[1].backward()
        torch_opt.step()
        trainer(x, y)
    torch.testing.assert_close(ours.model.fc1.weight, frozen, rtol=0, atol=0)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("accum,replicas", [(4, 1), (1, 2), (4, 2)])
def test_accumulation_and_replication_equal_one_big_batch(accum, replicas):
    ref = _model("cnn")
    ours = copy.deepcopy(ref)
    torch_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    opts = tilefx.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accum)
    trainer = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9))
    for x, y in _data("cnn", 3, 2 * accum * replicas):
        torch_opt.zero_grad()
        ref(x, y)[1].backward()
        torch_opt.step()
        trainer(x, y)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)


def test_sum_reduction_scales_the_gradient():
    ref = _model("mlp")
    ours = copy.deepcopy(ref)
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(2).accumulationAndReplicationReductionType(tilefx.ReductionType.Sum)
    trainer = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.01))
    x, y = _data("mlp", 1, 4)[0]
    # Sum: the update uses the sum of the two micro-batches' mean-loss gradients
    loss = ref(x[:2], y[:2])[1] + ref(x[2:], y[2:])[1]
    loss.backward()
    trainer(x, y)
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p.detach() - 0.01 * p.grad, rtol=1e-4, atol=1e-6)


def test_training_then_inference_share_weights_implicitly():
    torch.manual_seed(0)
    model = TutorialCNN()
    trainer = tilefx.trainingModel(WithLoss(model, nn.CrossEntropyLoss()),
                                   optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    inference = tilefx.inferenceModel(model)
    x, y = _data("cnn", 1, 4)[0]
    before = inference(x)
    trainer(x, y)
    after = inference(x)
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, model.eval()(x), rtol=1e-5, atol=1e-5)


def test_identity_loss_custom_loss():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x, t):
            out = self.fc(x)
            return out, tilefx.identity_loss((out - t) ** 2 * 5, reduction="mean")

    torch.manual_seed(0)
    ref = M()
    ours = copy.deepcopy(ref)
    trainer = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.01))
    x, t = torch.randn(4, 3), torch.randn(4, 3)
    loss = ((ref.fc(x) - t) ** 2 * 5).mean()
    loss.backward()
    _, our_loss = trainer(x, t)
    torch.testing.assert_close(our_loss, loss.detach(), rtol=1e-5, atol=1e-6)
    assert "ipu.identity_loss" in trainer.ir("graph")
    for p, q in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p.detach() - 0.01 * p.grad, rtol=1e-5, atol=1e-6)


class _Losses(nn.Module):
    """A linear layer whose outputs `losses(out, t, independent)` returns."""

    def __init__(self, losses, independent=False):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.losses, self.independent = losses, independent

    def forward(self, x, t):
        return self.losses(self.fc(x), t, self.independent)


def _sgd_steps_match_eager(m, ref, args, lr, steps, rtol=1e-5, atol=1e-6):
    """Train `m` on the simulated IPU and its copy `ref` in eager torch, SGD
    at `lr` for `steps` on the same `args`: every step's outputs (the loss is
    the last, or the only one) and, at the end, every parameter equal."""
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
    model = tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=lr))
    for _ in range(steps):
        ref_opt.zero_grad()
        want = ref(*args)
        (want[-1] if isinstance(want, tuple) else want).backward()
        ref_opt.step()
        torch.testing.assert_close(model(*args), torch.utils._pytree.tree_map(torch.Tensor.detach, want),
                                   rtol=rtol, atol=atol)
    model.copyWeightsToHost()
    for (n, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p, q, rtol=rtol, atol=atol, msg=n)
    return model


def _final_loss_trained(losses, pick) -> None:
    """One SGD step of `_Losses(losses)` equals eager's step on the loss
    `pick(outputs)` returns; every output equals eager's; the independent
    variant is PopTorch's "Multiple independent losses" error."""
    torch.manual_seed(0)
    ref = _Losses(losses)
    ours = copy.deepcopy(ref)
    trainer = tilefx.trainingModel(ours, optimizer=torch.optim.SGD(ours.parameters(), lr=0.1))
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    got, want = trainer(x, t), ref(x, t)
    pick(want).backward()
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        torch.testing.assert_close(g, w.detach(), rtol=1e-6, atol=1e-6)
    for a, b in zip(ref.parameters(), ours.parameters()):
        torch.testing.assert_close(b, a.detach() - 0.1 * a.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(tilefx.Error, match="Multiple independent losses found in graph.*none computed "
                                           "from the others"):
        tilefx.trainingModel(_Losses(losses, independent=True))(x, t)


def test_the_final_identity_loss_is_minimised_not_a_partial_one():
    """PopTorch's custom_loss_test returns a partial identity_loss next to the
    final one computed from it: the final one must be trained (the first
    identity_loss output was, silently: wrong weights). Independent
    identity_loss outputs and a model without a loss are PopTorch's errors."""
    def losses(out, t, independent):
        partial = tilefx.identity_loss(out - t, reduction="mean")
        other = tilefx.identity_loss(out, reduction="sum") if independent else partial
        return out, (partial, tilefx.identity_loss(other * other * 5, reduction="mean"))

    _final_loss_trained(losses, lambda outputs: outputs[1][1])

    class NoLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x) * 12

    with pytest.raises(tilefx.Error, match="Couldn't find a loss in graph"):
        tilefx.trainingModel(NoLoss())(torch.randn(2, 4))


def test_the_final_plain_loss_is_minimised_when_a_part_is_returned_too():
    """`return l1, l1 + l2` (torch.nn losses, no identity_loss): the final
    loss, the one the other is part of, is trained, as with identity_loss;
    two losses neither computed from the other stay an error."""
    def losses(out, t, independent):
        l1, l2 = nn.functional.mse_loss(out, t), out.abs().mean()
        return (l1, l2) if independent else (l1, l1 + l2)

    _final_loss_trained(losses, lambda outputs: outputs[1])


class _RunningMean(nn.Module):
    """Training with a buffer the forward reassigns (a running mean) and reads."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("avg", torch.zeros(4))

    def forward(self, x, y):
        h = self.lin(x)
        out = h - self.avg
        self.avg = 0.9 * self.avg + 0.1 * h.mean(0).detach()
        return out, nn.functional.mse_loss(out, y)


def test_reassigned_buffer_trains_as_pytorch():
    torch.manual_seed(0)
    m = _RunningMean()
    ref = copy.deepcopy(m)
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    _sgd_steps_match_eager(m, ref, (x, y), lr=0.1, steps=3)
    torch.testing.assert_close(m.avg, ref.avg, rtol=1e-5, atol=1e-7)


class _ReversibleFunction(torch.autograd.Function):
    """A reversible residual pair (RevNet, Reformer): the forward keeps no
    activations; the backward recovers the inputs from the outputs, reruns f
    and g and differentiates them with `backward()` calls of its own, which
    put the weights' gradients in their `.grad`."""

    @staticmethod
    def forward(ctx, x1, x2, f, g):
        with torch.no_grad():
            y1 = x1 + f(x2)
            y2 = x2 + g(y1)
        ctx.f, ctx.g = f, g
        ctx.save_for_backward(y1, y2)
        return y1, y2

    @staticmethod
    def backward(ctx, dy1, dy2):
        y1, y2 = ctx.saved_tensors
        with torch.enable_grad():
            y1 = y1.detach().requires_grad_()
            gy1 = ctx.g(y1)
            gy1.backward(dy2)
        with torch.no_grad():
            x2 = y2 - gy1
            dx1 = dy1 + y1.grad
        with torch.enable_grad():
            x2 = x2.detach().requires_grad_()
            fx2 = ctx.f(x2)
            fx2.backward(dx1)
        return dx1, dy2 + x2.grad, None, None


class _RevNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 8)
        self.f = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.g = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.head = nn.Linear(8, 2)

    def forward(self, x, y):
        x1, x2 = self.embed(x).chunk(2, dim=-1)
        y1, y2 = _ReversibleFunction.apply(x1, x2, self.f, self.g)
        return nn.functional.mse_loss(self.head(torch.cat([y1, y2], -1)), y)


def test_custom_backward_calling_backward_trains_as_pytorch():
    """The weights inside a reversible block get their gradients only through
    `backward()` calls in the custom backward. They were not trained (the
    backward ran after the traced forward had put the real weights back, and
    its `.grad` contributions were dropped): from the second step on the
    losses differed."""
    torch.manual_seed(0)
    m = _RevNet()
    ref = copy.deepcopy(m)
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    _sgd_steps_match_eager(m, ref, (x, y), lr=0.2, steps=3, atol=1e-7)
    for n, p in m.named_parameters():
        assert p.grad is None, n  # the trace left no gradient in the model's weights
    assert (ref.f[0].weight.grad.abs().max() > 0) and (ref.g[0].weight.grad.abs().max() > 0)


class _GaussianHead(nn.Module):
    """A probabilistic head (Hugging Face's time-series models): the loss is a
    torch.distributions log-likelihood, whose argument checks are on by default."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y):
        loc, scale, df = self.fc(x).unbind(-1)
        dist = torch.distributions.StudentT(2.0 + nn.functional.softplus(df), loc,
                                            nn.functional.softplus(scale))
        return -dist.log_prob(y).mean()


def test_distribution_argument_checks_train_as_pytorch():
    """torch.distributions checks its arguments on the host (`validate_args`):
    it was a data-dependent error; the checks are now graph asserts."""
    torch.manual_seed(0)
    m = _GaussianHead()
    ref = copy.deepcopy(m)
    x, y = torch.randn(6, 3), torch.randn(6)
    _sgd_steps_match_eager(m, ref, (x, y), lr=0.1, steps=2)


def test_distribution_argument_check_fails_the_call():
    """An argument outside its constraint fails the call, as torch raises.
    (validate_args=True: torch.compile, which another test may have run in
    this process, turns the default off for the whole process.)"""
    class Normal(nn.Module):
        def forward(self, loc, scale):
            return torch.distributions.Normal(loc, scale, validate_args=True).log_prob(torch.zeros_like(loc)).sum()

    model = tilefx.inferenceModel(Normal())
    torch.testing.assert_close(model(torch.zeros(3), torch.ones(3)),
                               Normal()(torch.zeros(3), torch.ones(3)))
    with pytest.raises(tilefx.Error, match="outside its constraint"):
        model(torch.zeros(3), -torch.ones(3))


class _ScaledByBuffer(nn.Module):
    """RecurrentGemma's pattern: a bfloat16 0-d buffer scales the embeddings."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("normalizer", torch.tensor(2.0, dtype=torch.bfloat16), persistent=False)

    def forward(self, x):
        return (self.fc(x) * self.normalizer.to(x.dtype)).pow(2).mean()


def test_bfloat16_scalar_buffer_is_written_back_as_a_scalar():
    """The write-back of a 0-d bfloat16 buffer after a training step made it
    1-d on the way (`np.ascontiguousarray`) and failed the call."""
    torch.manual_seed(0)
    m = _ScaledByBuffer()
    ref = copy.deepcopy(m)
    x = torch.randn(3, 4)
    _sgd_steps_match_eager(m, ref, (x,), lr=0.1, steps=2)
    assert m.normalizer.shape == () and m.normalizer.dtype == torch.bfloat16 and float(m.normalizer) == 2.0


class _ScaledSquare(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return (self.model(x) * torch.arange(5.0)).pow(2).mean()


@pytest.mark.parametrize("api", ["parametrizations", "hook"])
def test_weight_normed_convolution_trains_as_pytorch(api):
    """A weight-normed Conv1d over few channels (HiFi-GAN / WaveNet style):
    its weight gradient comes from the numpy kernel as a strided view, and
    ATen's `_weight_norm_interface_backward` read it as contiguous: the
    weight's g and v trained wrong (errors of ~0.3 after one step)."""
    def build():
        torch.manual_seed(0)
        conv = nn.Conv1d(3, 4, 3)
        conv = (nn.utils.parametrizations.weight_norm(conv) if api == "parametrizations"
                else nn.utils.weight_norm(conv))
        return _ScaledSquare(nn.Sequential(conv, nn.GroupNorm(2, 4)))

    x = torch.randn(2, 3, 7)
    m, ref = build(), build()
    _sgd_steps_match_eager(m, ref, (x,), lr=0.1, steps=2)


class _AdaptiveHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.asm = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10], div_value=2.0)

    def forward(self, x, target):
        out = self.asm(self.fc(x), target)
        return out.output, out.loss


def test_adaptive_log_softmax_trains_as_pytorch():
    """torch's forward selects each cluster's rows with nonzero() (a
    data-dependent shape, an error before); every cluster now runs on every
    row and a `where` picks, with torch's gradients."""
    torch.manual_seed(0)
    m = _AdaptiveHead()
    ref = copy.deepcopy(m)
    x, target = torch.randn(6, 6), torch.tensor([1, 7, 12, 3, 19, 0])
    model = _sgd_steps_match_eager(m, ref, (x, target), lr=0.5, steps=2)
    with pytest.raises(tilefx.Error, match="Target values should be in"):
        model(x, torch.tensor([1, 7, 12, 3, 20, 0]))


def test_a_frozen_batchnorm_in_a_training_model_uses_its_running_statistics():
    """model.train() then model.bn.eval() (fine-tuning with frozen
    statistics): the trace put every submodule in training mode, so the
    BatchNorm normalised with the batch's statistics and updated its running
    ones, unlike eager; and the compile left bn in training mode."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.bn = torch.nn.BatchNorm1d(4)

        def forward(self, x, t):
            y = self.bn(self.fc(x))
            return y, torch.nn.functional.mse_loss(y, t)

    torch.manual_seed(0)
    model = M()
    with torch.no_grad():
        model.bn.running_mean.fill_(0.5)
        model.bn.running_var.fill_(2.0)
    model.train()
    model.bn.eval()
    ref = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ipu = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(2):
        x, t = torch.randn(8, 4), torch.randn(8, 4)
        _, loss = ipu(x, t)
        ref_opt.zero_grad()
        _, want = ref(x, t)
        want.backward()
        ref_opt.step()
        torch.testing.assert_close(loss, want.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.fc.weight.detach(), ref.fc.weight.detach(), rtol=1e-5, atol=1e-6)
    assert model.bn.running_mean.tolist() == [0.5] * 4 and model.training and not model.bn.training
