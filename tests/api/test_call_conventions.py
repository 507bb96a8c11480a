"""PopTorch's input and output conventions (nested tuples/lists/dicts split
by the batching factors, None, keyword, default and non-tensor arguments,
0-d tensors, outputs of any nesting), and the executor as the model
(attributes, indexing, parameters, state_dict, train/eval, repr)."""

from __future__ import annotations

import collections
import copy

import pytest
import torch
from torch import nn

import tilefx


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, pair, extra=None, *, scale=2.0, named=None, mode="add"):
        y = self.fc(x) * scale + pair[0] - pair[1][0]
        if extra is not None:
            y = y + extra
        if named is not None:
            y = y * named["w"]
        if mode == "neg":
            y = -y
        return {"y": y, "none": None, "count": 3, "parts": (y.sum(1), [x, pair[0]])}


def _inputs(batch):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(batch, 4, generator=g),
            (torch.randn(batch, 4, generator=g), [torch.randn(batch, 4, generator=g)]),
            {"w": torch.randn(batch, 4, generator=g)})


def test_nested_keyword_and_constant_arguments_match_pytorch():
    model = Nested()
    x, pair, named = _inputs(6)
    opts = tilefx.Options().deviceIterations(3)
    ipu = tilefx.inferenceModel(model, opts)
    out = ipu(x, pair, scale=3.0, named=named, mode="neg")
    ref = model(x, pair, scale=3.0, named=named, mode="neg")
    assert set(out) == {"y", "none", "count", "parts"}
    assert out["none"] is None and out["count"] == 3
    torch.testing.assert_close(out["y"], ref["y"].detach())
    torch.testing.assert_close(out["parts"][0], ref["parts"][0].detach())
    assert isinstance(out["parts"][1], list)
    torch.testing.assert_close(out["parts"][1][0], x)
    torch.testing.assert_close(out["parts"][1][1], pair[0])
    # the same call again runs; a default passed explicitly is the same call
    torch.testing.assert_close(ipu(x, pair, None, scale=3.0, named=named, mode="neg")["y"],
                               ref["y"].detach())


def test_every_tensor_leaf_is_split_by_the_batching_factors():
    """deviceIterations 2 x gradientAccumulation 2: each leaf's dim 0 holds 4
    micro-batches of 2; a micro-batch of one leaf meets the same one of the others."""
    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, batch):
            pred = self.fc(batch["x"]["features"]).squeeze(1)
            return pred, nn.functional.mse_loss(pred, batch["y"][0])

    opts = tilefx.Options().deviceIterations(2).outputMode(tilefx.OutputMode.All)
    opts.Training.gradientAccumulation(2)
    model = Loss()
    w0 = model.fc.weight.detach().clone()
    ipu = tilefx.trainingModel(model, opts, optimizer=torch.optim.SGD(model.parameters(), lr=0.0))
    feats, ys = torch.randn(8, 3), torch.randn(8)
    pred, loss = ipu({"x": {"features": feats}, "y": [ys]})
    assert pred.shape == (8,) and loss.shape == (4,)
    ref = feats @ w0.T + model.fc.bias.detach()
    torch.testing.assert_close(pred, ref.squeeze(1))
    per_micro = ((ref.squeeze(1) - ys) ** 2).reshape(4, 2).mean(1)
    torch.testing.assert_close(loss, per_micro)


def test_a_leaf_whose_batch_is_not_a_multiple_is_named():
    opts = tilefx.Options().deviceIterations(2)
    ipu = tilefx.inferenceModel(Nested(), opts)
    x, pair, _ = _inputs(4)
    with pytest.raises(AssertionError, match=r"pair\[1\]\[0\]"):
        ipu(x, (pair[0], [torch.randn(3, 4)]))


def test_a_numpy_argument_is_compared_by_value_and_shown_briefly():
    """A numpy array passed as a (compiled-in) non-tensor argument: a second
    call with the same array raised numpy's "truth value of an array is
    ambiguous" ValueError; a large one's mismatch printed every number."""
    import numpy as np

    class Scaled(nn.Module):
        def forward(self, x, scale):
            return x * torch.as_tensor(scale)

    ipu = tilefx.inferenceModel(Scaled())
    x, scale = torch.randn(2, 3), np.array([1.0, 2.0, 3.0], np.float32)
    torch.testing.assert_close(ipu(x, scale), x * torch.from_numpy(scale))
    torch.testing.assert_close(ipu(x, scale.copy()), x * torch.from_numpy(scale))  # equal: the same call
    with pytest.raises(tilefx.Error, match=r"Value mismatch for scale: expected array\(\[1., 2., 3.\], "
                                           r"dtype=float32\) but got array\(\[1., 2., 4.\]"):
        ipu(x, np.array([1.0, 2.0, 4.0], np.float32))
    with pytest.raises(tilefx.Error, match=r"Value mismatch for scale: expected array.* but got a "
                                           r"numpy.ndarray of shape \(100, 3\) and dtype float32;"):
        ipu(x, np.ones((100, 3), np.float32))


def test_later_calls_must_match_the_compiled_call():
    ipu = tilefx.inferenceModel(Nested())
    x, pair, named = _inputs(2)
    ipu(x, pair, scale=3.0)
    with pytest.raises(tilefx.Error, match=r"Value mismatch for scale: expected 3.0 but got 4.0"):
        ipu(x, pair, scale=4.0)
    with pytest.raises(tilefx.Error, match=r"Type mismatch for extra"):
        ipu(x, pair, torch.randn(2, 4), scale=3.0)
    with pytest.raises(tilefx.Error, match=r"structure"):
        ipu(x, (pair[0], [pair[1][0], pair[1][0]]), scale=3.0)
    with pytest.raises(tilefx.Error, match=r"Shape mismatch for pair\[0\]: expected torch.Size\(\[2, 4\]\) "
                                           r"but got torch.Size\(\[3, 4\]\)"):
        ipu(x, (torch.randn(3, 4), pair[1]), scale=3.0)
    with pytest.raises(tilefx.Error, match="Mandatory parameter pair missing.*does not match"):
        ipu(x)  # a mandatory argument missing
    with pytest.raises(tilefx.Error, match=r"Type mismatch for extra: expected None but got a Tensor"):
        ipu(x, pair, torch.randn(2, 4), scale=3.0)
    with pytest.raises(tilefx.Error, match=r"Data type mismatch for x: expected torch.float32 but got "
                                           r"torch.float64"):
        ipu(x.double(), pair, scale=3.0)


class _TensorDefault(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y=torch.ones(3)):
        return self.fc(x) + y


def test_a_tensor_default_is_an_input_as_in_poptorch():
    """PopTorch's argument parser appends a tensor default to the inputs like
    a passed tensor: `y` is an input of the compiled program, so passing it
    later (by position or keyword) runs the same executable with the new
    value (it was compiled in as a constant: a mismatch error); its shape and
    dtype are checked as any input's, and it is split by the batching factors."""
    torch.manual_seed(0)
    model = _TensorDefault()
    x, y = torch.randn(2, 3), torch.randn(3)
    ipu = tilefx.inferenceModel(model)
    with torch.no_grad():
        torch.testing.assert_close(ipu(x), model(x), rtol=1e-5, atol=1e-6)
        program = ipu._program
        torch.testing.assert_close(ipu(x, y), model(x, y), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ipu(x, y=2 * y), model(x, 2 * y), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ipu(x), model(x), rtol=1e-5, atol=1e-6)
    assert ipu._program is program and ipu._call.tensor_names() == ["x", "y"]
    with pytest.raises(tilefx.Error, match=r"Shape mismatch for y: expected torch.Size\(\[3\]\)"):
        ipu(x, torch.randn(4))
    with pytest.raises(tilefx.Error, match=r"Data type mismatch for y"):
        ipu(x, y.double())
    # (3,) is not a multiple of deviceIterations 2: PopTorch's batch error, naming y
    with pytest.raises(AssertionError, match=r"input y has batch size 3"):
        tilefx.inferenceModel(_TensorDefault(), tilefx.Options().deviceIterations(2))(torch.randn(4, 3))


class _Star(nn.Module):
    def forward(self, a, *c, z=None, **w):
        out = a + sum(c)
        if z is not None:
            out = out * z
        return out + sum(w.values())


def test_mismatched_calls_name_the_arguments_in_poptorchs_words():
    """PopTorch's messages ("Missing arguments: z.", "Number of positional
    arguments mismatch: expected 3 arguments but got 2", "Type mismatch for z:
    expected ... Tensor ... but got ... None") are what users and their tests
    look for; ours said only that the structure differed."""
    a, b, c, z, m = (torch.randn(2, 2) for _ in range(5))
    ipu = tilefx.inferenceModel(_Star())
    torch.testing.assert_close(ipu(a, b, c, z=z, m=m), _Star()(a, b, c, z=z, m=m))
    with pytest.raises(tilefx.Error, match=r"Missing arguments: m\."):
        ipu(a, b, c, z=z)
    with pytest.raises(tilefx.Error, match=r"Unexpected arguments: n\."):
        ipu(a, b, c, z=z, m=m, n=m)
    with pytest.raises(tilefx.Error, match=r"Number of positional arguments mismatch: expected 3 "
                                           r"arguments but got 2"):
        ipu(a, b, z=z, m=m)
    with pytest.raises(tilefx.Error, match=r"Type mismatch for z: expected .*Tensor.* but got .*None"):
        ipu(a, b, c, z=None, m=m)


def test_destroy_then_call_compiles_again_for_the_new_inputs():
    """PopTorch's advice for new input shapes: "call destroy() on the current
    one and try again". The next call (or compile()) compiles for its inputs;
    a training model goes on from the weights destroy() wrote back (buffers
    too), with a new optimizer state, as a new wrapper would."""
    ipu = tilefx.inferenceModel(Nested())
    x, pair, _ = _inputs(2)
    ipu(x, pair)
    x3, pair3, _ = _inputs(3)
    with pytest.raises(tilefx.Error, match="Shape mismatch for x"):
        ipu(x3, pair3)
    ipu.destroy()
    assert not ipu.isCompiled()
    for _ in range(2):
        torch.testing.assert_close(ipu(x3, pair3)["y"], Nested.forward(ipu.model, x3, pair3)["y"])
    ipu.destroy()
    ipu.compile(x, pair)
    assert ipu.isCompiled()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))

    class WithMSE(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x, y):
            out = self.m(x)
            return out, nn.functional.mse_loss(out, y)

    ours, ref = WithMSE(model), WithMSE(copy.deepcopy(model))
    trainer = tilefx.trainingModel(ours, optimizer=torch.optim.SGD(ours.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    for batch in (8, 8, 6, 6):  # a destroy() before the batch size changes
        x, y = torch.randn(batch, 4, generator=g), torch.randn(batch, 3, generator=g)
        if batch == 6 and trainer.isCompiled() and trainer._compiled_inputs[0][0][0] == 8:
            trainer.destroy()
        _, loss = trainer(x, y)
        ref_opt.zero_grad()
        want = ref(x, y)[1]
        want.backward()
        ref_opt.step()
        torch.testing.assert_close(loss, want.detach(), rtol=1e-6, atol=1e-6)
    trainer.copyWeightsToHost()
    for (n, p), (_, q) in zip(ref.named_parameters(), ours.named_parameters()):
        torch.testing.assert_close(q, p, rtol=1e-6, atol=1e-6, msg=lambda m, n=n: f"{n}: {m}")
    torch.testing.assert_close(ours.m[1].running_var, ref.m[1].running_var)
    # a module another live training model wraps meanwhile stays PopTorch's error
    trainer.destroy()
    other = tilefx.trainingModel(ours)
    with pytest.raises(tilefx.Error, match="already been wrapped"):
        trainer(x, y)
    other.destroy()


def test_zero_dim_tensor_inputs_and_outputs():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x, factor):
            return self.fc(x) * factor, factor * 2

    model = Scale()
    x, f = torch.randn(2, 3), torch.tensor(1.5)
    out, f2 = tilefx.inferenceModel(model)(x, f)
    torch.testing.assert_close(out, (model.fc(x) * f).detach())
    assert f2.shape == () and float(f2) == 3.0
    # with batching factors a 0-d tensor has no batch to split (PopTorch: an error)
    with pytest.raises(AssertionError, match="factor"):
        tilefx.inferenceModel(Scale(), tilefx.Options().deviceIterations(2))(torch.randn(4, 3), f)


def test_named_tuple_and_ordered_dict_outputs_keep_their_types():
    Out = collections.namedtuple("Out", ["a", "b"])

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            y = self.fc(x)
            return Out(y, collections.OrderedDict(z=y + 1))

    model = M()
    x = torch.randn(3, 2)
    out = tilefx.inferenceModel(model)(x)
    assert isinstance(out, Out) and isinstance(out.b, collections.OrderedDict)
    torch.testing.assert_close(out.b["z"], (model.fc(x) + 1).detach())


# -- the executor is the model ---------------------------------------------
def test_executor_reaches_the_wrapped_module():
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    ipu = tilefx.inferenceModel(seq)
    assert isinstance(ipu, nn.Sequential) and isinstance(ipu, tilefx.PoplarExecutor)
    assert ipu[0] is seq[0] and ipu[0].weight is seq[0].weight and len(ipu) == 3
    assert [type(m) for m in ipu] == [nn.Linear, nn.ReLU, nn.Linear]
    assert [n for n, _ in ipu.named_parameters()] == [n for n, _ in seq.named_parameters()]
    assert all(a is b for a, b in zip(ipu.parameters(), seq.parameters()))
    assert list(ipu.state_dict()) == list(seq.state_dict())
    assert repr(ipu) == repr(seq)
    # the executor's own methods still come first
    x = torch.randn(3, 4)
    torch.testing.assert_close(ipu(x), seq(x).detach())
    assert ipu.isCompiled() and "aten.addmm" in ipu.ir("import")


def test_executor_buffers_train_eval_and_attributes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(3)
            self.fc = nn.Linear(3, 1)
            self.note = "kept"

        def forward(self, x, y):
            return nn.functional.mse_loss(self.fc(self.bn(x)).squeeze(1), y)

        def describe(self):
            return f"Net({self.note})"

    net = Net()
    ipu = tilefx.trainingModel(net, optimizer=torch.optim.SGD(net.parameters(), lr=0.1))
    assert ipu.training and ipu.note == "kept" and ipu.describe() == "Net(kept)"
    assert [n for n, _ in ipu.named_buffers()] == [n for n, _ in net.named_buffers()]
    ipu.eval()  # the executor's flag and the (shared) submodules', as a shallow copy
    assert not ipu.training and not net.bn.training and net.training
    ipu.train()
    w0 = net.fc.weight.detach().clone()
    ipu(torch.randn(4, 3), torch.randn(4))
    assert not torch.equal(ipu.fc.weight.detach(), w0)  # trained, seen through the executor
    assert torch.equal(ipu.state_dict()["fc.weight"], net.fc.weight.detach())
    # wrapping an executor wraps its model
    inf = tilefx.inferenceModel(ipu)
    assert inf.model is net


def test_hugging_face_style_attribute_access():
    pytest.importorskip("transformers")
    from hf_families import FAMILIES

    model = FAMILIES["bert"].build(0.0)
    ipu = tilefx.inferenceModel(model)
    assert ipu.config.hidden_size == 16 and ipu.bert.embeddings.word_embeddings is \
        model.bert.embeddings.word_embeddings
    assert isinstance(ipu, type(model)) and ipu.dtype == torch.float32


def test_a_dictionary_in_another_order_is_the_same_call():
    """PopTorch binds a dictionary argument by its keys: the same keys in
    another order run the compiled program; a missing or extra key is named."""
    class Divider(torch.nn.Module):
        def forward(self, d):
            return d["x"] / d["y"]

    model = tilefx.inferenceModel(Divider())
    x, y = torch.tensor([1.0]), torch.tensor([2.0])
    torch.testing.assert_close(model({"x": x, "y": y}), x / y)
    program = model._program
    torch.testing.assert_close(model({"y": y * 4, "x": x}), x / (y * 4))
    assert model._program is program
    with pytest.raises(tilefx.Error, match=r"Missing arguments: x\."):
        model({"y": y})
    with pytest.raises(tilefx.Error, match=r"Unexpected arguments: z\."):
        model({"x": x, "y": y, "z": y})
