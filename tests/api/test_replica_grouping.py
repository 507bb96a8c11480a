"""Weights grouped across replicas (PopTorch user guide, 4.4.3 "Grouping tensor weights across replicas"):
`W.replicaGrouping(type,
shards, mode)`, one value per group, gradients summed within a group,
copyWeightsToHost per VariableRetrievalMode. Compared with PyTorch models
built by hand: the guide's full problem, and one weight slice per group."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx as poptorch
from tilefx.enums import CommGroupType, VariableRetrievalMode


class ModelWithLoss(nn.Module):
    def __init__(self, W_init):
        super().__init__()
        self.W = nn.Parameter(W_init)

    def forward(self, X):
        Z = X @ self.W
        return Z, poptorch.identity_loss(Z**2, reduction="mean")


def test_the_guides_example_follows_the_full_problem():
    """8 replicas: W split 4 ways over orthogonal groups of 2, X split 2 ways
    over consecutive input groups of 4 (the guide's code). The losses and the
    final W equal SGD on the whole X @ W."""
    tensor_shards, data_shards, steps = 4, 2, 4
    random = np.random.RandomState(seed=100)
    prob_X = random.normal(size=(24, 40)).astype(np.float32)
    prob_W_init = random.normal(size=(40, 56)).astype(np.float32) * (5 * 8) ** -0.5
    W_init = torch.tensor(prob_W_init.reshape(40, tensor_shards, 56 // tensor_shards).transpose(1, 0, 2)).contiguous()
    m = ModelWithLoss(W_init)
    opts = poptorch.Options()
    opts.replicationFactor(data_shards * tensor_shards)
    opts.inputReplicaGrouping(tensor_shards, poptorch.enums.CommGroupType.Consecutive)
    opts.outputMode(poptorch.OutputMode.All)
    pt_m = poptorch.trainingModel(m, optimizer=torch.optim.SGD(m.parameters(), lr=0.01), options=opts)
    pt_m.W.replicaGrouping(CommGroupType.Orthogonal, data_shards, VariableRetrievalMode.OnePerGroup)
    X = torch.tensor(prob_X).reshape(data_shards, 12, 40)
    losses = []
    for _ in range(steps):
        W_used = m.W.detach().clone()
        Z, loss = pt_m(X)
        assert Z.shape == (8, 12, 14) and loss.shape == (8,)
        losses.append(float(torch.sum(loss) / (data_shards * tensor_shards)))
    # replica r computes X[r // 4] @ W[r % 4]
    for r in range(8):
        torch.testing.assert_close(Z[r], X[r // 4] @ W_used[r % 4],
                                   rtol=1e-4, atol=1e-4)
    W_final = m.W.detach().numpy().transpose(1, 0, 2).reshape(40, 56)
    W = torch.tensor(prob_W_init, requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.01)
    ref = []
    for _ in range(steps):
        loss = ((torch.tensor(prob_X) @ W) ** 2).mean()
        ref.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(losses, ref, rtol=1e-5)
    np.testing.assert_allclose(W_final, W.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert m.W.shape == (4, 40, 14)


class Shared(nn.Module):
    """A grouped weight W and an ordinary bias b shared by every replica."""

    def __init__(self, groups):
        super().__init__()
        self.W = nn.Parameter(torch.randn(groups, 6, 3))
        self.b = nn.Parameter(torch.randn(3))

    def forward(self, x, y):
        out = torch.tanh(x @ self.W + self.b)
        return out, nn.functional.mse_loss(out, y)


@pytest.mark.parametrize("kind,groups_of", [
    (CommGroupType.Consecutive, [0, 0, 1, 1]),
    (CommGroupType.Orthogonal, [0, 1, 0, 1]),
    (CommGroupType.NoGrouping, [0, 1, 2, 3]),
])
def test_each_group_trains_its_own_weight_with_its_own_adam_state(kind, groups_of):
    torch.manual_seed(0)
    R, mb, steps = 4, 2, 3
    n_groups = max(groups_of) + 1
    model = Shared(n_groups)
    # the reference by hand: replica r uses W[group of r]; the shared b sees every
    # replica; the mean over replicas as PopTorch reduces (ReductionType.Mean)
    ref_W = [model.W.detach()[g].clone().requires_grad_() for g in range(n_groups)]
    ref_b = model.b.detach().clone().requires_grad_()
    ref_opt = torch.optim.Adam(ref_W + [ref_b], lr=0.01)
    opts = poptorch.Options().replicationFactor(R)
    pt = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.Adam(model.parameters(), lr=0.01))
    pt.W.replicaGrouping(kind, 2, VariableRetrievalMode.OnePerGroup)
    for _ in range(steps):
        x, y = torch.randn(R * mb, 6), torch.randn(R * mb, 3)
        _, loss = pt(x, y)
        total = 0
        ref_losses = []
        for r in range(R):
            out = torch.tanh(x[r * mb:(r + 1) * mb] @ ref_W[groups_of[r]] + ref_b)
            lr_ = nn.functional.mse_loss(out, y[r * mb:(r + 1) * mb])
            ref_losses.append(lr_.detach())
            total = total + lr_ / R
        ref_opt.zero_grad()
        total.backward()
        ref_opt.step()
        torch.testing.assert_close(loss, torch.stack(ref_losses), rtol=1e-5, atol=1e-6)
    assert model.W.shape == (n_groups, 6, 3)
    for g in range(n_groups):
        torch.testing.assert_close(model.W[g].detach(), ref_W[g].detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model.b.detach(), ref_b.detach(), rtol=1e-5, atol=1e-6)
    # the optimizer state is per group too
    state = pt.optimizer_state_by_weight()["tensors"]["W"]
    assert all(v.shape == (n_groups, 6, 3) for v in state.values())


def test_all_replicas_retrieval_returns_one_value_per_replica():
    torch.manual_seed(0)
    model = Shared(2)
    W0 = model.W.detach().clone()
    opts = poptorch.Options().replicationFactor(4)
    pt = poptorch.trainingModel(model, opts, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    pt.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.AllReplicas)
    pt(torch.randn(8, 6), torch.randn(8, 3))
    pt.copyWeightsToHost()
    assert model.W.shape == (4, 6, 3)
    # replicas 0 and 2 form group 0, 1 and 3 group 1: equal values within a group
    torch.testing.assert_close(model.W[0], model.W[2])
    torch.testing.assert_close(model.W[1], model.W[3])
    assert not torch.equal(model.W[0], W0[0]) and not torch.equal(model.W[0], model.W[1])
    # the [replicas, ...] value goes back to the device as it came
    before = model.W.detach().clone()
    pt.copyWeightsToDevice()
    pt.copyWeightsToHost()
    torch.testing.assert_close(model.W, before)


def test_inference_uses_each_groups_value():
    torch.manual_seed(0)
    W = torch.randn(2, 5, 3)
    model = ModelWithLoss(W)
    opts = poptorch.Options().replicationFactor(4)
    pt = poptorch.inferenceModel(model, opts)
    pt.W.replicaGrouping(CommGroupType.Consecutive, 2, VariableRetrievalMode.OnePerGroup)
    x = torch.randn(4 * 3, 5)
    Z, _ = pt(x)
    for r in range(4):
        torch.testing.assert_close(Z[r * 3:(r + 1) * 3], x[r * 3:(r + 1) * 3] @ W[r // 2])


def test_one_group_is_the_ordinary_weight():
    torch.manual_seed(0)
    W = torch.randn(5, 3)
    model = ModelWithLoss(W)
    pt = poptorch.inferenceModel(model, poptorch.Options().replicationFactor(2))
    pt.W.replicaGrouping(CommGroupType.All, 0, VariableRetrievalMode.OnePerGroup)
    x = torch.randn(4, 5)
    torch.testing.assert_close(pt(x)[0], x @ W)


def test_bad_groupings_are_clear_errors():
    model = ModelWithLoss(torch.randn(3, 5, 3))  # 3 is not the number of groups
    pt = poptorch.inferenceModel(model, poptorch.Options().replicationFactor(4))
    pt.W.replicaGrouping(CommGroupType.Consecutive, 2, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match="first dimension must be the group"):
        pt(torch.randn(8, 5))
    with pytest.raises(poptorch.Error, match="must divide the number of replicas"):
        pt.W.replicaGrouping(CommGroupType.Consecutive, 3, VariableRetrievalMode.OnePerGroup)
        poptorch.inferenceModel(model, poptorch.Options().replicationFactor(4))(torch.randn(8, 5))
    with pytest.raises(poptorch.Error, match="CommGroupType"):
        pt.W.replicaGrouping("Consecutive", 2, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match="VariableRetrievalMode"):
        pt.W.replicaGrouping(CommGroupType.Consecutive, 2, 1)
    # set after the first compile: an error, not silently ignored
    model = ModelWithLoss(torch.randn(5, 3))
    pt = poptorch.inferenceModel(model, poptorch.Options().replicationFactor(2))
    pt(torch.randn(4, 5))
    model.W.data = torch.randn(2, 5, 3)
    pt.W.replicaGrouping(CommGroupType.NoGrouping, 0, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match="after the model was compiled"):
        pt(torch.randn(4, 5))


def test_one_group_all_replicas_keeps_training_from_its_replica_copies():
    """CommGroupType.All with AllReplicas: the ordinary weight, read back once per
    replica ([replicas, ...]), and read again from that on the next call."""
    class Tanh(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Parameter(torch.randn(4, 3))  # its first dimension equals the replicas

        def forward(self, x, y):
            return nn.functional.mse_loss(torch.tanh(x @ self.W), y)

    torch.manual_seed(0)
    model = Tanh()
    ref = copy.deepcopy(model)
    pt = poptorch.trainingModel(model, poptorch.Options().replicationFactor(4),
                                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    pt.W.replicaGrouping(CommGroupType.All, 0, VariableRetrievalMode.AllReplicas)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        x, y = torch.randn(8, 4), torch.randn(8, 3)
        pt(x, y)
        ref_loss = sum(ref(x[2 * r:2 * r + 2], y[2 * r:2 * r + 2]) for r in range(4)) / 4
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        assert model.W.shape == (4, 4, 3)
        for r in range(4):
            torch.testing.assert_close(model.W[r].detach(), ref.W.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", [VariableRetrievalMode.OnePerGroup, VariableRetrievalMode.AllReplicas])
def test_grouped_weights_export_load_and_train_on(tmp_path, mode):
    """compileAndExport / save of replica-grouped weights was an error: the
    file keeps each weight's grouping and its host value, `poptorch.load`
    gives the rebuilt model the grouping, and training goes on exactly as
    without the round trip (per-group Adam state included); a model given
    loadExecutable that groups its weights another way is an error."""
    torch.manual_seed(0)
    R = 4
    model = Shared(2)
    opts = poptorch.Options().replicationFactor(R)
    pt = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.Adam(model.parameters(), lr=0.01))
    pt.W.replicaGrouping(CommGroupType.Orthogonal, 2, mode)
    data = [(torch.randn(R * 2, 6), torch.randn(R * 2, 3)) for _ in range(3)]
    pt(*data[0])
    path = str(tmp_path / "grouped.poptorch")
    pt.save(path)
    loaded = poptorch.load(path)
    for x, y in data[1:]:
        _, want = pt(x, y)
        _, got = loaded(x, y)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    pt.copyWeightsToHost()
    loaded.copyWeightsToHost()
    assert loaded.model.W.shape == model.W.shape == ((4, 6, 3) if mode == VariableRetrievalMode.AllReplicas
                                                     else (2, 6, 3))
    torch.testing.assert_close(loaded.model.W, model.W.detach(), rtol=0, atol=0)

    other = Shared(2)  # grouped another way: not the program's grouping
    other.W.replicaGrouping(CommGroupType.Consecutive, 2, mode)
    with pytest.raises(poptorch.Error, match=r"groups W across replicas as CommGroup\(Orthogonal, 2\), "
                                             rf"{mode.name}, the model as CommGroup\(Consecutive, 2\)"):
        poptorch.trainingModel(other, opts.clone()).loadExecutable(path)
