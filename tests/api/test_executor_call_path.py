"""The per-call path of a wrapped model keeps every check while it caches
what does not change between calls (runner/module_snapshot.py, the same-call
fast path of PoplarExecutor.__call__): the implicit weight sync between a
training and an inference model, the write-back into the module's current
tensors, input validation on later calls and replicaGrouping set late."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from models import TutorialCNN, WithLoss
from tilefx.runner.module_snapshot import ModuleSnapshot, snapshot_of


def _data(n=4):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)


def test_training_and_inference_alternate_with_implicit_sync():
    torch.manual_seed(0)
    model = TutorialCNN()
    trainer = tilefx.trainingModel(WithLoss(model, nn.CrossEntropyLoss()),
                                   optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    inference = tilefx.inferenceModel(model)
    x, y = _data()
    seen = []
    for _ in range(3):
        trainer(x, y)
        out = inference(x)
        out_again = inference(x)  # nothing written in between: no reload, same numbers
        torch.testing.assert_close(out, model.eval()(x), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out_again, out, rtol=0, atol=0)
        seen.append(out)
    assert not torch.allclose(seen[0], seen[1]) and not torch.allclose(seen[1], seen[2])


def test_inference_sees_copy_weights_to_host_of_another_executor():
    torch.manual_seed(0)
    model = TutorialCNN()
    trainer = tilefx.trainingModel(WithLoss(model, nn.CrossEntropyLoss()),
                                   optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    inference = tilefx.inferenceModel(model)
    x, y = _data()
    inference(x)
    trainer(x, y)
    trainer.copyWeightsToHost()
    torch.testing.assert_close(inference(x), model.eval()(x), rtol=1e-5, atol=1e-5)


def test_write_back_goes_to_a_parameter_replaced_after_compiling():
    """Replacing a parameter object makes the executor walk the module tree
    again: the trained weight is written into the new tensor, as before the
    snapshot existed."""
    torch.manual_seed(0)
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    x, y = _data()
    trainer(x, y)
    old = model.model.layer4.bias
    new = nn.Parameter(old.detach().clone())
    model.model.layer4.bias = new
    device_before = torch.from_numpy(trainer._weights["model.layer4.bias"].copy())
    trainer(x, y)
    after = torch.from_numpy(trainer._weights["model.layer4.bias"].copy())
    assert not torch.equal(after, device_before)
    torch.testing.assert_close(new.detach(), after, rtol=0, atol=0)  # the new tensor got the step
    torch.testing.assert_close(old.detach(), device_before, rtol=0, atol=0)  # the old one did not


def test_write_back_goes_to_new_data_given_to_a_parameter():
    """A parameter given new memory (`.data = ...`) is no longer the
    executor's weight: the write-back, which skips weights updated in their
    parameter's own memory, copies the trained weight into the new memory."""
    torch.manual_seed(0)
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    x, y = _data()
    trainer(x, y)
    p = model.model.layer4.bias
    p.data = torch.zeros_like(p)
    assert trainer._weights["model.layer4.bias"].ctypes.data != p.data_ptr()
    trainer(x, y)
    torch.testing.assert_close(p.detach(), torch.from_numpy(trainer._weights["model.layer4.bias"].copy()),
                               rtol=0, atol=0)
    assert p.abs().sum() > 0


def test_later_calls_are_still_checked():
    torch.manual_seed(0)
    model = TutorialCNN()
    inference = tilefx.inferenceModel(model)
    x, _ = _data()
    inference(x)
    inference(x)  # the fast path
    with pytest.raises(tilefx.Error, match=r"but got torch.Size\(\[2, 1, 28, 28\]\)"):
        inference(x[:2])
    with pytest.raises(tilefx.Error, match="Data type mismatch for x: expected torch.float32 but got torch.float64"):
        inference(x.double())
    with pytest.raises(tilefx.Error, match="meta device"):
        inference(torch.empty(4, 1, 28, 28, device="meta"))
    with pytest.raises(tilefx.Error, match="does not match"):
        inference(x, x)
    # by keyword, and with a tensor subclass: the full binding, the same numbers
    torch.testing.assert_close(inference(x=x), inference(x), rtol=0, atol=0)
    torch.testing.assert_close(inference(nn.Parameter(x, requires_grad=False)), inference(x),
                               rtol=0, atol=0)


def test_replica_grouping_set_between_calls_is_still_an_error():
    from tilefx import CommGroupType, VariableRetrievalMode

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.W = nn.Parameter(torch.randn(5, 3))

        def forward(self, x):
            return x @ self.W

    model = Net()
    pt = tilefx.inferenceModel(model, tilefx.Options().replicationFactor(2))
    pt(torch.randn(4, 5))
    pt(torch.randn(4, 5))
    model.W.data = torch.randn(2, 5, 3)
    pt.W.replicaGrouping(CommGroupType.NoGrouping, 0, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(tilefx.Error, match="after the model was compiled"):
        pt(torch.randn(4, 5))


def test_module_snapshot_notices_every_change_of_the_tree():
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    snap = ModuleSnapshot(model)
    assert snap.valid() and snapshot_of(model, snap) is snap
    assert set(snap.named_p) == {n for n, _ in model.named_parameters()}
    changes = [
        lambda m: setattr(m.model.layer3, "weight", nn.Parameter(torch.zeros(256, 320))),
        lambda m: m.model.layer3.register_buffer("extra", torch.zeros(1)),
        lambda m: setattr(m.model, "layer1", nn.Linear(2, 2)),
        lambda m: setattr(m.model.layer3, "bias", None),
        lambda m: delattr(m.model, "layer3_act"),
        lambda m: m.model.layer1.conv.add_module("more", nn.ReLU()),
    ]
    for change in changes:
        m = copy.deepcopy(model)
        snap = ModuleSnapshot(m)
        change(m)
        assert not snap.valid()
        fresh = snapshot_of(m, snap)
        assert fresh is not snap and fresh.valid()
        assert fresh.named_p.keys() == dict(m.named_parameters(remove_duplicate=False)).keys()


def test_training_weights_are_the_parameters_memory():
    """A training executor updates the host model's parameters in place (its
    weights are their memory), so the write-back after a step copies nothing;
    the values are those of a copy-based write-back."""
    torch.manual_seed(0)
    model = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    ref = copy.deepcopy(model)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1,
                                                                       momentum=0.9))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, y = _data()
    for _ in range(2):
        trainer(x, y)
        ref_opt.zero_grad()
        ref(x, y)[1].backward()
        ref_opt.step()
    w = model.model.layer4.bias
    assert trainer._weights["model.layer4.bias"].ctypes.data == w.data_ptr()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


class _Returns(nn.Module):
    """Returns what the executor keeps or was given: a weight, a view of it,
    the input (dropout in eval is a clone, which the executor aliases), a
    buffer it updates, and one computed value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1.0)
        return self.fc.weight, self.fc.weight.t(), self.drop(x), self.count, self.fc(x)


def test_outputs_never_share_memory_with_what_the_executor_keeps():
    """Outputs are handed over without a copy only when nothing else holds
    them (runner/host_arrays.py fresh_outputs): a weight, a view of one, the input
    and an updated buffer come back as copies, and writing into any output
    changes neither the model nor the next call."""
    torch.manual_seed(0)
    m = _Returns().eval()
    ex = tilefx.inferenceModel(m)
    x = torch.randn(2, 4)
    w, wt, same_x, count, y = ex(x)
    for out, kept in ((w, m.fc.weight), (wt, m.fc.weight), (same_x, x)):
        assert not np.shares_memory(out.numpy(), kept.detach().numpy())
    torch.testing.assert_close(same_x, x)
    want_y = m.fc(x).detach()
    for out in (w, wt, same_x, count, y):
        out.mul_(0.0)  # the caller's to change
    w2, _, same_x2, count2, y2 = ex(x)
    torch.testing.assert_close(w2, m.fc.weight.detach())
    torch.testing.assert_close(same_x2, x)
    torch.testing.assert_close(count2, torch.full((4,), 2.0))
    torch.testing.assert_close(y2, want_y)
    assert not np.shares_memory(y2.numpy(), y.numpy())


def test_an_output_of_one_call_is_not_overwritten_by_the_next():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64), nn.Tanh())  # a fused tail
    ex = tilefx.inferenceModel(m)
    a, b = torch.randn(8, 64), torch.randn(8, 64)
    first = ex(a)
    kept = first.clone()
    second = ex(b)
    torch.testing.assert_close(first, kept)
    torch.testing.assert_close(second, m(b).detach(), rtol=1e-5, atol=1e-6)


def test_writing_into_an_input_after_the_call_changes_nothing_returned():
    """The executor reads a call's inputs in place (no copy), and no output
    or kept value is that memory."""
    torch.manual_seed(0)
    m = _Returns().eval()
    ex = tilefx.inferenceModel(m)
    x = torch.randn(2, 4)
    outs = ex(x)
    before = [o.clone() for o in outs]
    x.fill_(7.0)
    for o, b in zip(outs, before):
        torch.testing.assert_close(o, b)
    torch.testing.assert_close(ex(torch.zeros(2, 4))[3], torch.full((4,), 2.0))


def test_a_constant_output_is_a_copy_each_call():
    """Constants the program makes once (executor.constants) come out as
    copies: writing into one changes nothing later."""
    class Const(nn.Module):
        def forward(self, x):
            return x * 2, torch.full((3,), 5.0), torch.tensor(1.5)

    ex = tilefx.inferenceModel(Const())
    x = torch.ones(2)
    _, c, s = ex(x)
    assert ex._program.main.constants  # the fills were made once
    c.fill_(0.0)
    s.fill_(0.0)
    _, c2, s2 = ex(x)
    torch.testing.assert_close(c2, torch.full((3,), 5.0))
    torch.testing.assert_close(s2, torch.tensor(1.5))


class _Views(nn.Module):
    """Outputs that view other arrays: a result (a language model's logits
    shaped back to (batch, sequence, vocabulary)), one result viewed twice,
    the input, and a constant."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)

    def forward(self, x):
        y = self.fc(x.view(-1, 4))
        z = torch.tanh(x)
        c = torch.full((2, 6), 3.0)
        return y.view(2, 3, 6), z.view(-1), z.view(3, 2, 4), x.view(-1), c.view(-1)


@pytest.mark.parametrize("training", [False, True])
def test_an_output_viewing_a_result_comes_without_a_copy_and_shares_nothing(training, monkeypatch):
    """A view of a kernel's result that no other output shares is handed over
    as it is (runner/host_arrays.py fresh_outputs); views of one result seen by two
    outputs, of the input or of a constant are copies: no output shares
    memory with another, with the input or with the next call's."""
    import tilefx.runner.running as api_executor  # the call path copies outputs

    torch.manual_seed(0)
    copies = []
    copied = api_executor.copied
    monkeypatch.setattr(api_executor, "copied", lambda v: copies.append(tuple(v.shape)) or copied(v))
    m = _Views()
    ref = copy.deepcopy(m)
    if training:
        class Loss(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                out = self.m(x)
                return out, out[0].square().mean()

        ex = tilefx.trainingModel(Loss(m), optimizer=tilefx.optim.SGD(m.parameters(), lr=0.0))
    else:
        ex = tilefx.inferenceModel(m)
    x = torch.randn(2, 3, 4)
    got = ex(x)
    outs = list(got[0] if training else got)
    want = ref(x)
    for o, w in zip(outs, want):
        torch.testing.assert_close(o, w.detach(), rtol=1e-6, atol=1e-6)
    assert (2, 3, 6) not in copies  # the logits' view: no copy
    assert (2, 3, 4) in copies or (24,) in copies  # one of the two views of tanh's result: a copy
    arrays = [o.numpy() for o in outs] + [x.numpy()]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)
    again = list(ex(x)[0] if training else ex(x))
    for o, a in zip(outs, again):
        assert not np.shares_memory(o.numpy(), a.numpy())
        o.mul_(0.0)
    for o, w in zip(ex(x)[0] if training else ex(x), want):
        torch.testing.assert_close(o, w.detach(), rtol=1e-6, atol=1e-6)


def test_load_state_dict_on_the_executor_reaches_the_device():
    """PopTorch's executor.load_state_dict loads the wrapped model's and copies
    the weights to the device: an inference executor computes with them at
    once, a training one trains from them."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3)).eval()
    ex = tilefx.inferenceModel(model)
    x = torch.randn(2, 4)
    before = ex(x)
    state = copy.deepcopy(model.state_dict())
    state["0.bias"] += 1.0
    ex.load_state_dict(state)
    torch.testing.assert_close(ex(x), before + 1.0)
    torch.testing.assert_close(model[0].bias.detach(), state["0.bias"])

    net = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    ref = copy.deepcopy(net)
    trainer = tilefx.trainingModel(net, optimizer=tilefx.optim.SGD(net.parameters(), lr=0.1))
    xs, ys = _data()
    trainer(xs, ys)
    trainer.load_state_dict(ref.state_dict())  # back to the start
    trainer(xs, ys)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(xs, ys)[1].backward()
    opt.step()
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


def test_weights_that_no_longer_fit_the_program_are_a_clear_error():
    """A parameter given other shapes after compiling (a layer replaced by a
    wider one; an embedding resized in place, as transformers'
    resize_token_embeddings does through `.data`) is a tilefx.Error at the next
    call or copyWeightsToDevice, not the old weights used silently nor a
    kernel's failure."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
    ex = tilefx.inferenceModel(model)
    x = torch.randn(2, 4)
    ex(x)
    model[2] = nn.Linear(3, 5)
    with pytest.raises(tilefx.Error, match=r"2.weight.*\(5, 3\).*compiled for \(2, 3\)"):
        ex(x)

    other = nn.Sequential(nn.Embedding(10, 4)).eval()
    ex2 = tilefx.inferenceModel(other)
    ids = torch.tensor([[1, 2, 3]])
    ex2(ids)
    other[0].weight.data = torch.randn(12, 4)
    with pytest.raises(tilefx.Error, match=r"0.weight.*\(12, 4\)"):
        ex2.copyWeightsToDevice()
    with pytest.raises(tilefx.Error, match="compiled for"):
        ex2.load_state_dict(other.state_dict())
