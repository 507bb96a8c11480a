"""Anchored tensors (PopTorch's Options.anchorTensor / getAnchoredTensor /
getTensorNames): a weight's gradient per micro-batch, its updated value and
its value during the step, read back after each call in PopART's anchor
layout, against eager PyTorch."""

import copy

import pytest
import torch

import tilefx as poptorch
from tilefx import OutputMode


class Model(torch.nn.Module):
    """PopTorch's own anchoring test model."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 10)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(10, 10)
        self.loss = torch.nn.MSELoss(reduction="mean")

    def forward(self, x, labels=None):
        out = self.fc2(self.relu(self.fc1(x)))
        if self.training:
            return self.loss(out, labels)
        return out


def test_poptorch_tensor_values_example():
    """PopTorch's test_tensor_values, as written (its 'model.' prefix is the
    wrapper older PopTorch releases put around the model), plus the values
    against eager: the bias gradient and the weight after the SGD step."""
    torch.manual_seed(0)
    model = Model()
    ref = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.anchorTensor('grad_bias', 'Gradient___model.fc2.bias')
    opts.anchorTensor('update_weight', 'UpdatedVar___model.fc2.weight')
    poptorch_model = poptorch.trainingModel(model, opts)
    with pytest.raises(AssertionError):
        poptorch_model.getTensorNames()

    input = torch.rand(10, 10)
    label = torch.rand(10, 10)
    poptorch_model(input, label)
    grad1 = poptorch_model.getAnchoredTensor('grad_bias')
    assert grad1.shape == (10, )
    update1 = poptorch_model.getAnchoredTensor('update_weight')
    assert update1.shape == (10, 10)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)  # PopTorch's default optimizer
    ref.train()
    ref(input, label).backward()
    torch.testing.assert_close(grad1, ref.fc2.bias.grad, rtol=1e-6, atol=1e-7)
    ref_opt.step()
    torch.testing.assert_close(update1, ref.fc2.weight.detach(), rtol=1e-6, atol=1e-7)

    input = torch.rand(10, 10)
    label = torch.rand(10, 10)
    poptorch_model(input, label)
    grad2 = poptorch_model.getAnchoredTensor('grad_bias')
    update2 = poptorch_model.getAnchoredTensor('update_weight')
    assert grad2.shape == (10, ) and update2.shape == (10, 10)
    assert not torch.equal(grad1, grad2)
    assert not torch.equal(update1, update2)

    names = poptorch_model.getTensorNames()
    assert any(t.startswith('Gradient___') for t in names)
    assert any(t.startswith('UpdatedVar__') for t in names)
    assert 'fc2.bias' in names and 'Gradient___fc2.bias' in names


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        out = self.fc(x)
        return out, torch.nn.functional.mse_loss(out, y)


@pytest.mark.parametrize("mode", [OutputMode.All, OutputMode.EveryN, OutputMode.Final, OutputMode.Sum])
def test_gradient_anchor_per_micro_batch_in_each_output_mode(mode):
    """Under deviceIterations x gradientAccumulation x replicas each micro-batch's
    gradient is eager's for that micro-batch, laid out as PopART's anchors:
    [D, G, R] leading dimensions for All (D / N for EveryN), [R] for Final and
    Sum, size-1 dimensions left out. The model's outputs keep their structure."""
    torch.manual_seed(0)
    model = Small()
    ref = copy.deepcopy(model)
    D, G, R, mb = 2, 3, 2, 2
    opts = poptorch.Options().deviceIterations(D).replicationFactor(R)
    opts.Training.gradientAccumulation(G)
    opts.anchorTensor('g', 'Gradient___fc.weight', mode, 2 if mode == OutputMode.EveryN else 1)
    opts.anchorTensor('b', 'Gradient___fc.bias')  # the model's mode: Final in training
    # (lr 0: every micro-batch sees the same weights as the eager reference's)
    ipu = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.0))
    x, y = torch.randn(D * G * R * mb, 4), torch.randn(D * G * R * mb, 3)
    out, loss = ipu(x, y)
    assert out.shape == (R * mb, 3) and loss.shape == (R,)  # OutputMode.Default: Final
    xs, ys = x.reshape(D, G, R, mb, 4), y.reshape(D, G, R, mb, 3)
    grads = torch.zeros(D, G, R, 3, 4)
    bias = torch.zeros(D, G, R, 3)
    for d in range(D):
        for g in range(G):
            for r in range(R):
                ref.zero_grad()
                ref(xs[d, g, r], ys[d, g, r])[1].backward()
                grads[d, g, r], bias[d, g, r] = ref.fc.weight.grad, ref.fc.bias.grad
    want = {OutputMode.All: grads, OutputMode.EveryN: grads[1], OutputMode.Final: grads[-1, -1],
            OutputMode.Sum: grads.sum((0, 1))}[mode]
    torch.testing.assert_close(ipu.getAnchoredTensor('g'), want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ipu.getAnchoredTensor('b'), bias[-1, -1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [OutputMode.All, OutputMode.EveryN, OutputMode.Final, OutputMode.Sum])
def test_value_and_updated_anchors_per_device_iteration(mode):
    """A weight's value and UpdatedVar___ value are taken per device iteration
    (they were taken once per call: the value as the call started, the
    update after its last iteration): iteration d's value is the weight every
    micro-batch of d reads, its update the weight after d's update, each
    replica's, in PopART's layout ([D, G, R] for All, [R] for Final and Sum),
    against eager SGD with momentum."""
    torch.manual_seed(0)
    model = Small()
    ref = copy.deepcopy(model)
    D, G, R, mb = 4, 2, 2, 2
    N = 2 if mode == OutputMode.EveryN else 1
    opts = poptorch.Options().deviceIterations(D).replicationFactor(R)
    opts.Training.gradientAccumulation(G)
    opts.anchorTensor('v', 'fc.weight', mode, N)
    opts.anchorTensor('u', 'UpdatedVar___fc.weight', mode, N)
    ipu = poptorch.trainingModel(
        model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    x, y = torch.randn(D * G * R * mb, 4), torch.randn(D * G * R * mb, 3)
    ipu(x, y)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    xs, ys = x.reshape(D, G * R * mb, 4), y.reshape(D, G * R * mb, 3)
    before, after = [], []
    for d in range(D):  # Mean reduction over G x R micro-batches: one batch of G x R x mb
        before.append(ref.fc.weight.detach().clone())
        ref_opt.zero_grad()
        ref(xs[d], ys[d])[1].backward()
        ref_opt.step()
        after.append(ref.fc.weight.detach().clone())

    def laid_out(per_iteration):
        full = torch.stack(per_iteration)[:, None, None].expand(D, G, R, 3, 4)
        return {OutputMode.All: full, OutputMode.EveryN: full[N - 1::N], OutputMode.Final: full[-1, -1],
                OutputMode.Sum: full.sum((0, 1))}[mode]

    torch.testing.assert_close(ipu.getAnchoredTensor('v'), laid_out(before), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ipu.getAnchoredTensor('u'), laid_out(after), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.fc.weight.detach(), after[-1], rtol=1e-5, atol=1e-6)


def test_value_anchor_in_inference_and_clear_errors():
    torch.manual_seed(0)
    model = Model().eval()
    opts = poptorch.Options()
    opts.anchorTensor('w', 'fc1.weight')
    ipu = poptorch.inferenceModel(model, opts)
    with pytest.raises(poptorch.Error, match="has not run yet"):
        ipu.getAnchoredTensor("w")
    ipu(torch.rand(2, 10))
    assert torch.equal(ipu.getAnchoredTensor('w'), model.fc1.weight.detach())
    with pytest.raises(poptorch.Error, match="no tensor is anchored as 'v'"):
        ipu.getAnchoredTensor('v')

    bad = poptorch.Options()
    bad.anchorTensor('g', 'Gradient___fc1.weight')
    with pytest.raises(poptorch.Error, match="an inference model computes no gradients"):
        poptorch.inferenceModel(Model().eval(), bad)(torch.rand(2, 10))
    bad = poptorch.Options()
    bad.anchorTensor('g', 'Gradient___fc3.weight')
    with pytest.raises(poptorch.Error, match="'fc3.weight' is not a parameter of the model"):
        poptorch.trainingModel(Model(), bad)(torch.rand(2, 10), torch.rand(2, 10))
    frozen = Model()
    frozen.fc1.weight.requires_grad_(False)
    bad = poptorch.Options()
    bad.anchorTensor('g', 'Gradient___fc1.weight')
    with pytest.raises(poptorch.Error, match="'fc1.weight' is not trained"):
        poptorch.trainingModel(frozen, bad)(torch.rand(2, 10), torch.rand(2, 10))


def test_exported_anchored_program_keeps_the_models_outputs(tmp_path):
    """An executable compiled with anchored gradients loads with the model's
    own outputs (its anchors are not part of the file's call)."""
    torch.manual_seed(0)
    model = Small()
    opts = poptorch.Options()
    opts.anchorTensor('g', 'Gradient___fc.weight')
    ipu = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.0))
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    path = str(tmp_path / "anchored.poptorch")
    ipu.compileAndExport(path, x, y)
    loaded = poptorch.load(path)
    out, loss = loaded(x, y)
    with torch.no_grad():
        want_out, want_loss = copy.deepcopy(model)(x, y)
    torch.testing.assert_close(out, want_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(loss, want_loss, rtol=1e-6, atol=1e-6)


def test_review_cases_one_gradient_two_modes_periods_dtypes_and_names():
    """One gradient under two names keeps each name's mode; an EveryN period
    that does not divide deviceIterations is an error; value anchors keep the
    parameter's dtype; a parameter the optimizer leaves out has no gradient;
    a model's own `_anchors` attribute is the model's."""
    x, y = torch.randn(4, 4), torch.randn(4, 3)
    opts = poptorch.Options().deviceIterations(2)
    opts.anchorTensor('all', 'Gradient___fc.weight', OutputMode.All)
    opts.anchorTensor('fin', 'Gradient___fc.weight', OutputMode.Final)
    ipu = poptorch.trainingModel(Small(), opts)
    ipu(x, y)
    assert ipu.getAnchoredTensor('all').shape == (2, 3, 4) and ipu.getAnchoredTensor('fin').shape == (3, 4)
    torch.testing.assert_close(ipu.getAnchoredTensor('all')[-1], ipu.getAnchoredTensor('fin'), rtol=0, atol=0)

    opts = poptorch.Options().deviceIterations(2)
    opts.anchorTensor('g', 'Gradient___fc.weight', OutputMode.EveryN, 4)
    with pytest.raises(poptorch.Error, match=r"EveryN\(4\) needs a period that divides deviceIterations \(2\)"):
        poptorch.trainingModel(Small(), opts)(x, y)

    class Half(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x).float().pow(2).mean()

    opts = poptorch.Options()
    for short, long_name in (('v', 'fc.weight'), ('u', 'UpdatedVar___fc.weight'), ('g', 'Gradient___fc.weight')):
        opts.anchorTensor(short, long_name)
    ipu = poptorch.trainingModel(Half().bfloat16(), opts)
    ipu(torch.randn(2, 4).bfloat16())
    assert [ipu.getAnchoredTensor(k).dtype for k in 'vug'] == [torch.bfloat16] * 3

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 3)
            self._anchors = [(10, 13), (16, 30)]  # a detection head's own attribute

        def forward(self, x, y):
            return torch.nn.functional.mse_loss(self.b(self.a(x)), y)

        def count(self):
            return len(self._anchors)

    m = Two()
    opts = poptorch.Options()
    opts.anchorTensor('g', 'Gradient___a.weight')
    with pytest.raises(poptorch.Error, match="'a.weight' is not trained"):
        poptorch.trainingModel(m, opts, optimizer=poptorch.optim.SGD(m.b.parameters(), lr=0.1))(
            torch.randn(2, 4), torch.randn(2, 3))
    ipu = poptorch.trainingModel(Two())
    ipu(torch.randn(2, 4), torch.randn(2, 3))
    assert ipu.count() == 2


def test_a_loaded_executable_keeps_its_options_anchors(tmp_path):
    x, y = torch.randn(2, 4), torch.randn(2, 3)
    opts = poptorch.Options()
    opts.anchorTensor('w', 'fc.bias')
    opts.anchorTensor('g', 'Gradient___fc.bias')
    path = str(tmp_path / "a.poptorch")
    model = Small()
    poptorch.trainingModel(model, opts).compileAndExport(path, x, y)
    loaded = poptorch.load(path)
    loaded(x, y)
    torch.testing.assert_close(loaded.getAnchoredTensor('w'), model.fc.bias.detach(), rtol=0, atol=0)
    assert loaded.getAnchoredTensor('g').shape == (3,)


def test_weight_anchors_of_a_replica_grouped_weight_are_each_replicas():
    """Per device iteration and replica: replica r reads (and updates) its
    group's slice; an iteration's value is the previous one's update."""
    from tilefx.enums import CommGroupType, VariableRetrievalMode

    class Grouped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.W = torch.nn.Parameter(torch.randn(2, 6, 3))

        def forward(self, x, y):
            out = x @ self.W
            return out, torch.nn.functional.mse_loss(out, y)

    torch.manual_seed(0)
    model = Grouped()
    opts = poptorch.Options().replicationFactor(4).deviceIterations(2)
    opts.anchorTensor("w", "W", OutputMode.All)
    opts.anchorTensor("u", "UpdatedVar___W", OutputMode.All)
    ipu = poptorch.trainingModel(model, opts, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    ipu.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
    W0 = model.W.detach().clone()
    ipu(torch.randn(16, 6), torch.randn(16, 3))
    w, u = ipu.getAnchoredTensor("w"), ipu.getAnchoredTensor("u")
    assert w.shape == u.shape == (2, 4, 6, 3)
    for r in range(4):  # orthogonal groups of 2: replica r holds slice r % 2
        assert torch.equal(w[0, r], W0[r % 2]) and torch.equal(u[1, r], model.W.detach()[r % 2])
    assert torch.equal(w[1], u[0]) and not torch.equal(w[0], u[0])
