"""Custom argument types read through `poptorch.ICustomArgParser`
(`registerCustomArgParser`): inputs, batching, training, a DataLoader whose
collate function makes them, and dict subclasses as results."""

import collections
import copy

import pytest
import torch
from torch import nn

import tilefx as poptorch


class MyArg:
    def __init__(self, a, b):
        self.a = a
        self.b = b


class MyParser(poptorch.ICustomArgParser):
    def yieldTensors(self, struct):
        yield struct.a
        yield struct.b

    def reconstruct(self, _original_structure, tensor_iterator):
        return MyArg(next(tensor_iterator), next(tensor_iterator))


poptorch.registerCustomArgParser(MyArg, MyParser())


class OutputContainer(collections.OrderedDict):
    pass


class Model(nn.Module):
    def forward(self, args):
        out = OutputContainer()
        out["sum"] = args.a + poptorch.ipu_print_tensor(args.b)
        out["a"] = args.a
        return out


def test_a_custom_argument_is_read_by_its_parser_and_batched():
    model = Model()
    pt = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    for _ in range(2):  # a new object of the same layout is the same call
        arg = MyArg(torch.randn(4, 3), torch.randn(4, 3))
        out = pt(arg)
        assert type(out) is OutputContainer and list(out) == ["sum", "a"]
        torch.testing.assert_close(out["sum"], arg.a + arg.b)
        torch.testing.assert_close(out["a"], arg.a)
    with pytest.raises(poptorch.Error,
                       match=r"args\[1\]: expected torch.Size\(\[4, 3\]\) but got torch.Size\(\[4, 2\]\)"):
        pt(MyArg(torch.ones(4, 3), torch.ones(4, 2)))


class Batch:
    def __init__(self, data, label):
        self.data = data
        self.label = label


class BatchParser(poptorch.ICustomArgParser):
    def yieldTensors(self, struct):
        yield struct.data
        yield struct.label

    def reconstruct(self, struct, tensor_iterator):
        return type(struct)(*tensor_iterator)


poptorch.registerCustomArgParser(Batch, BatchParser())


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, batch):
        out = self.fc(batch.data)
        return out, nn.functional.cross_entropy(out, batch.label)


def _collate(items):
    return Batch(torch.stack([x for x, _ in items]), torch.stack([y for _, y in items]))


def test_training_from_a_dataloader_of_custom_batches():
    torch.manual_seed(0)
    model = Classifier()
    ref = copy.deepcopy(model)
    opts = poptorch.Options().deviceIterations(2)
    data = [(torch.randn(6), torch.randint(0, 3, ())) for _ in range(16)]
    loader = poptorch.DataLoader(opts, data, batch_size=2, collate_fn=_collate)
    pt = poptorch.trainingModel(model, opts, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for batch in loader:
        assert isinstance(batch, Batch) and batch.data.shape == (4, 6)
        _, loss = pt(batch)
        for i in range(2):  # two device iterations, one weight update each
            _, ref_loss = ref(Batch(batch.data[2 * i:2 * i + 2], batch.label[2 * i:2 * i + 2]))
            ref_opt.zero_grad()
            ref_loss.backward()
            ref_opt.step()
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q.detach(), rtol=1e-5, atol=1e-6)


def test_parser_errors_are_clear():
    with pytest.raises(poptorch.Error, match="ICustomArgParser"):
        poptorch.registerCustomArgParser(MyArg, object())
    with pytest.raises(poptorch.Error, match="expected a class"):
        poptorch.registerCustomArgParser(MyArg(1, 2), MyParser())
    with pytest.raises(poptorch.Error, match="already an argument type"):
        poptorch.registerCustomArgParser(tuple, MyParser())
    with pytest.raises(TypeError):
        poptorch.ICustomArgParser()  # abstract: yieldTensors and reconstruct

    class Broken:
        def __init__(self, x):
            self.x = x

    class BrokenParser(poptorch.ICustomArgParser):
        def yieldTensors(self, struct):
            yield struct.missing

        def reconstruct(self, original_structure, tensor_iterator):
            return original_structure

    poptorch.registerCustomArgParser(Broken, BrokenParser())

    class Uses(nn.Module):
        def forward(self, b):
            return b.x * 2

    with pytest.raises(poptorch.Error, match="BrokenParser.yieldTensors failed on a Broken"):
        poptorch.inferenceModel(Uses())(Broken(torch.ones(2)))


def test_a_dict_subclass_that_cannot_be_rebuilt_from_items_comes_back_as_a_dict():
    class Tagged(dict):
        def __init__(self, tag, items=()):
            super().__init__(items)
            self.tag = tag

    class Returns(nn.Module):
        def forward(self, x):
            return Tagged("t", {"a": x * 2})

    out = poptorch.inferenceModel(Returns())(torch.ones(2))
    assert type(out) is dict and list(out) == ["a"]
    torch.testing.assert_close(out["a"], torch.full((2,), 2.0))
