"""BeginBlock annotations as a PyTorch program sees them: their repr
(`poptorch.module_repr`), saving and copying annotated and wrapped models,
and the legacy `BeginBlock(function, user_id, ipu_id)` (PopTorch user guide,
"Multi-IPU execution strategies" and "Introduction": a wrapped model "can be
saved or inspected as a PyTorch model")."""

import copy
import io

import pytest
import torch
from torch import nn

import tilefx


class Twice(nn.Module):
    def forward(self, x):
        return x * 2


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 4)
        self.l2 = Twice()

    def forward(self, x):
        return self.l2(self.l1(x))


def add_one(x):
    return x + 1.0


def test_module_repr_writes_each_layers_block_before_it():
    m = Pair()
    assert tilefx.module_repr(m) == repr(m)
    tilefx.BeginBlock(m.l2, ipu_id=1)
    text = tilefx.module_repr(m)
    assert "(l2): BeginBlock(user_id=None, ipu_id=1) Twice()" in text
    assert "(l1): Linear(in_features=4, out_features=4, bias=True)" in text
    tilefx.BeginBlock(m.l1, user_id=3, ipu_id=0)
    assert tilefx.module_repr(m.l1).startswith("BeginBlock(user_id=3, ipu_id=0) Linear(")
    assert "(l2): BeginBlock(user_id=None, ipu_id=1)" in repr(tilefx.inferenceModel(m))


def test_annotated_modules_copy_save_and_load_with_their_blocks():
    m = Pair()
    tilefx.BeginBlock(m.l2, user_id=1, ipu_id=2)
    for other in (copy.copy(m), copy.deepcopy(m)):
        assert "BeginBlock(user_id=1, ipu_id=2) Twice()" in tilefx.module_repr(other)
    buf = io.BytesIO()
    torch.save(m, buf)
    assert type(m) is Pair
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert "BeginBlock(user_id=1, ipu_id=2) Twice()" in tilefx.module_repr(loaded)
    x = torch.randn(2, 4)
    torch.testing.assert_close(loaded(x), m(x))


def test_a_wrapped_model_saves_as_its_model_with_the_trained_weights():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    trainer = tilefx.trainingModel(_WithLoss(model), optimizer=tilefx.optim.SGD(model.parameters(), lr=0.5))
    before = model[0].weight.detach().clone()
    trainer(torch.randn(2, 4))
    buf = io.BytesIO()
    torch.save(trainer, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert type(loaded) is _WithLoss and not isinstance(loaded, tilefx.PoplarExecutor)
    assert not torch.equal(loaded.model[0].weight, before)
    torch.testing.assert_close(loaded.model[0].weight, model[0].weight)


class _WithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        return out, tilefx.identity_loss(out.sum(), reduction="sum")


def test_legacy_begin_block_of_a_function_starts_its_block():
    block = tilefx.BeginBlock(add_one, 1, 2)
    assert block._user_id == 1 and block._ipu_id == 2
    assert torch.equal(block(torch.zeros(2)), torch.ones(2))
    buf = io.BytesIO()
    torch.save(block, buf)

    class Model(nn.Module):
        def forward(self, x):
            x = tilefx.BeginBlock(add_one, "A", 0)(x)
            return tilefx.BeginBlock(add_one, "B", 1)(x * 3)

    opts = tilefx.Options().deviceIterations(2).setExecutionStrategy(tilefx.PipelinedExecution("A", "B"))
    model = tilefx.inferenceModel(Model(), opts)
    x = torch.randn(2, 3)
    torch.testing.assert_close(model(x), (x + 1) * 3 + 1)
    from tilefx.dialects.irutil import to_py
    from tilefx.dialects.names import STAGES_KEY

    stages = to_py(model._program.module.attributes[STAGES_KEY])
    assert stages["num_ipus"] == 2 and stages["pipeline_stages"] == 2


def test_a_second_begin_block_on_a_module_is_poptorchs_error_until_remove_blocks():
    m = Pair()
    tilefx.BeginBlock(m.l2, ipu_id=1)
    with pytest.raises(tilefx.Error, match="module has already been assigned to a block"):
        tilefx.BeginBlock(m.l2, ipu_id=1)
    tilefx.removeBlocks(m)
    tilefx.BeginBlock(m.l2, ipu_id=1)  # cleared: a block again
    assert "BeginBlock(user_id=None, ipu_id=1) Twice()" in tilefx.module_repr(m)
